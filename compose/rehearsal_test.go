package compose

// The rehearsal: Docker does not run on this project's machines, so CI
// runs what docker-compose.yml says without it. Every service built from
// this repository starts as a process, from the binary its Dockerfile
// line builds, with the command line and the environment the file gives
// it, interpolated from .env.example, its secrets in the files `smsctl
// compose-secrets --simulator` makes, as a user does; each container
// sees only the secrets its service lists, at /run/secrets. Each container gets an address of its own on loopback
// (127.0.1.N), where the file listens on 0.0.0.0; a service's name
// resolves to its first container; PostgreSQL is the machine's. Each
// service starts when the ones it depends on pass their own health
// check, run as the file runs it. Then a signed event goes through the
// intake to the simulator, smsctl reads the run with the codec keys, the
// codec server decodes its sealed input for the token, and every process
// stops on SIGTERM within its grace period.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgtest"
	"github.com/acme/smsorch/internal/rehearse"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/sms"
)

// ourImage is the image docker-compose.yml builds from the repository.
const ourImage = "smsorch:local"

func TestTheComposeStackRunsFromItsOwnLines(t *testing.T) {
	if testing.Short() {
		t.Skip("the rehearsal builds the image's binaries and starts the whole stack (about a minute)")
	}
	require.NoError(t, imageBinaries.Err, "building the image's binaries from the Dockerfile's lines")
	require.NotNil(t, imageBinaries.Bins, "TestMain builds the image's binaries before this test runs")
	bins, dir := imageBinaries.Bins, t.TempDir()
	// The image's worker has no embedded Temporal, and says where it is.
	out, err := exec.Command(bins["worker"], "--dev", "--data-dir", dir).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "built without the embedded Temporal server and web UI (-tags nodevstack)")
	require.Contains(t, string(out), "smsorch-temporal")
	for name, bin := range bins {
		if st, err := os.Stat(bin); err == nil {
			t.Logf("%s: %.1f MB", name, float64(st.Size())/(1<<20))
		}
	}

	// The user's .env: the example; and the secret files, made as it
	// says, by the image's smsctl (a directory of the rehearsal's in
	// place of ./secrets).
	env, err := ReadEnv(filepath.Join("..", ".env.example"))
	require.NoError(t, err)
	secretsDir := filepath.Join(dir, "secrets")
	require.Contains(t, env, "SMSORCH_SECRETS")
	env["SMSORCH_SECRETS"] = secretsDir
	made, err := exec.Command(bins["smsctl"], "compose-secrets", secretsDir, "--simulator").CombinedOutput()
	require.NoError(t, err, "smsctl compose-secrets: %s", made)
	t.Logf("smsctl compose-secrets --simulator:\n%s", made)
	secret := func(name string) string {
		b, err := os.ReadFile(filepath.Join(secretsDir, name))
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	// The simulator stands in for the providers, as .env.example says
	// for --profile sim.
	for k, v := range map[string]string{"BIRD_URL": "http://simulator:8299", "BIRD_WORKSPACE": "dev-workspace", "BIRD_CHANNEL": "dev-sms-channel", "SENDY_URL": "http://simulator:8299"} {
		require.Contains(t, env, k)
		env[k] = v
	}
	// The machine's PostgreSQL (trust auth) in place of the postgres
	// service, with databases of the rehearsal's own; the postgres image
	// would make the ledger's (POSTGRES_DB) at first start. The
	// services' roles are the rehearsal's own too: roles are the whole
	// server's, and outlive the databases (dropped last: they own them).
	admin := pgAdmin()
	suffix := randomHex(t, 5)
	env["SMSORCH_DB_USER"], env["TEMPORAL_DB_USER"] = "smsorch_ledger_"+suffix, "smsorch_temporal_"+suffix
	t.Cleanup(func() {
		for _, r := range []string{env["SMSORCH_DB_USER"], env["TEMPORAL_DB_USER"]} {
			if _, err := pgExec(context.Background(), admin, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
				t.Logf("drop the role %s: %v", r, err)
			}
		}
	})
	ledgerDSN := pgtest.Database(t)
	env["POSTGRES_USER"] = "postgres"
	ledgerURL, err := url.Parse(ledgerDSN)
	require.NoError(t, err)
	env["SMSORCH_DB"] = strings.TrimPrefix(ledgerURL.Path, "/")
	env["TEMPORAL_DB"] = env["SMSORCH_DB"] + "_temporal"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, db := range []string{env["TEMPORAL_DB"], env["TEMPORAL_DB"] + defaults.VisibilitySuffix} {
			if _, err := pgExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Logf("drop %s: %v", db, err)
			}
		}
	})

	f, err := Load(filepath.Join("..", "docker-compose.yml"), env)
	require.NoError(t, err, "docker-compose.yml interpolates from the user's .env")
	order := startOrder(t, f)

	// An address per container; a service's name is its first container's.
	hosts := map[string]string{"postgres": "127.0.0.1"}
	addrs := map[string][]string{}
	next := 1
	for _, name := range order {
		for range f.Services[name].Replicas() {
			ip := fmt.Sprintf("127.0.1.%d", next)
			next++
			addrs[name] = append(addrs[name], ip)
		}
		hosts[name] = addrs[name][0]
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var running []*rehearse.Process
	defer func() {
		for i := len(running) - 1; i >= 0; i-- {
			running[i].Kill()
		}
	}()
	for _, name := range order {
		s := f.Services[name]
		for dep, cond := range s.DependsOn {
			if dep == "postgres" {
				continue // the machine's, up
			}
			if f.Services[dep].OneShot() {
				require.Equal(t, "service_completed_successfully", cond.Condition, "%s waits for the one-shot %s to finish", name, dep)
				continue
			}
			require.Equal(t, "service_healthy", cond.Condition, "%s waits for %s's health check", name, dep)
		}
		if s.OneShot() {
			c := rehearse.Start(t, bins, dir, container(t, f, dir, name+"-1", s), addrs[name][0], hosts)
			err := c.Wait()
			log, _ := os.ReadFile(c.LogPath)
			require.NoError(t, err, "the one-shot %s fails:\n%s", name, rehearse.Tail(log))
			t.Logf("%s: %s", name, strings.TrimSpace(string(log)))
			continue
		}
		for i, ip := range addrs[name] {
			c := rehearse.Start(t, bins, dir, container(t, f, dir, fmt.Sprintf("%s-%d", name, i+1), s), ip, hosts)
			running = append(running, c)
		}
		// Docker starts the replicas together and waits for each health check.
		for _, c := range running {
			if strings.HasPrefix(c.Name, name+"-") {
				c.WaitHealthy(t, ctx)
			}
		}
	}
	t.Logf("every service is up and healthy: %s", strings.Join(order, ", "))

	// A signed event through the intake, as published.
	intakeURL := "http://" + published(t, f.Services["intake"], "8080", addrs["intake"][0])
	body := []byte(`{"key":"order-58213-shipped","provider":"bird","to":"+31612345678","text":"Order 58213 has shipped."}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, intakeURL+"/v1/events", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	unsigned, err := http.DefaultClient.Do(req.Clone(ctx))
	require.NoError(t, err)
	_ = unsigned.Body.Close()
	require.Equal(t, http.StatusUnauthorized, unsigned.StatusCode, "the intake refuses an unsigned event")
	req.Body = io.NopCloser(bytes.NewReader(body))
	for k, v := range intake.Sign(logging.Secret(secret("intake-secret")), time.Now(), body) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "signed event: %s", got)

	// smsctl, with the intake's environment (docker compose exec intake smsctl …).
	smsOut := rehearse.Exec(t, ctx, bins, dir, container(t, f, dir, "intake", f.Services["intake"]), addrs["intake"][0], hosts, "smsctl", "wait", "order-58213-shipped")
	require.Contains(t, smsOut, "Delivered", "the event was delivered: %s", smsOut)
	smsOut = rehearse.Exec(t, ctx, bins, dir, container(t, f, dir, "intake", f.Services["intake"]), addrs["intake"][0], hosts, "smsctl", "status", "order-58213-shipped")
	require.Contains(t, smsOut, sms.MaskPhone("+31612345678"), "smsctl decodes the run with the keys: %s", smsOut)

	// The run's input is sealed in Temporal; the codec server opens it for the token.
	// Read with the admin's certificate, which the certs service left
	// beside the CA for the person who runs the stack.
	frontend := hosts["temporal"] + ":7233"
	pkiDir := filepath.Join(dir, "volumes", "pki")
	raw := temporalClient(t, ctx, frontend, filepath.Join(pkiDir, "admin.pem"), filepath.Join(pkiDir, "admin-key.pem"), filepath.Join(pkiDir, "ca.pem"))
	defer raw.Close()
	refusesWhatRolesDoNotAllow(t, ctx, dir, frontend)
	hist := raw.GetWorkflowHistory(ctx, "order-58213-shipped", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	first, err := hist.Next()
	require.NoError(t, err)
	input := first.GetWorkflowExecutionStartedEventAttributes().GetInput()
	require.NotEmpty(t, input.GetPayloads())
	require.NotContains(t, string(input.GetPayloads()[0].GetData()), "Order 58213", "the input reaches Temporal sealed")
	codecURL := "http://" + published(t, f.Services["temporal-ui"], "8234", addrs["temporal-ui"][0])
	decoded := decode(t, ctx, codecURL, secret("codec-token"), input)
	require.Contains(t, decoded, "Order 58213 has shipped.", "the codec server decodes for the token")
	require.Equal(t, http.StatusUnauthorized, decodeStatus(t, ctx, codecURL, "not-the-token", input), "and for no one else")
	uiURL := "http://" + published(t, f.Services["temporal-ui"], "8233", addrs["temporal-ui"][0])
	require.NoError(t, app.HealthCheck(ctx, uiURL+"/"), "the web UI answers")
	// The UI tells the browser the codec endpoint as published, and the
	// codec server lets the UI's page call it.
	settings, err := http.Get(uiURL + "/api/v1/settings")
	require.NoError(t, err)
	sb, _ := io.ReadAll(settings.Body)
	_ = settings.Body.Close()
	require.Contains(t, string(sb), `"`+codecURL+`"`, "the UI's codec endpoint is the published codec server")
	preflight, err := http.NewRequestWithContext(ctx, http.MethodOptions, codecURL+"/decode", nil)
	require.NoError(t, err)
	preflight.Header.Set("Origin", uiURL)
	preflight.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(preflight)
	require.NoError(t, err)
	_ = pre.Body.Close()
	require.Equal(t, uiURL, pre.Header.Get("Access-Control-Allow-Origin"), "the codec server allows the UI's origin")

	// The ledger holds the event, its recipient and text sealed: no row
	// of any of its tables has them in plain.
	ledgerConn, err := pgx.Connect(ctx, ledgerDSN)
	require.NoError(t, err)
	var rows int
	for _, table := range []string{"events", "attempts", "switches"} {
		r, err := ledgerConn.Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t`)
		require.NoError(t, err)
		for r.Next() {
			var row string
			require.NoError(t, r.Scan(&row))
			rows++
			for _, plain := range []string{"31612345678", "Order 58213 has shipped"} {
				require.NotContains(t, row, plain, "a %s row of the ledger holds %q in plain", table, plain)
			}
		}
		require.NoError(t, r.Err())
	}
	_ = ledgerConn.Close(ctx)
	require.Greater(t, rows, 1, "the event and its attempt are in the ledger")
	// The workers' role reaches the ledger only, the servers' Temporal's only.
	for role, db := range map[string]string{env["SMSORCH_DB_USER"]: env["TEMPORAL_DB"], env["TEMPORAL_DB_USER"]: env["SMSORCH_DB"]} {
		u := *ledgerURL
		u.User, u.Path = url.User(role), "/"+db
		_, err := pgExec(ctx, u.String(), "SELECT 1")
		require.ErrorContains(t, err, "permission denied for database", "%s reaches %s", role, db)
	}

	// The stack's connections stay well inside PostgreSQL's default 100.
	var conns int
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = ANY($1)`,
		[]string{env["SMSORCH_DB"], env["TEMPORAL_DB"], env["TEMPORAL_DB"] + defaults.VisibilitySuffix}).Scan(&conns))
	_ = conn.Close(ctx)
	budget := f.Services["temporal"].Replicas()*defaults.PostgresMaxConnsPerServer +
		(f.Services["worker"].Replicas()+f.Services["intake"].Replicas())*ledger.DefaultPostgresPoolSize
	t.Logf("PostgreSQL connections of the stack: %d now, %d at most by its pools", conns, budget)
	require.LessOrEqual(t, conns, budget)
	require.LessOrEqual(t, budget, 85, "the pools leave room under PostgreSQL's default 100 (3 kept for superusers) for an operator")

	// No client of Temporal was refused a call it makes: the roles of its
	// certificate cover what it does. (The servers log the refusals the
	// checks above provoked.)
	for _, c := range running {
		if strings.HasPrefix(c.Name, "temporal-") && !strings.HasPrefix(c.Name, "temporal-ui-") {
			continue
		}
		log, err := os.ReadFile(c.LogPath)
		require.NoError(t, err)
		for _, refusal := range []string{"Request unauthorized", " takes smsorch-", "names no role", "needs a client certificate"} {
			require.NotContains(t, string(log), refusal, "%s was refused a call: its certificate's roles are short of what it does", c.Name)
		}
	}

	// docker compose down: SIGTERM, in reverse order, within each grace period.
	for i := len(running) - 1; i >= 0; i-- {
		c := running[i]
		require.NoError(t, c.Stop(), "%s stops cleanly on SIGTERM (log: %s)", c.Name, c.LogPath)
	}
	running = nil
}

// startOrder is the services to start, ours only (built from the
// repository), every one after those it depends on.
func startOrder(t *testing.T, f File) []string {
	t.Helper()
	var order []string
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		require.False(t, slices.Contains(path, name), "depends_on cycle: %v", append(path, name))
		if slices.Contains(order, name) {
			return
		}
		s, ok := f.Services[name]
		require.True(t, ok, "%v depends on %s, which the file does not define", path, name)
		deps := make([]string, 0, len(s.DependsOn))
		for d := range s.DependsOn {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			visit(d, append(path, name))
		}
		if s.Image == ourImage {
			order = append(order, name)
		}
	}
	names := make([]string, 0, len(f.Services))
	for n := range f.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		visit(n, nil)
	}
	return order
}

// published is where a published port's container listens here.
func published(t *testing.T, s Service, port, ip string) string {
	t.Helper()
	for _, p := range s.Ports {
		if strings.HasSuffix(p, ":"+port) {
			return net.JoinHostPort(ip, port)
		}
	}
	t.Fatalf("port %s is not published: %v", port, s.Ports)
	return ""
}

func decodeStatus(t *testing.T, ctx context.Context, codecURL, token string, p *commonpb.Payloads) int {
	t.Helper()
	code, _ := decodeRequest(t, ctx, codecURL, token, p)
	return code
}

func decode(t *testing.T, ctx context.Context, codecURL, token string, p *commonpb.Payloads) string {
	t.Helper()
	code, body := decodeRequest(t, ctx, codecURL, token, p)
	require.Equal(t, http.StatusOK, code, "decode: %s", body)
	var out commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(body, &out))
	var b strings.Builder
	for _, p := range out.GetPayloads() {
		b.Write(p.GetData())
	}
	return b.String()
}

// decodeRequest is what the web UI sends the codec server.
func decodeRequest(t *testing.T, ctx context.Context, codecURL, token string, p *commonpb.Payloads) (int, []byte) {
	t.Helper()
	body, err := protojson.Marshal(p)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, codecURL+"/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

func pgAdmin() string {
	if v := os.Getenv(pgtest.EnvDSN); v != "" {
		return v
	}
	return pgtest.DefaultDSN
}

func pgExec(ctx context.Context, dsn, sql string) (int64, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	tag, err := c.Exec(ctx, sql)
	return tag.RowsAffected(), err
}

// container is what the file f says of one replica of the service s:
// besides its volumes, the secrets it lists, copied from their files
// into a directory of the container's own that it sees as /run/secrets.
func container(t *testing.T, f File, dir, name string, s Service) rehearse.Container {
	t.Helper()
	c := rehearse.Container{Name: name, Command: s.Command, Env: s.Environment}
	if len(s.Secrets) > 0 {
		vol := "run-secrets-" + name
		require.NoError(t, os.MkdirAll(rehearse.VolumeDir(dir, vol), 0o700))
		for _, sec := range s.Secrets {
			src, ok := f.Secrets[sec]
			require.True(t, ok, "%s lists the secret %s, which the file does not define", name, sec)
			path := src.File
			if !filepath.IsAbs(path) {
				path = filepath.Join("..", path) // beside docker-compose.yml
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err, "%s: the secret %s (compose stops where its file is missing)", name, sec)
			require.NoError(t, os.WriteFile(filepath.Join(rehearse.VolumeDir(dir, vol), sec), b, 0o600))
		}
		c.Mounts = append(c.Mounts, rehearse.Mount{Volume: vol, Path: SecretsDir})
	}
	if s.StopGracePeriod != "" {
		var err error
		c.Grace, err = time.ParseDuration(s.StopGracePeriod)
		require.NoError(t, err, "%s: stop_grace_period", name)
	}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		require.True(t, len(parts) == 2 || len(parts) == 3 && parts[2] == "ro", "%s: a volume is VOLUME:PATH[:ro], got %q", name, v)
		c.Mounts = append(c.Mounts, rehearse.Mount{Volume: parts[0], Path: parts[1]})
	}
	require.True(t, s.OneShot() || s.Healthcheck != nil, "%s has a health check", name)
	if s.Healthcheck != nil {
		require.Equal(t, "CMD", s.Healthcheck.Test[0], "%s: the image has no shell, so the health check is [CMD, …]", name)
		c.Health = s.Healthcheck.Test[1:]
	}
	return c
}
