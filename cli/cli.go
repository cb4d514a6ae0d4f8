// Package cli is smsctl, the command line over the starter API: send an
// event's SMS, see its run, decide on it, list runs by state, and audit an
// event against the provider's records. cmd/smsctl only calls Main.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.uber.org/zap"

	"github.com/acme/smsorch/audit"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/frontends"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
	"github.com/acme/smsorch/simulator"
	"github.com/acme/smsorch/starter"
)

// Exit codes, so scripts can tell what went wrong.
const (
	ExitOK       = 0
	ExitFailure  = 1 // the command or the run failed (connection, run ended Failed)
	ExitInvalid  = 2 // bad usage or invalid input: nothing was started or sent
	ExitConflict = 3 // the key already belongs to a different message
	ExitNotFound = 4 // no run (or ledger record) for the key
)

const usage = `smsctl: send and steer SMS event runs.

Usage:
  smsctl [--json] [--address HOST:PORT] [--namespace NS] <command> [flags]

Commands:
  send     start the SMS of an event (or find its run)
             --kind K --id ID --stage S | --otp-user U --otp-attempt A | --key KEY
             --to +E164 --text TEXT --provider bird|sendy [--from NAME] [--wait]
  status   KEY                      the run's state, messages and timeline
  resend   KEY --reason R --by WHO  decide to resend (a new message under KEY~resend-N)
             [--force]  send even where the provider's records could not be searched (blind)
  cancel   KEY --reason R --by WHO  decide to send nothing more
             (both answer at once and refuse what does not fit the run's state;
              --signal sends the plain signal instead, applied when a worker runs)
  wait     KEY                      wait for the run to end and print its result
  list     [--state AwaitingDecision] [--limit 50]
  codec-key [--id ID]               print a new payload key for SMSORCH_CODEC_KEYS (ID:BASE64KEY)
  audit    KEY [--ledger PATH] [--simulator URL | --bird-url URL --bird-workspace ID --bird-channel ID | --sendy-url URL]
             our ledger beside the provider's records; proves or rules out a duplicate send

Temporal is reached through TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY and TEMPORAL_TLS_* (or a TEMPORAL_PROFILE), like the temporal CLI; runs whose
payloads are sealed need the workers' keys in SMSORCH_CODEC_KEYS or SMSORCH_CODEC_KEY_FILE.
Exit codes: 0 ok, 1 failure, 2 invalid input, 3 conflict, 4 not found.
`

// Main runs smsctl with args (without the program name) and environ (as
// os.Environ gives it) and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	c := &cmd{out: stdout, errOut: stderr, env: envLookup(environ)}
	return c.run(ctx, args)
}

type cmd struct {
	out, errOut io.Writer
	env         envLookup
	asJSON      bool
	address, ns string
}

func (c *cmd) run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("smsctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.asJSON, "json", false, "print JSON for scripts")
	fs.StringVar(&c.address, "address", "", "Temporal frontend host:port (overrides TEMPORAL_ADDRESS)")
	fs.StringVar(&c.ns, "namespace", "", "Temporal namespace (overrides TEMPORAL_NAMESPACE)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.out, usage)
			return ExitOK
		}
		fmt.Fprint(c.errOut, usage)
		return ExitInvalid
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	commands := map[string]func(context.Context, []string) error{
		"send": c.send, "status": c.status, "resend": c.decide(contract.ActionResend), "cancel": c.decide(contract.ActionCancel),
		"wait": c.wait, "list": c.list, "audit": c.audit, "codec-key": c.codecKey,
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(c.errOut, "smsctl: unknown command %q\n\n%s", name, usage)
		return ExitInvalid
	}
	err := run(ctx, rest)
	return c.exit(err)
}

// exit prints err and maps it onto an exit code.
func (c *cmd) exit(err error) int {
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	switch {
	case errors.Is(err, errUsage), errors.Is(err, starter.ErrInvalid):
		code = ExitInvalid
	case errors.Is(err, starter.ErrConflict):
		code = ExitConflict
	case errors.Is(err, starter.ErrNotFound), errors.Is(err, ledger.ErrNotFound):
		code = ExitNotFound
	}
	if c.asJSON {
		_ = json.NewEncoder(c.errOut).Encode(map[string]any{"error": err.Error(), "exitCode": code})
	} else {
		fmt.Fprintln(c.errOut, "smsctl:", err)
	}
	return code
}

var errUsage = errors.New("usage")

func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s (see smsctl --help)", errUsage, fmt.Sprintf(format, args...))
}

// parse parses flags that may come before or after positional arguments
// (smsctl resend KEY --by alice) and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError("%v", err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func oneKey(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError("%s needs exactly one event key", fs.Name())
	}
	// Checked before dialling, so a bad key gets the fix, not a connection error.
	if _, err := keys.ParseEvent(pos[0]); err != nil {
		return "", &starter.InvalidError{Field: "key", Err: err}
	}
	return pos[0], nil
}

// devFrontend is the dev stack's frontend (devstack.DefaultFrontendAddress,
// not imported: that package carries the whole Temporal server).
const devFrontend = "127.0.0.1:7233"

// envLookup is the environment in os.Environ form. The SDK's envconfig
// needs both lookups and the whole list (TEMPORAL_GRPC_META_* headers).
type envLookup []string

func (e envLookup) LookupEnv(k string) (v string, ok bool) {
	for _, kv := range e {
		if name, val, found := strings.Cut(kv, "="); found && name == k {
			v, ok = val, true // the last one wins, as in a shell
		}
	}
	return v, ok
}

func (e envLookup) Environ() []string { return e }

func (c *cmd) getenv(k string) string {
	v, _ := c.env.LookupEnv(k)
	return v
}

// codecKey prints a fresh payload key.
func (c *cmd) codecKey(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("codec-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	id := fs.String("id", time.Now().UTC().Format("2006-01"), "the key's id (it travels with every payload it seals)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError("codec-key takes --id ID only")
	}
	k, err := codec.NewKey(*id)
	if err != nil {
		return usageError("%v", err)
	}
	c.print(map[string]string{"key": k}, func(w io.Writer) {
		fmt.Fprintln(w, k)
	})
	return nil
}

// withStarter dials Temporal the way the temporal CLI does, runs f with a
// Starter over the connection, and closes it.
func (c *cmd) withStarter(ctx context.Context, f func(*starter.Starter) error) error {
	s, closeFn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	return f(s)
}

func (c *cmd) dial(ctx context.Context) (*starter.Starter, func(), error) {
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: c.env})
	if err != nil {
		return nil, nil, fmt.Errorf("read the Temporal connection settings: %w", err)
	}
	if c.address != "" {
		opts.HostPort = c.address
	}
	if opts.HostPort == "" {
		opts.HostPort = devFrontend // where `worker --dev` listens
	}
	if c.ns != "" {
		opts.Namespace = c.ns
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	opts.Logger = logging.SDK(zap.NewNop())
	if err := frontends.Apply(&opts); err != nil {
		return nil, nil, err
	}
	keys, err := codec.FromEnv(c.getenv)
	if err != nil {
		return nil, nil, err
	}
	if err := keys.Apply(&opts); err != nil {
		return nil, nil, err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Temporal at %s: %w (is `go run ./worker --dev` running? set TEMPORAL_ADDRESS for another cluster)", opts.HostPort, err)
	}
	return starter.New(tc, starter.WithNamespace(opts.Namespace)), tc.Close, nil
}

func (c *cmd) print(v any, text func(io.Writer)) {
	if c.asJSON {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return
	}
	text(c.out)
}

func (c *cmd) send(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	var e starter.Event
	fs.StringVar(&e.Kind, "kind", "", "the entity: order, invoice, user_invite")
	fs.StringVar(&e.ID, "id", "", "the entity's id")
	fs.StringVar(&e.Stage, "stage", "", "the event: shipped, delivered")
	fs.StringVar(&e.OTPUser, "otp-user", "", "OTP: the user id")
	fs.StringVar(&e.OTPAttempt, "otp-attempt", "", "OTP: the attempt id (a new one for every 'send the code again')")
	fs.StringVar(&e.Key, "key", "", "a key you derived yourself")
	fs.StringVar(&e.To, "to", "", "recipient, international form: +31612345678")
	fs.StringVar(&e.Text, "text", "", "the message")
	fs.StringVar(&e.Provider, "provider", "", "bird or sendy")
	fs.StringVar(&e.From, "from", "", "sender name (Sendy)")
	wait := fs.Bool("wait", false, "wait for the run to end and print its result")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("send takes flags only, got %q", pos)
	}
	// Validate before dialling: bad input gets its answer without a server.
	plan, err := starter.Validate(e, time.Now())
	if err != nil {
		return err
	}
	return c.withStarter(ctx, func(s *starter.Starter) error {
		res, err := s.Start(ctx, plan)
		if err != nil {
			return err
		}
		c.printStarted(res)
		if *wait {
			return c.waitFor(ctx, s, res.Key)
		}
		return nil
	})
}

func (c *cmd) printStarted(res starter.Result) {
	c.print(res, func(w io.Writer) {
		if res.Started {
			fmt.Fprintf(w, "started %s (run %s): %s\n", res.Key, res.RunID, res.State)
		} else {
			fmt.Fprintf(w, "existing run of %s (run %s): %s; nothing new was started\n", res.Key, res.RunID, res.State)
		}
		fmt.Fprintf(w, "  text: %s\n", res.Text)
		for _, warn := range res.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", warn)
		}
	})
}

func (c *cmd) status(ctx context.Context, args []string) error {
	key, err := oneKey(flag.NewFlagSet("status", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return c.withStarter(ctx, func(s *starter.Starter) error {
		st, err := s.Status(ctx, key)
		if err != nil {
			return err
		}
		c.print(st, func(w io.Writer) { writeStatus(w, st) })
		return nil
	})
}

// writeFindings prints what a person must know beyond the state: a
// duplicate proven or possible, and every resend with its basis.
func writeFindings(w io.Writer, r contract.Result) {
	switch {
	case r.DuplicateSend:
		fmt.Fprintln(w, "  DUPLICATE SEND: several accepted messages for one key (run smsctl audit "+r.Key+")")
	case r.PossibleDuplicate:
		fmt.Fprintln(w, "  POSSIBLE DUPLICATE: a second message may exist that the provider's records cannot confirm (see the timeline)")
	}
	for _, rs := range r.Resends {
		fmt.Fprintf(w, "  resend %s decided by %s (%s): %s\n", rs.Key, rs.By, rs.Reason, rs.Basis)
	}
}

func writeStatus(w io.Writer, st contract.Status) {
	fmt.Fprintf(w, "%s: %s\n", st.Key, st.State)
	if st.Reason != "" {
		fmt.Fprintf(w, "  %s\n", st.Reason)
	}
	fmt.Fprintf(w, "  to %s via %s; keys %s\n", st.To, st.Provider, strings.Join(st.KeysUsed, ", "))
	fmt.Fprintf(w, "  messages: %s (delivery: %s); attempts %d, replays %d\n", orNone(strings.Join(st.MessageIDs, ", ")), orNone(st.DeliveryStatus), st.Attempts, st.Replays)
	writeFindings(w, st.Result)
	if st.State == contract.AwaitingDecision {
		fmt.Fprintf(w, "  awaiting a decision until %s: smsctl resend|cancel %s --reason ... --by ...\n", st.DecisionDeadline.UTC().Format(time.RFC3339), st.Key)
	}
	fmt.Fprintln(w, "  timeline:")
	for _, e := range st.Timeline {
		fmt.Fprintf(w, "    %s  %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), e.Text)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (c *cmd) decide(action string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet(action, flag.ContinueOnError)
		var d contract.Decision
		d.Action = action
		fs.StringVar(&d.Reason, "reason", "", "why (kept in the run's timeline)")
		fs.StringVar(&d.By, "by", "", "who decides (kept in the run's timeline)")
		if action == contract.ActionResend {
			fs.BoolVar(&d.Force, "force", false, "send even where the provider's records could not be searched: a blind resend that may make a second SMS, recorded as such")
		}
		signal := fs.Bool("signal", false, "send the plain signal instead of the update: queued even with no worker running; a refusal shows only in the run's timeline")
		key, err := oneKey(fs, args)
		if err != nil {
			return err
		}
		if err := d.Validate(); err != nil {
			return usageError("%v", err)
		}
		return c.withStarter(ctx, func(s *starter.Starter) error {
			if *signal {
				if err := s.Signal(ctx, key, d); err != nil {
					return err
				}
				c.print(map[string]string{"key": key, "signal": action}, func(w io.Writer) {
					fmt.Fprintf(w, "signalled %s to %s; see `smsctl status %s` for what the run made of it\n", action, key, key)
				})
				return nil
			}
			ack, err := s.Decide(ctx, key, d)
			if err != nil {
				return err
			}
			c.print(ack, func(w io.Writer) { fmt.Fprintf(w, "%s: %s\n", key, ack.Message) })
			return nil
		})
	}
}

func (c *cmd) wait(ctx context.Context, args []string) error {
	key, err := oneKey(flag.NewFlagSet("wait", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return c.withStarter(ctx, func(s *starter.Starter) error { return c.waitFor(ctx, s, key) })
}

// waitFor prints the run's result; a run that ended Failed is a failure.
func (c *cmd) waitFor(ctx context.Context, s *starter.Starter, key string) error {
	res, err := s.Wait(ctx, key)
	if res.State == "" {
		return err
	}
	c.print(res, func(w io.Writer) {
		fmt.Fprintf(w, "%s ended %s: %s\n", res.Key, res.State, res.Reason)
		fmt.Fprintf(w, "  messages: %s; attempts %d, replays %d; keys %s\n", orNone(strings.Join(res.MessageIDs, ", ")), res.Attempts, res.Replays, strings.Join(res.KeysUsed, ", "))
		writeFindings(w, res)
	})
	if res.State == contract.Failed {
		return fmt.Errorf("the run of %s failed: %s", key, res.Reason)
	}
	return nil
}

func (c *cmd) list(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	stateName := fs.String("state", "", "only runs in this state (AwaitingDecision lists what needs a person)")
	limit := fs.Int("limit", 50, "at most this many runs")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("list takes flags only")
	}
	var state contract.State
	if *stateName != "" {
		if state, err = starter.ParseState(*stateName); err != nil {
			return err
		}
	}
	var runs []starter.Run
	if err := c.withStarter(ctx, func(s *starter.Starter) (err error) {
		runs, err = s.List(ctx, state, *limit)
		return err
	}); err != nil {
		return err
	}
	c.print(runs, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATE\tPROVIDER\tTEMPORAL\tSTARTED")
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Key, r.State, r.Provider, r.Status, r.StartTime.UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
		if len(runs) == 0 {
			fmt.Fprintln(w, "(no runs)")
		}
	})
	return nil
}

func (c *cmd) audit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	ledgerPath := fs.String("ledger", "", "the worker's ledger: a SQLite file or a postgres:// DSN (default $SMSORCH_LEDGER, else .smsorch/ledger.db)")
	simURL := fs.String("simulator", "", "the dev-mode provider simulator (default http://127.0.0.1:8299 when the ledger is the dev one, .smsorch/ledger.db)")
	var bc bird.Config
	var sc sendy.Config
	fs.StringVar(&bc.BaseURL, "bird-url", "", "Bird's API (access key from BIRD_ACCESS_KEY)")
	fs.StringVar(&bc.WorkspaceID, "bird-workspace", "", "Bird workspace id")
	fs.StringVar(&bc.ChannelID, "bird-channel", "", "Bird channel id")
	fs.StringVar(&sc.BaseURL, "sendy-url", "", "Sendy's API (token from SENDY_TOKEN)")
	key, err := oneKey(fs, args)
	if err != nil {
		return err
	}
	if *ledgerPath == "" {
		*ledgerPath, _ = c.env.LookupEnv("SMSORCH_LEDGER")
	}
	devLedger := *ledgerPath == ""
	if devLedger {
		*ledgerPath = ".smsorch/ledger.db"
	}
	if !ledger.IsPostgresDSN(*ledgerPath) {
		if _, err := os.Stat(*ledgerPath); err != nil {
			return usageError("no ledger at %s: give the worker's --ledger file (%v)", *ledgerPath, err)
		}
	}
	led, err := ledger.Open(ctx, *ledgerPath)
	if err != nil {
		return err
	}
	defer func() { _ = led.Close() }()
	e, err := led.Event(ctx, key)
	if err != nil {
		return err
	}
	secret := func(k string) logging.Secret { v, _ := c.env.LookupEnv(k); return logging.Secret(v) }
	real := (e.Provider == string(provider.Bird) && bc.BaseURL != "") || (e.Provider == string(provider.Sendy) && sc.BaseURL != "")
	if !real && *simURL == "" {
		if !devLedger {
			// Outside dev, never the simulator unless asked for: its records
			// would say nothing about what the real provider sent.
			return usageError("%s was sent through %s: give its API (--%s-url …, with the credentials in the environment), or --simulator URL for the dev simulator", key, e.Provider, e.Provider)
		}
		*simURL = "http://127.0.0.1:8299"
	}
	var pc provider.Client
	asked := ""
	switch {
	case e.Provider == string(provider.Bird) && bc.BaseURL != "":
		bc.AccessKey = secret("BIRD_ACCESS_KEY")
		pc, err = bird.New(bc)
		asked = "bird at " + bc.BaseURL
	case e.Provider == string(provider.Sendy) && sc.BaseURL != "":
		sc.Token = secret("SENDY_TOKEN")
		pc, err = sendy.New(sc)
		asked = "sendy at " + sc.BaseURL
	case e.Provider == string(provider.Bird):
		pc, err = bird.New(bird.Config{BaseURL: *simURL, AccessKey: simulator.DefaultBirdAccessKey, WorkspaceID: simulator.DevWorkspace, ChannelID: simulator.DevChannel})
		asked = "the dev simulator (as bird) at " + *simURL
	default:
		pc, err = sendy.New(sendy.Config{BaseURL: *simURL, Token: simulator.DefaultSendyToken})
		asked = "the dev simulator (as sendy) at " + *simURL
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.errOut, "smsctl audit: asked %s; ledger %s\n", asked, led.Describe())
	r, err := audit.Build(ctx, led, map[provider.Name]provider.Client{pc.Name(): pc}, key, time.Now())
	if err != nil {
		return err
	}
	c.print(r, func(w io.Writer) { _ = r.WriteText(w) })
	return nil
}
