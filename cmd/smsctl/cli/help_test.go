package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every command answers --help on stdout with its own usage and flags,
// and exits 0; `smsctl send --help` once printed "flag: help requested".
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	code, out, errOut := run("send", "--help")
	require.Equal(t, ExitOK, code, errOut)
	for _, flag := range []string{"--kind", "--otp-user", "--otp-attempt", "--key", "--to", "--text", "--provider", "--from", "--fallback", "--wait", "--json"} {
		require.Contains(t, out, flag, "send --help lists %s", flag)
	}
	require.NotContains(t, out, "help requested")

	for cmd, flags := range map[string][]string{
		"status":         nil,
		"resend":         {"--reason", "--by", "--force", "--provider", "--signal"},
		"cancel":         {"--reason", "--by", "--signal"},
		"wait":           nil,
		"list":           {"--state", "--limit"},
		"audit":          {"--ledger", "--simulator", "--bird-url", "--sendy-url"},
		"codec-key":      {"--id"},
		"certs":          {"--dir", "--server-name", "--days", "--ca-days"},
		"postgres-roles": nil,
	} {
		code, out, errOut := run(cmd, "--help")
		require.Equal(t, ExitOK, code, "%s --help: %s", cmd, errOut)
		require.Contains(t, out, "smsctl "+cmd, "%s --help shows its usage", cmd)
		for _, f := range flags {
			require.Contains(t, out, f, "%s --help lists %s", cmd, f)
		}
	}
	code, out, _ = run("help", "resend")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "--force")
	require.NotContains(t, mustRun(t, "cancel", "--help"), "--force", "cancel has no --force")
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(args...)
	require.Equal(t, ExitOK, code, errOut)
	return out
}

// Shell completion comes with cobra, for every command and flag, and
// completes provider names.
func TestShellCompletion(t *testing.T) {
	t.Parallel()
	out := mustRun(t, "completion", "bash")
	require.Contains(t, out, "bash completion")
	require.Contains(t, out, "smsctl")
	require.Contains(t, mustRun(t, "completion", "zsh"), "#compdef smsctl")

	out = mustRun(t, "__complete", "send", "--provider", "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Subset(t, lines, []string{"bird", "sendy"})
	out = mustRun(t, "__complete", "res")
	require.Contains(t, out, "resend")
	out = mustRun(t, "__complete", "list", "--state", "")
	require.Contains(t, out, "AwaitingDecision")
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"frob"}, {"send", "--nope"}, {"resend"}, {"wait", "a-1-x", "b-1-x"}, {"list", "extra"}} {
		code, _, errOut := run(args...)
		require.Equal(t, ExitInvalid, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, "see smsctl --help", "%v", args)
	}
	code, _, errOut := run("resend", "order-1-shipped", "--reason", "r", "--by", "b", "--provider", "fax")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, `provider "fax" is not known`)
}

// Flags written with one dash, as Go's flag package took them before
// cobra, still work; a value that starts with a dash stays a value.
func TestSingleDashFlagsStillWork(t *testing.T) {
	t.Parallel()
	code, _, errOut := run("-json", "status", "order 1")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, `"exitCode":2`)
	code, out, errOut := run("codec-key", "-id=2026-12")
	require.Equal(t, ExitOK, code, errOut)
	require.True(t, strings.HasPrefix(out, "2026-12:"), out)
	code, _, errOut = run("send", "-key", "order-1-shipped", "-to", "+31612345678", "-text", "-provider", "-provider", "fax")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, `provider "fax" is not known`, "the text -provider stayed the text")
	require.Equal(t, []string{"--json", "send", "--", "-x"}, singleDash((&cmd{}).root(), []string{"-json", "send", "--", "-x"}))
}
