package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/ledger"
)

// cliSample bounds how many events the scan asks smsctl about: each
// call dials Temporal.
const cliSample = 12

// A drill searches everything of ours that a person or a log shipper may
// read for any of its recipients in full: while the runs are there,
// every run's status and timeline, and smsctl's status and audit output
// (text and JSON) for a sample of events (plainInRuns); once every
// process stopped, every log file of the drill's processes and every
// row of the ledger, byte for byte: its file, or each PostgreSQL row as
// text (plainAtRest). Each returns where a number was found.

// look records in found where text holds one of the events' numbers.
func (d *drill) look(found *[]string, where string, text []byte) {
	for _, e := range d.events {
		n := strings.TrimPrefix(strings.TrimSpace(e.e.To), "+")
		if len(n) > 4 && bytes.Contains(text, []byte(n)) {
			*found = append(*found, fmt.Sprintf("%s (+%s…)", where, n[:2]))
			return
		}
	}
}

func (d *drill) plainAtRest(ctx context.Context) ([]string, error) {
	var found []string
	look := func(where string, text []byte) { d.look(&found, where, text) }

	logs, err := filepath.Glob(filepath.Join(d.cfg.Dir, "*.log"))
	if err != nil {
		return nil, err
	}
	for _, f := range logs {
		if filepath.Base(f) == "simulator.log" {
			continue // the providers' side: they hold the number by design
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		look(filepath.Base(f), b)
	}

	if ledger.IsPostgresDSN(d.ledger) {
		conn, err := pgx.Connect(ctx, d.ledger)
		if err != nil {
			return nil, fmt.Errorf("drill: read the ledger's rows: %w", err)
		}
		defer func() { _ = conn.Close(ctx) }()
		for _, table := range []string{"events", "attempts", "switches"} {
			rows, err := conn.Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t`)
			if err != nil {
				return nil, fmt.Errorf("drill: read the ledger's %s: %w", table, err)
			}
			all, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return nil, fmt.Errorf("drill: read the ledger's %s: %w", table, err)
			}
			look("ledger table "+table, []byte(strings.Join(all, "\n")))
		}
	} else {
		for _, f := range []string{d.ledger, d.ledger + "-wal"} {
			if b, err := os.ReadFile(f); err == nil {
				look("ledger file "+filepath.Base(f), b)
			}
		}
	}

	return found, nil
}

func (d *drill) plainInRuns(ctx context.Context) ([]string, error) {
	var found []string
	look := func(where string, text []byte) { d.look(&found, where, text) }
	env := append(d.creds.Env(), codec.EnvKeys+"="+d.keySpec)
	env = append(env, d.temporalEnv()...)
	for i, e := range d.events {
		st, err := d.st.Status(ctx, e.key)
		if err != nil {
			return nil, fmt.Errorf("drill: read the status of %s: %w", e.key, err)
		}
		b, err := json.Marshal(st)
		if err != nil {
			return nil, err
		}
		look("status and timeline of "+e.key, b)
		if i >= cliSample {
			continue
		}
		for _, args := range [][]string{
			{"status", e.key}, {"--json", "status", e.key},
			{"audit", e.key, "--ledger", d.ledger, "--simulator", d.simURL},
			{"--json", "audit", e.key, "--ledger", d.ledger, "--simulator", d.simURL},
		} {
			var out, errOut bytes.Buffer
			if code := cli.Run(ctx, args, &out, &errOut, env); code != cli.ExitOK {
				return nil, fmt.Errorf("drill: smsctl %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
			}
			look("smsctl "+strings.Join(args[:min(len(args), 3)], " "), append(out.Bytes(), errOut.Bytes()...))
		}
	}
	return found, nil
}
