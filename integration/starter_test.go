package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

func goAPI() *starter.Starter {
	return starter.New(stack.Client, starter.WithNamespace(stack.Namespace))
}

func event(p provider.Name, id string) starter.Event {
	in := input(p, "unused")
	return starter.Event{Kind: "order", ID: id, Stage: "shipped", To: in.To, Text: "Order " + id + " has shipped.", Provider: string(p)}
}

func TestFiftyConcurrentStartsThroughTheGoAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := event(provider.Bird, uniqueID())
	results := make([]starter.Result, 50)
	errs := make([]error, 50)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = goAPI().Send(ctx, e)
		}()
	}
	wg.Wait()
	started := 0
	for i, r := range results {
		require.NoError(t, errs[i])
		require.Equal(t, results[0].RunID, r.RunID, "one run")
		if r.Started {
			started++
		}
	}
	require.Equal(t, 1, started, "exactly one caller is told it started the run; 49 that it existed")

	res, err := goAPI().Wait(ctx, results[0].Key)
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Len(t, messages(provider.Bird, results[0].Key), 1)

	// The starter gives the run its summary and details in the Temporal UI.
	d, err := stack.Client.DescribeWorkflowExecution(ctx, results[0].Key, "")
	require.NoError(t, err)
	var summary, details string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(d.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(d.GetExecutionConfig().GetUserMetadata().GetDetails(), &details))
	require.Equal(t, "SMS "+results[0].Key+" to +31…78 via bird", summary)
	require.Regexp(t, `- text: GSM-7, \d+ septets, 1 segment\(s\)`, details)
	require.NotContains(t, details, e.Text, "the text may be a one-time code")

	again, err := goAPI().Send(ctx, e)
	require.NoError(t, err)
	require.False(t, again.Started)
	require.Equal(t, contract.Delivered, again.State, "a start after completion reports the run's state")
	require.Len(t, messages(provider.Bird, results[0].Key), 1)
}

type intakeAnswer struct {
	status int
	result starter.Result
	err    intake.Problem
}

func postEvent(t *testing.T, e starter.Event) intakeAnswer {
	t.Helper()
	body, err := json.Marshal(e)
	require.NoError(t, err)
	resp, err := http.Post(stack.IntakeURL+"/v1/events", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	a := intakeAnswer{status: resp.StatusCode}
	if resp.StatusCode < 300 {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a.result))
	} else {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&a.err))
	}
	return a
}

func TestFiftyConcurrentPostsToTheHTTPIntake(t *testing.T) {
	t.Parallel()
	e := event(provider.Sendy, uniqueID())
	answers := make([]intakeAnswer, 50)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = postEvent(t, e)
		}()
	}
	wg.Wait()
	codes := map[int]int{}
	for _, a := range answers {
		codes[a.status]++
		require.Equal(t, answers[0].result.RunID, a.result.RunID)
		require.Equal(t, a.status == http.StatusAccepted, a.result.Started)
	}
	require.Equal(t, map[int]int{http.StatusAccepted: 1, http.StatusOK: 49}, codes)
	key := answers[0].result.Key
	_, err := goAPI().Wait(context.Background(), key)
	require.NoError(t, err)
	require.Len(t, messages(provider.Sendy, key), 1)

	// The intake also answers the run's state.
	resp, err := http.Get(stack.IntakeURL + "/v1/events/" + key)
	require.NoError(t, err)
	var st contract.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	_ = resp.Body.Close()
	require.Equal(t, contract.Delivered, st.State)
}

func TestConflictingPayloadIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := event(provider.Bird, uniqueID())
	first, err := goAPI().Send(ctx, e)
	require.NoError(t, err)
	require.True(t, first.Started)

	other := e
	other.Text = "Order was cancelled."
	_, err = goAPI().Send(ctx, other)
	var ce *starter.ConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.True(t, errors.Is(err, starter.ErrConflict))
	require.Equal(t, "text", ce.Field)
	require.Contains(t, err.Error(), "derive its own key")

	elsewhere := e
	elsewhere.To = "+31699999999"
	a := postEvent(t, elsewhere)
	require.Equal(t, http.StatusConflict, a.status)
	require.Equal(t, "recipient", a.err.Error.Field)

	_, err = goAPI().Wait(ctx, first.Key)
	require.NoError(t, err)
	msgs := messages(provider.Bird, first.Key)
	require.Len(t, msgs, 1)
	require.Equal(t, e.Text, msgs[0].Text, "only the first message was sent")
}

// smsctl runs the CLI against the integration stack.
func smsctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env := []string{"TEMPORAL_ADDRESS=" + stack.Stack.FrontendAddress(), "TEMPORAL_NAMESPACE=" + stack.Namespace}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.Run(ctx, args, &out, &errOut, env)
	return code, out.String(), errOut.String()
}

func TestTheCLIMovesAnAwaitingRun(t *testing.T) {
	t.Parallel()
	t.Run("resend by update", func(t *testing.T) {
		t.Parallel()
		in := downPastTheWindow(t, provider.Bird)
		// The list reads visibility, which follows the run's state a moment
		// later (the run's own query above is immediate).
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, out, _ := smsctl(t, "list", "--state", "awaitingdecision", "--limit", "1000")
			assert.Equal(c, cli.ExitOK, code)
			assert.Contains(c, out, in.Key)
		}, 10*time.Second, 200*time.Millisecond)

		code, out, errOut := smsctl(t, "resend", in.Key, "--reason", "customer called", "--by", "erin")
		require.Equal(t, cli.ExitOK, code, errOut)
		require.Contains(t, out, "resend accepted")
		code, out, _ = smsctl(t, "wait", in.Key)
		require.Equal(t, cli.ExitOK, code)
		require.Contains(t, out, "ended Delivered")
		require.Len(t, messages(provider.Bird, in.Key+"~resend-1"), 1)

		// A decision that no longer fits is refused at once, with the reason.
		code, _, errOut = smsctl(t, "cancel", in.Key, "--reason", "too late", "--by", "erin")
		require.Equal(t, cli.ExitFailure, code)
		require.Contains(t, errOut, "refused: the run of "+in.Key+" has ended (Delivered, Completed)")
	})
	t.Run("a blind resend needs --force", func(t *testing.T) {
		t.Parallel()
		in := downPastTheWindow(t, provider.Sendy)
		code, _, errOut := smsctl(t, "resend", in.Key, "--reason", "customer called", "--by", "gus")
		require.Equal(t, cli.ExitFailure, code)
		require.Contains(t, errOut, `sendy's records cannot be searched for this event`)
		require.Contains(t, errOut, `resend with "force": true`)

		code, out, errOut := smsctl(t, "resend", in.Key, "--reason", "customer confirmed nothing arrived", "--by", "gus", "--force")
		require.Equal(t, cli.ExitOK, code, errOut)
		require.Contains(t, out, "forced resend accepted")
		code, out, _ = smsctl(t, "--json", "wait", in.Key)
		require.Equal(t, cli.ExitOK, code)
		var res contract.Result
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, contract.Delivered, res.State)
		require.Equal(t, []string{in.Key + "~resend-1"}, res.BlindResends)
		require.True(t, res.PossibleDuplicate)
		require.Len(t, messages(provider.Sendy, in.Key+"~resend-1"), 1)
	})
	t.Run("cancel by plain signal", func(t *testing.T) {
		t.Parallel()
		in := downPastTheWindow(t, provider.Sendy)
		code, out, errOut := smsctl(t, "cancel", in.Key, "--reason", "order cancelled", "--by", "frank", "--signal")
		require.Equal(t, cli.ExitOK, code, errOut)
		require.Contains(t, out, "signalled cancel")
		code, out, _ = smsctl(t, "--json", "wait", in.Key)
		require.Equal(t, cli.ExitOK, code)
		var res contract.Result
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		require.Equal(t, contract.Cancelled, res.State)
		require.Empty(t, sim().Messages(simulator.Filter{Key: in.Key + "~resend-1"}))
	})
}

func TestTheCLISendsReportsAndAudits(t *testing.T) {
	t.Parallel()
	id := uniqueID()
	args := []string{"send", "--kind", "order", "--id", id, "--stage", "shipped", "--to", "+31 6 1234 5678", "--text", "Order " + id + " has shipped.", "--provider", "bird"}
	fault(t, simulator.Fault{Kind: simulator.Unstored, Provider: "bird", Key: "order-" + id + "-shipped"})
	code, out, errOut := smsctl(t, append(args, "--wait")...)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "started order-"+id+"-shipped")
	require.Contains(t, out, "text: GSM-7")
	require.Contains(t, out, "ended Delivered")

	code, out, _ = smsctl(t, args...)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "existing run of order-"+id+"-shipped", "nothing new was started")

	conflicting := append(append([]string{}, args[:len(args)-4]...), "--text", "Other text", "--provider", "bird")
	code, _, errOut = smsctl(t, conflicting...)
	require.Equal(t, cli.ExitConflict, code, errOut)

	code, out, _ = smsctl(t, "status", "order-"+id+"-shipped")
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "DUPLICATE SEND")

	code, out, errOut = smsctl(t, "audit", "order-"+id+"-shipped", "--ledger", stack.Config.LedgerPath, "--simulator", sim().URL)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "PROVEN DUPLICATE SEND")
	require.Contains(t, out, "Destination:     +31…78", "masked unless --reveal")
	require.NotContains(t, out, "31612345678")
	code, out, errOut = smsctl(t, "--json", "audit", "order-"+id+"-shipped", "--ledger", stack.Config.LedgerPath, "--simulator", sim().URL)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.NotContains(t, out, "31612345678", "the JSON too")
	code, out, errOut = smsctl(t, "audit", "order-"+id+"-shipped", "--ledger", stack.Config.LedgerPath, "--simulator", sim().URL, "--reveal")
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, out, "Destination:     +31612345678", "for a support request")
	require.Contains(t, errOut, "asked the dev simulator (as bird) at "+sim().URL, "the audit says whom it asked")
	// A ledger given, no provider API and no simulator: refused, not
	// answered from the simulator.
	code, _, errOut = smsctl(t, "audit", "order-"+id+"-shipped", "--ledger", stack.Config.LedgerPath)
	require.Equal(t, cli.ExitInvalid, code)
	require.Contains(t, errOut, "give its API (--bird-url")

	code, _, _ = smsctl(t, "status", "order-404-shipped")
	require.Equal(t, cli.ExitNotFound, code)
	code, _, _ = smsctl(t, "audit", "order-404-shipped", "--ledger", stack.Config.LedgerPath)
	require.Equal(t, cli.ExitNotFound, code)
}

// A second start of the same event costs one call beside the start: the
// describe that reads the run's state also reads the fingerprint of its
// message, so the run's history is not read. Another message under the
// key still reads it, to name the field.
func TestASecondStartCostsOneDescribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var calls []string
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		mu.Lock()
		calls = append(calls, method[strings.LastIndex(method, "/")+1:])
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := client.Dial(client.Options{
		HostPort: stack.Stack.FrontendAddress(), Namespace: stack.Namespace, Logger: logging.SDK(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}},
	})
	require.NoError(t, err)
	defer c.Close()
	s := starter.New(c, starter.WithNamespace(stack.Namespace))
	since := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := calls
		calls = nil
		return got
	}

	e := event(provider.Bird, uniqueID())
	// The first attempt hangs for 3 s (then a retry under the same key
	// is answered): the run stays open through the repeats below.
	key := "order-" + e.ID + "-shipped"
	fault(t, simulator.Fault{Kind: simulator.Hang, Provider: "bird", Key: key, Delay: simulator.Duration(3 * time.Second)})
	first, err := s.Send(ctx, e)
	require.NoError(t, err)
	require.True(t, first.Started)
	require.Equal(t, key, first.Key)
	since()
	for range 3 {
		again, err := s.Send(ctx, e)
		require.NoError(t, err)
		require.False(t, again.Started)
		require.Equal(t, first.RunID, again.RunID)
		require.False(t, again.State.Final(), "the run is still open")
		require.Equal(t, []string{"StartWorkflowExecution", "DescribeWorkflowExecution"}, since(), "a second start of the open run")
	}

	other := e
	other.Text = "Order was cancelled."
	_, err = s.Send(ctx, other)
	var ce *starter.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "text", ce.Field)
	require.Equal(t, []string{"StartWorkflowExecution", "DescribeWorkflowExecution", "GetWorkflowExecutionHistory"}, since(),
		"another message reads the open run's input to name the field")

	_, err = s.Wait(ctx, first.Key)
	require.NoError(t, err)
	since()
	// A closed run's state is read from its close event: one read more.
	again, err := s.Send(ctx, e)
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, again.State)
	require.Equal(t, []string{"StartWorkflowExecution", "DescribeWorkflowExecution", "GetWorkflowExecutionHistory"}, since(), "a second start of the closed run")
	require.Len(t, messages(provider.Bird, first.Key), 1)
}
