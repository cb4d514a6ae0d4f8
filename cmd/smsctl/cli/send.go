package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/starter"
)

func (c *cmd) sendCommand() *cobra.Command {
	var e starter.Event
	var wait bool
	cmd := &cobra.Command{
		Use:   "send (--kind K --id ID --stage S | --otp-user U --otp-attempt A | --key KEY) --to +E164 --text TEXT --provider bird|sendy",
		Short: "Start the SMS of an event, or find its run",
		Long: `Start the SMS of a business event. The event's key is the run's id, so
sending the same event again finds its run instead of sending again.
Everything is checked before anything is dialled: the key, the recipient
(international form), the text, the provider, the sender and the fallback.`,
		Example: `  smsctl send --kind order --id 58213 --stage shipped --to +31612345678 --text "Order 58213 has shipped." --provider bird
  smsctl send --otp-user 8412 --otp-attempt 7 --to +31612345678 --text "Your code: 123456" --provider sendy --from MyShop --wait
  smsctl send --key order-58213-shipped --to +31612345678 --text "Shipped." --provider bird --fallback sendy`,
		Args: flagsOnly("send takes flags only"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
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
				if wait {
					return c.waitFor(ctx, s, res.Key)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&e.Kind, "kind", "", "the entity: order, invoice, user_invite")
	f.StringVar(&e.ID, "id", "", "the entity's id")
	f.StringVar(&e.Stage, "stage", "", "the event: shipped, delivered")
	f.StringVar(&e.OTPUser, "otp-user", "", "OTP: the user id")
	f.StringVar(&e.OTPAttempt, "otp-attempt", "", "OTP: the attempt id (a new one for every 'send the code again')")
	f.StringVar(&e.Key, "key", "", "a key you derived yourself")
	f.StringVar(&e.To, "to", "", "recipient, international form: +31612345678")
	f.StringVar(&e.Text, "text", "", "the message")
	f.StringVar(&e.Provider, "provider", "", "bird or sendy")
	f.StringVar(&e.From, "from", "", "sender name (Sendy)")
	f.StringVar(&e.Fallback, "fallback", "", "the other provider, used only where the first one's records prove it sent nothing")
	f.BoolVar(&wait, "wait", false, "wait for the run to end and print its result")
	_ = cmd.RegisterFlagCompletionFunc("provider", providerNames)
	_ = cmd.RegisterFlagCompletionFunc("fallback", providerNames)
	return cmd
}

// providerNames completes a provider flag.
func providerNames(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{"bird", "sendy"}, cobra.ShellCompDirectiveNoFileComp
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
