package intake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/starter"
)

// These requests are all answered before Temporal is reached, so the
// starter needs no client; the integration tests cover the rest.
func post(t *testing.T, h http.Handler, body string, header map[string]string) (int, Problem) {
	t.Helper()
	return do(h, http.MethodPost, "/v1/events", body, header)
}

func do(h http.Handler, method, path, body string, header map[string]string) (int, Problem) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var p Problem
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	return rec.Code, p
}

const event = `{"kind":"order","id":"58213","stage":"shipped","to":"+31612345678","text":"Order 58213 has shipped.","provider":"bird"}`

func TestSignatureIsRequiredWhenASecretIsSet(t *testing.T) {
	t.Parallel()
	now := time.Now()
	refused := map[string]int{} // what the worker's metrics count
	h := New(starter.New(nil), Config{Secrets: []logging.Secret{"shared-secret"}, Now: func() time.Time { return now },
		Refused: func(code string) { refused[code]++ }})
	signed := func(secret string, at time.Time, body string) map[string]string {
		return Sign(logging.Secret(secret), at, []byte(body))
	}
	// Signed correctly over a timestamp written another way.
	withTimestamp := func(ts string) map[string]string {
		return map[string]string{TimestampHeader: ts, SignatureHeader: signature("shared-secret", ts, []byte(event))}
	}
	withSig := func(sig string) map[string]string {
		m := signed("shared-secret", now, event)
		m[SignatureHeader] = sig
		return m
	}
	for name, tc := range map[string]struct {
		header map[string]string
		code   string
	}{
		"unsigned":                  {nil, "unauthorized"},
		"no timestamp":              {map[string]string{SignatureHeader: signed("shared-secret", now, event)[SignatureHeader]}, "unauthorized"},
		"wrong secret":              {signed("other", now, event), "unauthorized"},
		"other body":                {signed("shared-secret", now, event+" "), "unauthorized"},
		"body-only (old) scheme":    {withSig("sha256=" + strings.Repeat("0", 64)), "unauthorized"},
		"not even a value":          {withSig("yes please"), "unauthorized"},
		"stale: signed 10 min ago":  {signed("shared-secret", now.Add(-10*time.Minute), event), "stale"},
		"from the future":           {signed("shared-secret", now.Add(6*time.Minute), event), "stale"},
		"milliseconds, not seconds": {withTimestamp(strconv.FormatInt(now.UnixMilli(), 10)), "stale"},
		"far past":                  {withTimestamp("-9223372036854775807"), "stale"},
	} {
		code, p := post(t, h, event, tc.header)
		require.Equal(t, http.StatusUnauthorized, code, name)
		require.Equal(t, tc.code, p.Error.Code, name)
		require.NotContains(t, p.Error.Message, "shared-secret", name)
	}
	require.Equal(t, map[string]int{"unauthorized": 6, "stale": 4}, refused, "every refusal is counted by its code")
	// A correctly signed but invalid event gets past the signature check,
	// and so does the same signed request again: a sender's retry after a
	// lost answer is answered, never refused as a replay (the POST is
	// idempotent by the event's key).
	bad := strings.Replace(event, "+31612345678", "0612345678", 1)
	header := signed("shared-secret", now.Add(-time.Minute), bad)
	for i := 0; i < 3; i++ {
		code, p := post(t, h, bad, header)
		require.Equal(t, http.StatusBadRequest, code, "post %d: %s", i+1, p.Error.Message)
		require.Equal(t, "to", p.Error.Field)
	}
}

// dedupService answers StartWorkflowExecution as Temporal does for one
// event: the first request starts the run; the same request id again is
// answered as the first (Started true, the server's request-id dedup);
// any other request finds the existing run (Started false).
type dedupService struct {
	workflowservice.WorkflowServiceClient
	mu    sync.Mutex
	first string
	ids   []string
}

func (d *dedupService) StartWorkflowExecution(_ context.Context, req *workflowservice.StartWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.StartWorkflowExecutionResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids = append(d.ids, req.GetRequestId())
	if d.first == "" {
		d.first = req.GetRequestId()
	}
	return &workflowservice.StartWorkflowExecutionResponse{RunId: "run-1", Started: req.GetRequestId() == d.first}, nil
}

type dedupTemporal struct {
	fakeTemporal
	svc *dedupService
}

func (f *dedupTemporal) WorkflowService() workflowservice.WorkflowServiceClient { return f.svc }

// The same signed POST again (what a webhook sender or a proxy does after
// a lost answer) names the same start request to Temporal, so it gets the
// first one's answer, 202 with the same run, from this intake or another
// (no memory is kept in the intake). A request signed again, with a new
// timestamp, is another request: it finds the run (200, the run's current
// answer).
func TestAnIdenticalSignedPostIsAnsweredAsTheFirst(t *testing.T) {
	t.Parallel()
	now := time.Now()
	svc := &dedupService{}
	f := &dedupTemporal{svc: svc, fakeTemporal: fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
		input: contract.Input{Key: "order-58213-shipped", Provider: "bird", To: "+31612345678", Text: "Order 58213 has shipped."}}}
	cfg := Config{Secrets: []logging.Secret{"shared-secret"}, Now: func() time.Time { return now }}
	intakes := []http.Handler{New(starter.New(f), cfg), New(starter.New(f), cfg)}
	send := func(h http.Handler, header map[string]string) (int, starter.Result) {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(event))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var res starter.Result
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res), rec.Body.String())
		return rec.Code, res
	}
	signed := Sign("shared-secret", now, []byte(event))
	for i, h := range []http.Handler{intakes[0], intakes[0], intakes[1]} {
		code, res := send(h, signed)
		require.Equal(t, http.StatusAccepted, code, "post %d of the same signed request", i+1)
		require.True(t, res.Started, "post %d", i+1)
		require.Equal(t, "run-1", res.RunID)
		require.Equal(t, "order-58213-shipped", res.Key)
	}
	code, res := send(intakes[1], Sign("shared-secret", now.Add(time.Second), []byte(event)))
	require.Equal(t, http.StatusOK, code, "signed again: another request, which finds the run")
	require.False(t, res.Started)
	require.Equal(t, "run-1", res.RunID)
	require.Len(t, svc.ids, 4)
	require.Equal(t, svc.ids[0], svc.ids[1])
	require.Equal(t, svc.ids[0], svc.ids[2])
	require.NotEqual(t, svc.ids[0], svc.ids[3])
	require.NotContains(t, svc.ids[0], strings.TrimPrefix(signed[SignatureHeader], "sha256="), "the request id does not carry the signature")
}

// Two secrets are accepted at once, so a secret rotates without a
// refused request: senders move from the previous to the current one.
func TestTwoSecretsWhileOneRotates(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{Secrets: []logging.Secret{"the-new-secret", "the-old-secret"}, Now: func() time.Time { return now }})
	bad := strings.Replace(event, "+31612345678", "0612345678", 1)
	for _, secret := range []logging.Secret{"the-new-secret", "the-old-secret"} {
		code, p := post(t, h, bad, Sign(secret, now, []byte(bad)))
		require.Equal(t, http.StatusBadRequest, code, "signed with %s: past the check", secret.Reveal())
		require.Equal(t, "to", p.Error.Field)
	}
	code, p := post(t, h, bad, Sign("a-retired-secret", now, []byte(bad)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "unauthorized", p.Error.Code)
}

// A POST to an unsigned intake must say it is JSON: a browser's
// cross-site form (text/plain, application/x-www-form-urlencoded) cannot
// then post an event to it.
func TestAPostMustBeJSON(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{})
	bad := strings.Replace(event, "+31612345678", "0612345678", 1)
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonp"} {
		code, p := post(t, h, bad, map[string]string{"Content-Type": ct})
		require.Equal(t, http.StatusUnsupportedMediaType, code, "Content-Type %q", ct)
		require.Equal(t, "content_type", p.Error.Code)
		require.Contains(t, p.Error.Message, "Content-Type: application/json")
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		code, p := post(t, h, bad, map[string]string{"Content-Type": ct})
		require.Equal(t, http.StatusBadRequest, code, "Content-Type %q: on to the event's checks", ct)
		require.Equal(t, "to", p.Error.Field)
	}
}

// GET /v1/events/{key} shows a run's recipient (masked) and timeline: with
// a secret it is signed like a POST, over the method and the path.
func TestReadingARunIsSignedToo(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{Secrets: []logging.Secret{"shared-secret"}, Now: func() time.Time { return now }})
	get := func(path string, header map[string]string) (int, Problem) {
		return do(h, http.MethodGet, path, "", header)
	}
	code, p := get("/v1/events/order-1-shipped", nil)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "unauthorized", p.Error.Code)
	code, _ = get("/v1/events/order-1-shipped", Sign("shared-secret", now, []byte("GET /v1/events/order-2-shipped")))
	require.Equal(t, http.StatusUnauthorized, code, "signed for another run")
	// Signed for this path: past the check, to the starter, which refuses the key.
	code, p = get("/v1/events/order%201", Sign("shared-secret", now, []byte("GET /v1/events/order%201")))
	require.Equal(t, http.StatusBadRequest, code, p.Error.Message)
}

func TestEachClientHasARate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{RatePerMinute: 60, Now: func() time.Time { return now }})
	from := func(addr string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader("{"))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusTooManyRequests {
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
		}
		return rec.Code
	}
	// A burst of a tenth of the minute's budget, then 429.
	for i := 0; i < 6; i++ {
		require.Equal(t, http.StatusBadRequest, from("10.0.0.1:5000"), "request %d", i)
	}
	require.Equal(t, http.StatusTooManyRequests, from("10.0.0.1:5001"), "same client, another port")
	require.Equal(t, http.StatusBadRequest, from("10.0.0.2:5000"), "another client has its own budget")
	now = now.Add(time.Second)
	require.Equal(t, http.StatusBadRequest, from("10.0.0.1:5000"), "a second later, one more")
	require.Equal(t, http.StatusTooManyRequests, from("10.0.0.1:5000"))
}

// On a signed intake the rate limit comes after authentication: a flood
// of unsigned requests from an address (or a proxy) spends a budget of
// its own, never the budget of the signed senders behind it.
func TestUnsignedRequestsCannotSpendTheSignedSendersBudget(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{Secrets: []logging.Secret{"shared-secret"}, RatePerMinute: 1200, Now: func() time.Time { return now }})
	// Signed and past the check, {} reaches the starter, which finds it
	// invalid: 400, before Temporal is called.
	signedPost := func() (int, Problem) { return post(t, h, `{}`, Sign("shared-secret", now, []byte(`{}`))) }
	unsigned := map[int]int{}
	for i := 0; i < 100; i++ {
		code, _ := post(t, h, `{}`, nil)
		unsigned[code]++
	}
	// A minute's worth at once, then 429.
	require.Equal(t, map[int]int{http.StatusUnauthorized: UnsignedPerMinute, http.StatusTooManyRequests: 100 - UnsignedPerMinute}, unsigned)
	req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(`{}`))
	req.Header.Set(TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(SignatureHeader, "sha256=00")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "a wrong signature is unauthenticated too")
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "more than 60 unauthenticated requests a minute")
	code, _ := do(h, http.MethodGet, "/v1/events/order-1-shipped", "", nil)
	require.Equal(t, http.StatusTooManyRequests, code, "an unsigned read too")
	code, _ = do(h, http.MethodPost, "/v1/events", strings.Repeat("x", DefaultMaxBody+1), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, "a body that cannot be read says so, and spends nothing")
	code, _ = post(t, h, `{}`, map[string]string{"X-Forwarded-For": "198.51.100.7"})
	require.Equal(t, http.StatusTooManyRequests, code, "X-Forwarded-For is no way out when no proxy is named")

	// The signed senders at the same address keep their whole budget: a
	// tenth of RatePerMinute at once, then 429.
	for i := 0; i < 120; i++ {
		code, p := signedPost()
		require.Equal(t, http.StatusBadRequest, code, "signed post %d: %s", i, p.Error.Message)
		require.Equal(t, "invalid", p.Error.Code)
	}
	code, p := signedPost()
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Contains(t, p.Error.Message, "more than 1200 requests a minute")
	// A second later, one more unsigned request.
	now = now.Add(time.Second)
	code, _ = post(t, h, `{}`, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = post(t, h, `{}`, nil)
	require.Equal(t, http.StatusTooManyRequests, code)
}

func TestBadRequestsSayWhatToFix(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{MaxBody: 1024})
	for _, tc := range []struct {
		name, body   string
		status       int
		code, field  string
		messageHints string
	}{
		{"not JSON", `order shipped`, 400, "bad_json", "", `send {"kind":"order"`},
		{"misspelt field", strings.Replace(event, `"to"`, `"recipient"`, 1), 400, "bad_json", "", `unknown field "recipient"`},
		// encoding/json would keep the last of two, in any case, and
		// ignore what follows the first value.
		{"a field twice", strings.Replace(event, `"to":`, `"to":"+972502345678","to":`, 1), 400, "bad_json", "", `the field "to" is given twice`},
		{"a field twice in another case", strings.Replace(event, `"to":`, `"TO":"+972502345678","to":`, 1), 400, "bad_json", "", `the field "to" is given twice`},
		{"two events", event + event, 400, "bad_json", "", "data after the event"},
		{"data after the event", event + ` trailing`, 400, "bad_json", "", "data after the event"},
		{"no country code", strings.Replace(event, "+31612345678", "0612345678", 1), 400, "invalid", "to", "international form"},
		{"empty text", strings.Replace(event, "Order 58213 has shipped.", "", 1), 400, "invalid", "text", "write the message"},
		{"key with a space", `{"key":"order 58213","to":"+31612345678","text":"x","provider":"bird"}`, 400, "invalid", "key", "without spaces"},
		{"unknown provider", strings.Replace(event, "bird", "pigeon", 1), 400, "invalid", "provider", `use "bird" or "sendy"`},
		{"too large", `{"text":"` + strings.Repeat("x", 2000) + `"}`, 413, "too_large", "", "larger than 1024 bytes"},
	} {
		code, p := post(t, h, tc.body, nil)
		require.Equal(t, tc.status, code, tc.name)
		require.Equal(t, tc.code, p.Error.Code, tc.name)
		require.Equal(t, tc.field, p.Error.Field, tc.name)
		require.Contains(t, p.Error.Message, tc.messageHints, tc.name)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", 200},
		{http.MethodGet, "/v1/events", 405},
		{http.MethodDelete, "/v1/events/order-1-shipped", 405},
		{http.MethodGet, "/v1/events/order%201", 400},
		{http.MethodGet, "/nope", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.want, rec.Code, "%s %s", tc.method, tc.path)
	}
}

// A client that sends its body slowly is cut off at the read timeout
// instead of holding a connection (and a goroutine) open.
func TestASlowClientIsCutOff(t *testing.T) {
	t.Parallel()
	srv := NewServer(New(starter.New(nil), Config{}))
	srv.ReadTimeout = 300 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	defer func() { _ = srv.Close() }()
	conn, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(event), event[:10])
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	resp, err := io.ReadAll(conn) // the rest of the body never comes
	require.Less(t, time.Since(start), 4*time.Second, "cut off near the read timeout, not at the client's leisure")
	require.NotContains(t, string(resp), "202 Accepted")
	if err != nil {
		require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the server closed the connection")
	}
}

// fakeTemporal answers what a POST for an event whose run already exists
// asks of Temporal: the start (answered "not started", USE_EXISTING), the
// run's description, its first history event, and, for a closed run, its
// result. Anything else panics through the nil embedded client.
type fakeTemporal struct {
	client.Client
	// status and attrs are what DescribeWorkflowExecution answers.
	status enumspb.WorkflowExecutionStatus
	attrs  map[string]*commonpb.Payload
	// result, or err, is what the closed run's Get answers.
	result contract.Result
	err    error
	input  contract.Input
	gets   int
}

type fakeService struct {
	workflowservice.WorkflowServiceClient
}

func (fakeService) StartWorkflowExecution(context.Context, *workflowservice.StartWorkflowExecutionRequest, ...grpc.CallOption) (*workflowservice.StartWorkflowExecutionResponse, error) {
	return &workflowservice.StartWorkflowExecutionResponse{RunId: "run-1", Started: false}, nil
}

func (f *fakeTemporal) WorkflowService() workflowservice.WorkflowServiceClient { return fakeService{} }

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution:        &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Status:           f.status,
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: f.attrs},
	}}, nil
}

func (f *fakeTemporal) GetWorkflowHistory(context.Context, string, string, bool, enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	input, err := converter.GetDefaultDataConverter().ToPayloads(f.input)
	if err != nil {
		panic(err)
	}
	return &events{list: []*historypb.HistoryEvent{{
		EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{Input: input},
		},
	}}}
}

func (f *fakeTemporal) GetWorkflow(_ context.Context, id, runID string) client.WorkflowRun {
	f.gets++
	return &closedRun{f: f}
}

type events struct{ list []*historypb.HistoryEvent }

func (e *events) HasNext() bool { return len(e.list) > 0 }

func (e *events) Next() (*historypb.HistoryEvent, error) {
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

type closedRun struct {
	client.WorkflowRun
	f *fakeTemporal
}

func (r *closedRun) Get(_ context.Context, v any) error {
	if r.f.err != nil {
		return r.f.err
	}
	*v.(*contract.Result) = r.f.result
	return nil
}

func keyword(t *testing.T, v string) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

// postExisting posts the event whose run f holds and decodes the answer.
func postExisting(t *testing.T, f *fakeTemporal) (int, starter.Result) {
	t.Helper()
	h := New(starter.New(f), Config{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(event))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	var res starter.Result
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res), rec.Body.String())
	return rec.Code, res
}

// A POST for an event whose run exists answers 200 with the run's current
// state. A closed run's search attributes may be served from the
// visibility store, or not at all (when the server may not fetch them
// from there), so a closed run's state comes from its result, which is
// in its history.
func TestPostOfAnExistingRunAnswersItsCurrentState(t *testing.T) {
	t.Parallel()
	in := contract.Input{Key: "order-58213-shipped", Provider: "bird", To: "+31612345678", Text: "Order 58213 has shipped."}
	state := contract.StateAttribute.GetName()
	for _, tc := range []struct {
		name   string
		f      fakeTemporal
		want   contract.State
		looked bool
	}{
		{"open run: its own attributes", fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			attrs: map[string]*commonpb.Payload{state: keyword(t, string(contract.Reconciling))}}, contract.Reconciling, false},
		{"completed run without attributes", fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			result: contract.Result{Key: in.Key, State: contract.Delivered}}, contract.Delivered, true},
		{"completed run, attributes behind", fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			attrs:  map[string]*commonpb.Payload{state: keyword(t, string(contract.Sending))},
			result: contract.Result{Key: in.Key, State: contract.Delivered}}, contract.Delivered, true},
		{"failed run", fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_FAILED,
			err: temporal.NewApplicationError("no decision", contract.FailureType, contract.Result{Key: in.Key, State: contract.Failed})}, contract.Failed, true},
		{"terminated run: no result, the last recorded state", fakeTemporal{status: enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED,
			attrs: map[string]*commonpb.Payload{state: keyword(t, string(contract.AwaitingDecision))},
			err:   errors.New("workflow execution terminated")}, contract.AwaitingDecision, false},
	} {
		f := tc.f
		f.input = in
		code, res := postExisting(t, &f)
		require.Equal(t, http.StatusOK, code, tc.name)
		require.False(t, res.Started, tc.name)
		require.Equal(t, "run-1", res.RunID, tc.name)
		require.Equal(t, in.Key, res.Key, tc.name)
		require.Equal(t, tc.want, res.State, tc.name)
		require.Equal(t, tc.looked, f.gets > 0, "%s: the result is read only for a run that ended with one", tc.name)
	}
}
