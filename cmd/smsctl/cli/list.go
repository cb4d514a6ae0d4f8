package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

func (c *cmd) listCommand() *cobra.Command {
	var stateName string
	var limit int
	cmd := &cobra.Command{
		Use:     "list [--state AwaitingDecision] [--limit 50]",
		Short:   "List runs, newest first, optionally by state",
		Example: "  smsctl list --state AwaitingDecision",
		Args:    flagsOnly("list takes flags only"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var state contract.State
			if stateName != "" {
				var err error
				if state, err = starter.ParseState(stateName); err != nil {
					return err
				}
			}
			var runs []starter.Run
			if err := c.withStarter(ctx, func(s *starter.Starter) (err error) {
				runs, err = s.List(ctx, state, limit)
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
		},
	}
	cmd.Flags().StringVar(&stateName, "state", "", "only runs in this state (AwaitingDecision lists what needs a person)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	_ = cmd.RegisterFlagCompletionFunc("state", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"Sending", "Reconciling", "Accepted", "AwaitingDecision", "Delivered", "Failed", "Cancelled", "Duplicate"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}
