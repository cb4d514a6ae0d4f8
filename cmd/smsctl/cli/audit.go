package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/audit"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/devmode"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/secrets"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/pace"
	"github.com/acme/smsorch/provider/sendy"
)

// devSimulator is where `worker --dev` runs the provider simulator.
const devSimulator = "http://127.0.0.1:8299"

func (c *cmd) auditCommand() *cobra.Command {
	var ledgerPath, simURL string
	var reveal bool
	sendyLimit := sendy.RateLimitPerMinute
	var bc bird.Config
	var sc sendy.Config
	cmd := &cobra.Command{
		Use:   "audit KEY [--ledger PATH] [--simulator URL | --bird-url URL --bird-workspace ID --bird-channel ID | --sendy-url URL]",
		Short: "Our ledger beside the providers' records: proves or rules out a duplicate send",
		Long: `Put the event's attempts in our ledger beside the records of every provider
it was sent through (an event that moved to a fallback has keys at both),
and say what they prove. A proven duplicate comes with what a support
request needs. Outside dev mode give each provider's API (credentials in
BIRD_ACCESS_KEY and SENDY_TOKEN, or files named by NAME_FILE); --simulator
asks the dev simulator.`,
		Example: `  smsctl audit order-58213-shipped
  SMSORCH_LEDGER=postgres://smsorch@db/smsorch BIRD_ACCESS_KEY=... smsctl audit order-58213-shipped --bird-url https://api.bird.com --bird-workspace W --bird-channel C`,
		Args: oneKey("audit"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			key := args[0]
			if ledgerPath == "" {
				var err error
				if ledgerPath, err = secrets.DSN(c.getenv, "SMSORCH_LEDGER"); err != nil {
					return usageError("%v", err)
				}
			}
			devLedger := ledgerPath == ""
			if devLedger {
				ledgerPath = ".smsorch/ledger.db"
			}
			if !ledger.IsPostgresDSN(ledgerPath) {
				if _, err := os.Stat(ledgerPath); err != nil {
					return usageError("no ledger at %s: give the worker's --ledger file (%v)", ledgerPath, err)
				}
			}
			// The ledger's recipients and texts are sealed with the payload
			// keys: with them they open (shown masked unless --reveal), and
			// without them they read as sealed.
			keys, err := codec.FromEnv(c.getenv)
			if err != nil {
				return err
			}
			opt := ledger.HideSealed()
			if keys != nil {
				opt = ledger.WithKeys(keys)
			}
			led, err := ledger.Open(ctx, ledgerPath, opt, ledger.ForReading())
			if err != nil {
				return err
			}
			defer func() { _ = led.Close() }()
			e, err := led.Event(ctx, key)
			if err != nil {
				return err
			}
			if reveal && e.Recipient == ledger.Hidden {
				return usageError("--reveal shows the recipient and the text, which the ledger keeps sealed: give the payload keys (%s or %s)", codec.EnvKeys, codec.EnvKeyFile)
			}
			birdKey, err := secrets.Optional(c.getenv, "BIRD_ACCESS_KEY")
			if err != nil {
				return usageError("%v", err)
			}
			sendyToken, err := secrets.Optional(c.getenv, "SENDY_TOKEN")
			if err != nil {
				return usageError("%v", err)
			}
			clients := map[provider.Name]provider.Client{}
			var asked []string
			if bc.BaseURL != "" {
				bc.AccessKey = logging.Secret(birdKey)
				if clients[provider.Bird], err = bird.New(bc); err != nil {
					return err
				}
				asked = append(asked, "bird at "+bc.BaseURL)
			}
			// Sendy's limit is per token, the workers' and ours together:
			// each lookup takes a slot in the fleet's ledger.
			sendyPacer, err := pace.ForLimit(led, provider.Sendy, sendyLimit)
			if err != nil {
				return usageError("--sendy-rate-limit: %v, or 0 for none", err)
			}
			if sc.BaseURL != "" {
				sc.Token, sc.Pacer = logging.Secret(sendyToken), sendyPacer
				if clients[provider.Sendy], err = sendy.New(sc); err != nil {
					return err
				}
				asked = append(asked, "sendy at "+sc.BaseURL)
			}
			if clients[provider.Name(e.Provider)] == nil && simURL == "" {
				if !devLedger {
					// Outside dev, never the simulator unless asked for: its records
					// would say nothing about what the real provider sent.
					return usageError("%s was sent through %s: give its API (--%s-url …, with the credentials in the environment), or --simulator URL for the dev simulator", key, e.Provider, e.Provider)
				}
				simURL = devSimulator
			}
			if simURL != "" {
				// The simulator stands in for each provider the event was
				// sent through (its own, and any it moved to) that has no
				// API given.
				used := []provider.Name{provider.Name(e.Provider)}
				switches, err := led.Switches(ctx, key)
				if err != nil {
					return err
				}
				for _, sw := range switches {
					if !slices.Contains(used, provider.Name(sw.To)) {
						used = append(used, provider.Name(sw.To))
					}
				}
				var as []string
				for _, p := range used {
					if clients[p] != nil {
						continue
					}
					switch p {
					case provider.Bird:
						clients[p], err = bird.New(devmode.BirdConfig(simURL, birdKey, 0))
					case provider.Sendy:
						cfg := devmode.SendyConfig(simURL, sendyToken, "", 0)
						cfg.Pacer = sendyPacer
						clients[p], err = sendy.New(cfg)
					default:
						continue
					}
					if err != nil {
						return err
					}
					as = append(as, string(p))
				}
				if len(as) > 0 {
					asked = append(asked, fmt.Sprintf("the dev simulator (as %s) at %s", strings.Join(as, " and "), simURL))
				}
			}
			fmt.Fprintf(c.errOut, "smsctl audit: asked %s; ledger %s\n", strings.Join(asked, ", "), led.Describe())
			r, err := audit.Build(ctx, led, clients, key, time.Now())
			if err != nil {
				return err
			}
			if !reveal {
				r = r.Masked()
			}
			c.print(r, func(w io.Writer) { _ = r.WriteText(w) })
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&reveal, "reveal", false, "show the recipient and the text in full (for a support request); needs the payload keys, which open them in the ledger")
	f.StringVar(&ledgerPath, "ledger", "", "the worker's ledger: a SQLite file or a postgres:// DSN (default $SMSORCH_LEDGER, else .smsorch/ledger.db)")
	f.StringVar(&simURL, "simulator", "", "the dev-mode provider simulator (default "+devSimulator+" when the ledger is the dev one, .smsorch/ledger.db)")
	f.StringVar(&bc.BaseURL, "bird-url", "", "Bird's API (access key from BIRD_ACCESS_KEY)")
	f.StringVar(&bc.WorkspaceID, "bird-workspace", "", "Bird workspace id")
	f.StringVar(&bc.ChannelID, "bird-channel", "", "Bird channel id")
	f.StringVar(&sc.BaseURL, "sendy-url", "", "Sendy's API (token from SENDY_TOKEN)")
	f.IntVar(&sendyLimit, "sendy-rate-limit", sendyLimit, "Sendy's requests a minute for the whole fleet, as the workers were given: the audit's lookups take their slots in the ledger beside the workers' (0: none)")
	return cmd
}
