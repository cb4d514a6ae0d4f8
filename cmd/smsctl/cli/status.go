package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/starter"
)

func (c *cmd) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "status KEY",
		Short:   "Show a run's state, messages and timeline",
		Example: "  smsctl status order-58213-shipped\n  smsctl --json status order-58213-shipped",
		Args:    oneKey("status"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return c.withStarter(ctx, func(s *starter.Starter) error {
				st, err := s.Status(ctx, args[0])
				if err != nil {
					return err
				}
				c.print(st, func(w io.Writer) { writeStatus(w, st) })
				return nil
			})
		},
	}
}
