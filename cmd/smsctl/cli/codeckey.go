package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/acme/smsorch/codec"
)

func (c *cmd) codecKeyCommand() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "codec-key [--id ID]",
		Short: "Print a new payload key for SMSORCH_CODEC_KEYS (ID:BASE64KEY)",
		Long: `Print a new random payload key as ID:BASE64KEY, for SMSORCH_CODEC_KEYS
(the first key listed seals; the others still open what they sealed).`,
		Args: flagsOnly("codec-key takes --id ID only"),
		RunE: func(*cobra.Command, []string) error {
			k, err := codec.NewKey(id)
			if err != nil {
				return usageError("%v", err)
			}
			c.print(map[string]string{"key": k}, func(w io.Writer) {
				fmt.Fprintln(w, k)
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", time.Now().UTC().Format("2006-01"), "the key's id (it travels with every payload it seals)")
	return cmd
}
