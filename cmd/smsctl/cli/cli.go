// Package cli is smsctl, the command line over the starter API: send an
// event's SMS, see its run, decide on it, list runs by state, and audit an
// event against the providers' records. It is built on cobra: every
// command and flag has help (smsctl send --help), and `smsctl completion
// bash|zsh|fish|powershell` prints a shell completion script.
// cmd/smsctl only calls Main.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
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

const rootLong = `smsctl sends and steers SMS event runs: start the SMS of a business event
(or find its run), see a run's state and timeline, decide resend or cancel
on a run awaiting a decision, list runs by state, and audit an event
against the providers' records.

Temporal is reached through TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE,
TEMPORAL_API_KEY and TEMPORAL_TLS_* (or a TEMPORAL_PROFILE), like the temporal CLI; runs whose
payloads are sealed need the workers' keys in SMSORCH_CODEC_KEYS or SMSORCH_CODEC_KEY_FILE.
Exit codes: 0 ok, 1 failure, 2 invalid input, 3 conflict, 4 not found.`

// Main is smsctl: it runs args (without the program name) in the
// process's environment, exporting its spans where the standard OTEL_*
// variables say, and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// A send or a decision is a span of its event's trace when the
	// standard OTEL_* variables name a collector.
	_, stopTracing, err := tracing.Setup(ctx, "smsctl", nil)
	if err != nil {
		fmt.Fprintln(stderr, "smsctl:", err)
		return ExitInvalid
	}
	code := Run(ctx, args, stdout, stderr, os.Environ())
	if err := stopTracing(); err != nil {
		fmt.Fprintln(stderr, "smsctl: the spans could not be exported:", err)
	}
	return code
}

// Run runs smsctl with args (without the program name) and environ (as
// os.Environ gives it) and returns the exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, environ []string) int {
	c := &cmd{out: stdout, errOut: stderr, env: envLookup(environ)}
	root := c.root()
	root.SetArgs(singleDash(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	return c.exit(root.ExecuteContext(ctx))
}

type cmd struct {
	out, errOut io.Writer
	env         envLookup
	asJSON      bool
	address, ns string
}

// root is the smsctl command with every subcommand.
func (c *cmd) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "smsctl",
		Short:         "Send and steer SMS event runs",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(c.errOut, cmd.UsageString())
			return usageError("give a command")
		},
	}
	pf := root.PersistentFlags()
	pf.BoolVar(&c.asJSON, "json", false, "print JSON for scripts (errors too, on stderr)")
	pf.StringVar(&c.address, "address", "", "Temporal frontend host:port, or a comma-separated list (overrides TEMPORAL_ADDRESS)")
	pf.StringVar(&c.ns, "namespace", "", "Temporal namespace (overrides TEMPORAL_NAMESPACE)")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(c.sendCommand(), c.statusCommand(), c.decideCommand(resend), c.decideCommand(cancel),
		c.waitCommand(), c.listCommand(), c.auditCommand(), c.codecKeyCommand(), c.certsCommand(), c.postgresRolesCommand(), c.composeSecretsCommand())
	return root
}

// flagError is a usage error, worded as smsctl worded it before cobra.
func flagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		msg = "flag provided but not defined: -" + name
	}
	return usageError("%s", msg)
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

// oneKey accepts exactly one argument, an event key, checked before
// anything is dialled: a bad key gets the fix, not a connection error.
func oneKey(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError("%s needs exactly one event key", name)
		}
		if _, err := keys.ParseEvent(args[0]); err != nil {
			return &starter.InvalidError{Field: "key", Err: err}
		}
		return nil
	}
}

// flagsOnly refuses positional arguments.
func flagsOnly(what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError("%s, got %q", what, args)
		}
		return nil
	}
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

// singleDash rewrites -name and -name=value to --name for the long flags
// smsctl knows, as Go's flag package (smsctl before cobra) accepted them,
// so scripts written then keep working. A flag's value is left alone, and
// so is everything after "--".
func singleDash(root *cobra.Command, args []string) []string {
	isBool := map[string]bool{}
	collect := func(f *pflag.Flag) { isBool[f.Name] = f.Value.Type() == "bool" }
	root.PersistentFlags().VisitAll(collect)
	for _, sub := range root.Commands() {
		sub.Flags().VisitAll(collect)
	}
	out := make([]string, 0, len(args))
	value := false // the previous argument was a flag that takes the next as its value
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if value {
			out, value = append(out, a), false
			continue
		}
		if name, ok := strings.CutPrefix(a, "-"); ok && len(name) > 1 {
			name = strings.TrimPrefix(name, "-")
			name, _, hasValue := strings.Cut(name, "=")
			if b, known := isBool[name]; known {
				if !strings.HasPrefix(a, "--") {
					a = "-" + a
				}
				value = !b && !hasValue
			}
		}
		out = append(out, a)
	}
	return out
}
