package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

func (c *cmd) waitCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "wait KEY",
		Short: "Wait for a run to end and print its result",
		Long:  "Wait for the run of KEY to end and print its result. A run that ended Failed exits 1.",
		Args:  oneKey("wait"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return c.withStarter(ctx, func(s *starter.Starter) error { return c.waitFor(ctx, s, args[0]) })
		},
	}
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
