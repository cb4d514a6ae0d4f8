package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

const (
	resend = contract.ActionResend
	cancel = contract.ActionCancel
)

// decideCommand is resend or cancel: a person's decision on a run
// awaiting one, by the workflow's update (answered at once) or by the
// plain signal.
func (c *cmd) decideCommand(action string) *cobra.Command {
	d := contract.Decision{Action: action}
	var signal bool
	cmd := &cobra.Command{
		Use:  action + " KEY --reason R --by WHO",
		Args: oneKey(action),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			key := args[0]
			if err := errors.Join(d.Validate(), d.CheckProvider()); err != nil {
				return usageError("%v", err)
			}
			return c.withStarter(ctx, func(s *starter.Starter) error {
				if signal {
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.Reason, "reason", "", "why (kept in the run's timeline)")
	f.StringVar(&d.By, "by", "", "who decides (kept in the run's timeline)")
	f.StringVar(&d.ID, "id", "", "this decision's id (default a new one), such as a ticket number: a run acts on an id once, so repeating the command with the same --id never applies it twice")
	f.BoolVar(&signal, "signal", false, "send the plain signal instead of the update: queued even with no worker running; a refusal shows only in the run's timeline")
	if action == resend {
		cmd.Short = "Decide to resend: a new message under KEY~resend-N (or at another provider)"
		cmd.Long = `Decide to resend on a run awaiting a decision. Unless the event's message is
known to have failed inside its window, the run searches the provider's
records first and follows a live message it finds instead of sending.
Refused at once when it does not fit the run's state.`
		cmd.Example = `  smsctl resend order-58213-shipped --reason "customer says nothing arrived" --by alice
  smsctl resend order-58213-shipped --reason "Bird is down" --by alice --provider sendy
  smsctl resend order-58401-shipped --reason "customer confirmed nothing arrived" --by alice --force`
		f.BoolVar(&d.Force, "force", false, "send even where the provider's records could not be searched: a blind resend that may make a second SMS, recorded as such")
		f.StringVar(&d.Provider, "provider", "", "send through this provider (bird or sendy) instead of the run's, under the event's key there (KEY~via-PROVIDER)")
		_ = cmd.RegisterFlagCompletionFunc("provider", providerNames)
	} else {
		cmd.Short = "Decide to cancel: send nothing more"
		cmd.Long = `Decide to cancel a run awaiting a decision: it ends Cancelled and nothing
more is sent. Refused at once when it does not fit the run's state.`
		cmd.Example = `  smsctl cancel order-58213-shipped --reason "order cancelled" --by bob`
	}
	return cmd
}
