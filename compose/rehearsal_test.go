package compose

// The rehearsal: Docker does not run on this project's machines, so CI
// runs what docker-compose.yml says without it. Every service built from
// this repository starts as a process, from the binary its Dockerfile
// line builds, with the command line and the environment the file gives
// it, interpolated from .env.example with its secrets filled in, as a
// user does. Each container gets an address of its own on loopback
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
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgtest"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/sms"
)

// ourImage is the image docker-compose.yml builds from the repository.
const ourImage = "smsorch:local"

func TestTheComposeStackRunsFromItsOwnLines(t *testing.T) {
	if testing.Short() {
		t.Skip("the rehearsal builds the image's binaries and starts the whole stack (about a minute)")
	}
	require.NoError(t, imageBinaries.err, "building the image's binaries from the Dockerfile's lines")
	require.NotNil(t, imageBinaries.bins, "TestMain builds the image's binaries before this test runs")
	bins, dir := imageBinaries.bins, t.TempDir()
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

	// The user's .env: the example with each secret they are told to make.
	env, err := ReadEnv(filepath.Join("..", ".env.example"))
	require.NoError(t, err)
	key, err := codec.NewKey("rehearsal")
	require.NoError(t, err)
	made := map[string]string{
		"POSTGRES_PASSWORD": randomHex(t, 24), "SMSORCH_CODEC_KEYS": key, "SMSORCH_CODEC_TOKEN": randomHex(t, 32),
		"SMSORCH_INTAKE_SECRET": randomHex(t, 32), "BIRD_ACCESS_KEY": randomHex(t, 16), "SENDY_TOKEN": randomHex(t, 16),
	}
	for k, v := range made {
		require.Contains(t, env, k, ".env.example lists %s", k)
		require.Empty(t, env[k], ".env.example leaves the secret %s for the user to make", k)
		env[k] = v
	}
	// The simulator stands in for the providers, as .env.example says
	// for --profile sim.
	for k, v := range map[string]string{"BIRD_URL": "http://simulator:8299", "BIRD_WORKSPACE": "dev-workspace", "BIRD_CHANNEL": "dev-sms-channel", "SENDY_URL": "http://simulator:8299"} {
		require.Contains(t, env, k)
		env[k] = v
	}
	// The machine's PostgreSQL (trust auth) in place of the postgres
	// service, with databases of the rehearsal's own; the postgres image
	// would make the ledger's (POSTGRES_DB) at first start.
	ledgerDSN := pgtest.Database(t)
	admin := pgAdmin()
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
	var running []*container
	defer func() {
		for i := len(running) - 1; i >= 0; i-- {
			running[i].kill()
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
			c := start(t, bins, dir, name+"-1", s, addrs[name][0], hosts)
			err := <-c.done
			log, _ := os.ReadFile(c.logPath)
			require.NoError(t, err, "the one-shot %s fails:\n%s", name, tail(log))
			t.Logf("%s: %s", name, strings.TrimSpace(string(log)))
			continue
		}
		for i, ip := range addrs[name] {
			c := start(t, bins, dir, fmt.Sprintf("%s-%d", name, i+1), s, ip, hosts)
			running = append(running, c)
		}
		// Docker starts the replicas together and waits for each health check.
		for _, c := range running {
			if strings.HasPrefix(c.name, name+"-") {
				c.waitHealthy(t, ctx)
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
	for k, v := range intake.Sign(logging.Secret(env["SMSORCH_INTAKE_SECRET"]), time.Now(), body) {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "signed event: %s", got)

	// smsctl, with the intake's environment (docker compose exec intake smsctl …).
	smsOut := smsctl(t, ctx, bins, dir, f.Services["intake"], addrs["intake"][0], hosts, "wait", "order-58213-shipped")
	require.Contains(t, smsOut, "Delivered", "the event was delivered: %s", smsOut)
	smsOut = smsctl(t, ctx, bins, dir, f.Services["intake"], addrs["intake"][0], hosts, "status", "order-58213-shipped")
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
	decoded := decode(t, ctx, codecURL, env["SMSORCH_CODEC_TOKEN"], input)
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
		if strings.HasPrefix(c.name, "temporal-") && !strings.HasPrefix(c.name, "temporal-ui-") {
			continue
		}
		log, err := os.ReadFile(c.logPath)
		require.NoError(t, err)
		for _, refusal := range []string{"Request unauthorized", " takes smsorch-", "names no role", "needs a client certificate"} {
			require.NotContains(t, string(log), refusal, "%s was refused a call: its certificate's roles are short of what it does", c.name)
		}
	}

	// docker compose down: SIGTERM, in reverse order, within each grace period.
	for i := len(running) - 1; i >= 0; i-- {
		c := running[i]
		require.NoError(t, c.stop(), "%s stops cleanly on SIGTERM (log: %s)", c.name, c.logPath)
	}
	running = nil
}

// buildTheImagesBinaries builds each binary the Dockerfile's RUN lines
// build, into dir: the same package, build tags and link flags, in the
// environment of this go test. Two of the lines' settings are left to
// .ci/run, which builds every package with them before the tests:
// CGO_ENABLED=0 and -trimpath. They make the binaries static and strip
// this machine's paths from them; neither changes a command line, a
// listener or a setting that docker-compose.yml gives, which is what the
// rehearsal tries. Applied here they would compile all 1,800 packages of
// the Temporal server a third time on a machine that built the dev stack
// (once without -race, once with it for the tests): about 7 more minutes
// on 2 cores for the README's test command.
func buildTheImagesBinaries(dir string) (map[string]string, error) {
	df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		return nil, err
	}
	line := regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 go build -trimpath (.*) -o /out/(\S+) (\./\S*)$`)
	bins := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(string(df), -1) {
		args := append([]string{"build"}, shellWords(m[1])...)
		args = append(args, "-o", filepath.Join(dir, m[2]), m[3])
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, out)
		}
		bins[m[2]] = filepath.Join(dir, m[2])
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("the Dockerfile builds its static binaries with RUN CGO_ENABLED=0 go build -trimpath … -o /out/NAME ./PKG; found no such line")
	}
	return bins, nil
}

// shellWords splits s as the shell does for the Dockerfile's simple
// words: spaces separate, double quotes group (-ldflags="-s -w").
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case r == ' ' && !quoted:
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
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

// container is one running replica of a service.
type container struct {
	name, logPath string
	cmd           *exec.Cmd
	done          chan error
	health        []string // the health check's command, as rewritten
	bins          map[string]string
	grace         time.Duration
}

// rewrite maps what a container sees to what a process here sees: 0.0.0.0
// and 127.0.0.1 are the container's own address (where a port published
// on the host's loopback appears here too), a service's name its first
// container's.
func rewrite(s, ip string, hosts map[string]string) string {
	// Every interface, and the container's own loopback, are its address.
	s = strings.ReplaceAll(s, "0.0.0.0:", ip+":")
	s = strings.ReplaceAll(s, "127.0.0.1:", ip+":")
	for name, h := range hosts {
		re := regexp.MustCompile(`(^|[/@=,])` + regexp.QuoteMeta(name) + `:(\d+)($|[/,?])`)
		for prev := ""; prev != s; { // again: a match takes the comma the next one starts with
			prev, s = s, re.ReplaceAllString(s, "${1}"+h+":${2}${3}")
		}
	}
	return s
}

// mounts maps the paths where a container sees its volumes to where
// they are here: each volume a directory under dir/volumes, linked into
// the container's own root directory.
type mounts struct {
	root string
	tops []string // the first component of each mount's path
}

func mount(t *testing.T, dir, name string, s Service) mounts {
	t.Helper()
	m := mounts{root: filepath.Join(dir, name+"-root")}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		require.True(t, len(parts) == 2 || len(parts) == 3 && parts[2] == "ro", "%s: a volume is VOLUME:PATH[:ro], got %q", name, v)
		require.True(t, strings.HasPrefix(parts[1], "/"), "%s mounts %q at an absolute path", name, v)
		host := filepath.Join(dir, "volumes", parts[0])
		require.NoError(t, os.MkdirAll(host, 0o700))
		link := filepath.Join(m.root, parts[1])
		require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o700))
		if err := os.Symlink(host, link); err != nil && !os.IsExist(err) {
			require.NoError(t, err)
		}
		if top := "/" + strings.SplitN(parts[1][1:], "/", 2)[0]; !slices.Contains(m.tops, top) {
			m.tops = append(m.tops, top)
		}
	}
	return m
}

// path rewrites the container's paths in an argument or a value.
func (m mounts) path(s string) string {
	for _, top := range m.tops {
		re := regexp.MustCompile(`(^|=)` + regexp.QuoteMeta(top) + `(/|$)`)
		s = re.ReplaceAllString(s, "${1}"+m.root+top+"${2}")
	}
	return s
}

func start(t *testing.T, bins map[string]string, dir, name string, s Service, ip string, hosts map[string]string) *container {
	t.Helper()
	require.NotEmpty(t, s.Command, "%s has a command", name)
	bin, ok := bins[s.Command[0]]
	require.True(t, ok, "%s runs %s, which the Dockerfile does not build", name, s.Command[0])
	m := mount(t, dir, name, s)
	args := make([]string, 0, len(s.Command)-1)
	for _, a := range s.Command[1:] {
		args = append(args, m.path(rewrite(a, ip, hosts)))
	}
	// A container's environment: the file's, and nothing of ours.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	for k, v := range s.Environment {
		env = append(env, k+"="+m.path(rewrite(v, ip, hosts)))
	}
	c := &container{name: name, logPath: filepath.Join(dir, name+".log"), bins: bins, grace: 10 * time.Second, done: make(chan error, 1)}
	if s.StopGracePeriod != "" {
		var err error
		c.grace, err = time.ParseDuration(s.StopGracePeriod)
		require.NoError(t, err, "%s: stop_grace_period", name)
	}
	require.True(t, s.OneShot() || s.Healthcheck != nil, "%s has a health check", name)
	if s.Healthcheck != nil {
		for _, a := range s.Healthcheck.Test {
			c.health = append(c.health, rewrite(a, ip, hosts))
		}
	}
	log, err := os.Create(c.logPath)
	require.NoError(t, err)
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env, c.cmd.Stdout, c.cmd.Stderr, c.cmd.Dir = env, log, log, dir
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, c.cmd.Start(), "%s: %s %s", name, bin, strings.Join(args, " "))
	go func() {
		c.done <- c.cmd.Wait()
		_ = log.Close()
	}()
	return c
}

// waitHealthy runs the service's own health check until it passes.
func (c *container) waitHealthy(t *testing.T, ctx context.Context) {
	t.Helper()
	require.Equal(t, "CMD", c.health[0], "%s: the image has no shell, so the health check is [CMD, …]", c.name)
	bin, ok := c.bins[c.health[1]]
	require.True(t, ok, "%s: the health check runs %s, which the image does not hold", c.name, c.health[1])
	deadline := time.Now().Add(3 * time.Minute)
	var last []byte
	for time.Now().Before(deadline) {
		select {
		case err := <-c.done:
			c.done <- err
			log, _ := os.ReadFile(c.logPath)
			t.Fatalf("%s exited at start (%v):\n%s", c.name, err, tail(log))
		default:
		}
		out, err := exec.CommandContext(ctx, bin, c.health[2:]...).CombinedOutput()
		if err == nil {
			return
		}
		last = out
		time.Sleep(500 * time.Millisecond)
	}
	log, _ := os.ReadFile(c.logPath)
	t.Fatalf("%s's health check did not pass in 3 minutes (%s); its log:\n%s", c.name, last, tail(log))
}

// stop is docker stop: SIGTERM, then SIGKILL after the grace period.
func (c *container) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(c.grace):
		c.kill()
		return fmt.Errorf("%s did not stop within its grace period %s", c.name, c.grace)
	}
}

func (c *container) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	err := <-c.done
	c.done <- err
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

// smsctl runs smsctl as `docker compose exec SERVICE smsctl …` would,
// with the service's environment.
func smsctl(t *testing.T, ctx context.Context, bins map[string]string, dir string, s Service, ip string, hosts map[string]string, args ...string) string {
	t.Helper()
	m := mount(t, dir, "smsctl", s)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	for k, v := range s.Environment {
		env = append(env, k+"="+m.path(rewrite(v, ip, hosts)))
	}
	cmd := exec.CommandContext(ctx, bins["smsctl"], args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "smsctl %s: %s", strings.Join(args, " "), out)
	return string(out)
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

// tail is the end of a log, enough to see why a process stopped.
func tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// What a container sees, mapped to what a process here sees.
func TestRewriteMapsWhatAContainerSees(t *testing.T) {
	hosts := map[string]string{"postgres": "127.0.0.1", "temporal": "127.0.1.1"}
	for in, want := range map[string]string{
		"--frontend=0.0.0.0:7233":     "--frontend=127.0.1.9:7233",
		"--health=127.0.0.1:8090":     "--health=127.0.1.9:8090",
		"temporal:7233":               "127.0.1.1:7233",
		"temporal:7233,temporal:7233": "127.0.1.1:7233,127.0.1.1:7233",
		"postgres://postgres:5432secret@postgres:5432/db?sslmode=no": "postgres://postgres:5432secret@127.0.0.1:5432/db?sslmode=no",
		"http://simulator:8299":                     "http://simulator:8299", // not a service of this map
		"--ui-codec-endpoint=http://127.0.0.1:8234": "--ui-codec-endpoint=http://127.0.1.9:8234",
	} {
		require.Equal(t, want, rewrite(in, "127.0.1.9", hosts), in)
	}
	require.Equal(t, []string{"-trimpath", "-ldflags=-s -w", "-tags", "nodevstack"}, shellWords(`-trimpath -ldflags="-s -w" -tags nodevstack`))
}
