// Package browsertest checks the Temporal web UI as a person sees it:
// headless Chromium (Debian's chromium, which .ci/run installs) against
// the embedded UI of a dev stack. Screenshots go to $SMSORCH_ARTIFACTS
// (default the test's temporary directory, printed).
package browsertest

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

const text = "Your code is 482913"

// policy: a window short enough that a provider down past it makes a
// run await a decision within seconds.
var policy = activities.Policy{
	ReplayWindow: 12 * time.Second, WindowMargin: 3 * time.Second, AttemptTimeout: time.Second,
	InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second,
	// The shortest horizon a policy may have: Bird's lock plus the attempt.
	LateEffectHorizon: activities.ProviderLockLifetime + time.Second,
	StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 300 * time.Millisecond,
}

func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install it with `apt-get install -y chromium` (.ci/run does)")
	return ""
}

func artifacts(t *testing.T) string {
	dir := os.Getenv("SMSORCH_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "browser")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// browser starts headless Chromium with the flags this machine's closed
// network needs.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// Start the browser on this context: one started by a page's shorter
	// context would close with it.
	_, err := chromedp.Run(ctx, chromedp.Navigate("about:blank"))
	require.NoError(t, err, "start %s", chromium(t))
	return ctx
}

// page opens url and waits, in real time, until the page's text holds
// every one of want, then saves a screenshot and returns the text.
func page(t *testing.T, ctx context.Context, u, shot string, want ...string) string {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Navigate(u))
	require.NoError(t, err, u)
	return shows(t, ctx, u, shot, want...)
}

// click clicks the first link or button whose text starts with label.
func click(t *testing.T, ctx context.Context, label string) {
	t.Helper()
	js := `(() => { const e = [...document.querySelectorAll('a,button,[role=tab]')].find(e => e.textContent.trim().startsWith(` + strconv.Quote(label) + `)); if (!e) return false; e.click(); return true })()`
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		require.NoError(t, err)
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "no %q to click", label)
		time.Sleep(500 * time.Millisecond)
	}
}

// shows waits, in real time, until the page's text holds every one of
// want, saves a screenshot and the text, and returns the text.
func shows(t *testing.T, ctx context.Context, u, shot string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var body string
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The page's text and that of its frames (the UI renders a run's
		// summary and details in sandboxed frames).
		body, err = chromedp.Run(ctx, chromedp.Evaluate[string](`[document.body ? document.body.innerText : '', ...[...document.querySelectorAll('iframe')].map(f => { try { return f.contentDocument.body.innerText } catch (e) { return f.srcdoc || '' } })].join('\n')`))
		require.NoError(t, err)
		all := true
		for _, w := range want {
			all = all && strings.Contains(body, w)
		}
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	require.NoError(t, err)
	path := filepath.Join(artifacts(t), shot)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	require.NoError(t, os.WriteFile(strings.TrimSuffix(path, ".png")+".txt", []byte(body), 0o644))
	t.Logf("screenshot %s", path)
	for _, w := range want {
		require.Contains(t, body, w, "%s shows %q (screenshot %s)", u, w, path)
	}
	return body
}

func startStack(t *testing.T, ring *codec.Keyring, token string) *app.App {
	t.Helper()
	cfg := app.Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0",
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: app.Off,
		Simulator:      simulator.Config{DeliveryDelay: 100 * time.Millisecond},
		SimFaults:      simulator.FaultFlag{{Kind: simulator.Error5xx, Provider: "bird", Key: "order-2-shipped", Rate: 1}},
		AttemptTimeout: policy.AttemptTimeout,
		Policies:       map[provider.Name]activities.Policy{provider.Bird: policy, provider.Sendy: policy},
		Codec:          ring, CodecToken: "",
	}
	if token != "" {
		cfg.CodecToken, cfg.CodecServerAddress = "ui-t0ken", "127.0.0.1:0"
	}
	a, err := app.Start(context.Background(), cfg, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Stop() })
	return a
}

// The list filtered by SmsState="AwaitingDecision" shows exactly the
// run awaiting one; a run's page shows its summary with the masked
// recipient; with encryption on and the codec server wired the input is
// readable, and on a UI without the token it is not.
func TestTheWebUIAsAPersonSeesIt(t *testing.T) {
	ring, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	ctx := browser(t)

	a := startStack(t, ring, "ui-t0ken")
	st := starter.New(a.Client)
	delivered, err := st.Send(context.Background(), starter.Event{Key: "order-1-shipped", Provider: "bird", To: "+31612345678", Text: text})
	require.NoError(t, err)
	_, err = st.Send(context.Background(), starter.Event{Key: "order-2-shipped", Provider: "bird", To: "+31612345678", Text: "Order 2 has shipped."})
	require.NoError(t, err)
	res, err := st.Wait(context.Background(), "order-1-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Eventually(t, func() bool {
		runs, err := st.List(context.Background(), contract.AwaitingDecision, 0)
		return err == nil && len(runs) == 1
	}, 60*time.Second, 500*time.Millisecond, "order-2-shipped awaits a decision")

	ui := a.Stack.UIURL() + "/namespaces/default/workflows"
	list := page(t, ctx, ui+"?query="+url.QueryEscape(`SmsState="AwaitingDecision"`), "1-awaiting-list.png", "order-2-shipped")
	require.NotContains(t, list, "order-1-shipped", "the filtered list shows only the run awaiting a decision")

	runURL := ui + "/order-1-shipped/" + delivered.RunID + "/history"
	page(t, ctx, runURL, "2-run-input-decoded.png", text)
	click(t, ctx, "User Metadata")
	// The summary names the recipient masked (the decoded input beside it
	// has the full number: this browser holds the codec token).
	shows(t, ctx, runURL, "3-run-summary.png", "SMS order-1-shipped to +31…78 via bird")

	// Another stack on the same keys whose UI has no codec endpoint, as a
	// person without the token sees it: the input stays sealed.
	b := startStack(t, ring, "")
	sb := starter.New(b.Client)
	other, err := sb.Send(context.Background(), starter.Event{Key: "order-1-shipped", Provider: "bird", To: "+31612345678", Text: text})
	require.NoError(t, err)
	_, err = sb.Wait(context.Background(), "order-1-shipped")
	require.NoError(t, err)
	// Waits for the history to be loaded, so the absence below means something.
	sealed := page(t, ctx, b.Stack.UIURL()+"/namespaces/default/workflows/order-1-shipped/"+other.RunID+"/history", "4-run-without-token.png", "order-1-shipped", "Workflow Execution Completed")
	require.NotContains(t, sealed, text, "without the codec token the input stays sealed")
	require.NotContains(t, sealed, "+31…78")
}

func mustKey(t *testing.T) string {
	k, err := codec.NewKey("ui-1")
	require.NoError(t, err)
	return k
}
