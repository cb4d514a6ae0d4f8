package compose

// docker-compose.yml checked against the code, without Docker: the
// Temporal it runs is the one go.mod builds and CI tests; the image is
// built as the file expects; every variable our services set is one the
// code reads; no secret is written in the file or the example, nor
// given to a service through its environment (each is a file of
// compose's secrets, seen only by the services that need it); only the
// intake is published beyond loopback; every command line parses with
// the real flags and passes Validate; each store's connection pool fits
// PostgreSQL's default at the file's replica counts. The rehearsal
// (rehearsal_test.go) then starts it.

import (
	"flag"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/secrets"
	"github.com/acme/smsorch/internal/stackproc"
	"github.com/acme/smsorch/internal/stacksecrets"
	"github.com/acme/smsorch/ledger"
)

var composePath = filepath.Join("..", "docker-compose.yml")

// secretVars are the variables that hold a secret itself: a service of
// the file sets none of them, only its NAME_FILE (and .env.example none:
// the first four were there before the secrets became files).
var secretVars = []string{"POSTGRES_PASSWORD", "SMSORCH_DB_PASSWORD", "TEMPORAL_DB_PASSWORD", app.EnvLedger + secrets.PasswordSuffix, app.EnvTemporalDB + secrets.PasswordSuffix, cli.EnvPostgresAdmin + secrets.PasswordSuffix,
	codec.EnvKeys, codec.EnvToken, app.EnvIntakeSecret, app.EnvIntakePreviousSecret, app.EnvIntakeSenders, app.EnvBirdAccessKey, app.EnvSendyToken, app.EnvUIOIDCClientSecret}

// userEnv is .env.example as a user's .env, against the simulator.
func userEnv(t *testing.T) map[string]string {
	t.Helper()
	env, err := ReadEnv(filepath.Join("..", ".env.example"))
	require.NoError(t, err)
	env["BIRD_URL"], env["BIRD_WORKSPACE"], env["BIRD_CHANNEL"], env["SENDY_URL"] = "http://simulator:8299", "dev-workspace", "dev-sms-channel", "http://simulator:8299"
	return env
}

// userSecrets makes the secret files as .env.example tells the user to
// (smsctl compose-secrets --simulator), in a directory of the test's.
func userSecrets(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secrets")
	_, err := stacksecrets.Make(dir, true, nil)
	require.NoError(t, err)
	return dir
}

// seenHere is a service's environment as its process sees it, with the
// secrets it lists at dir instead of compose.SecretsDir.
func seenHere(t *testing.T, s Service, dir string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for k, v := range s.Environment {
		if name, ok := strings.CutPrefix(v, SecretsDir+"/"); ok {
			require.Contains(t, s.Secrets, name, "%s names the secret %s, which the service does not list", k, name)
			v = filepath.Join(dir, name)
		}
		env[k] = v
	}
	return env
}

// moduleVersion is the version of a module go.mod builds.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).Output()
	require.NoError(t, err, "go list -m %s", path)
	return strings.TrimSpace(string(out))
}

// The compose stack's Temporal server and web UI are the ones go.mod
// builds into smsorch-temporal, which every test, drill and benchmark
// runs: the services run that binary of our image, and what the file
// says of the versions is go.mod's. An official temporalio image, if one
// came back, must carry go.mod's version in its tag.
func TestComposeRunsTheTemporalThatCITests(t *testing.T) {
	f, err := Read(composePath)
	require.NoError(t, err)
	raw, err := os.ReadFile(composePath)
	require.NoError(t, err)
	server := moduleVersion(t, "go.temporal.io/server")
	ui := moduleVersion(t, "github.com/temporalio/ui-server/v2")
	for _, name := range []string{"temporal", "temporal-ui"} {
		s := f.Services[name]
		require.Equal(t, ourImage, s.Image, "%s runs the project's image", name)
		require.Equal(t, "smsorch-temporal", s.Command[0], "%s runs the binary with the embedded Temporal", name)
	}
	require.Contains(t, f.Services["temporal"].Command, "--server-only")
	require.Contains(t, f.Services["temporal-ui"].Command, "--ui-only")
	require.Contains(t, string(raw), "Temporal server processes ("+server+")", "the file names the server version go.mod builds")
	require.Contains(t, string(raw), "Temporal web UI ("+ui+")", "the file names the UI version go.mod builds")
	official := regexp.MustCompile(`temporalio/(server|ui|auto-setup|admin-tools):v?([^\s"']+)`)
	for _, m := range official.FindAllStringSubmatch(string(raw), -1) {
		want := strings.TrimPrefix(server, "v")
		if m[1] == "ui" {
			want = strings.TrimPrefix(ui, "v")
		}
		require.True(t, strings.HasPrefix(m[2], want), "%s: go.mod and CI run %s", m[0], want)
	}
	df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	require.Contains(t, string(df), "-o /out/smsorch-temporal ./worker")
	require.Regexp(t, `(?m)^RUN .*-tags nodevstack -o /out/worker ./worker$`, string(df), "the worker the stack runs has no embedded server")
	ops, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(ops), "server "+server), "docs/operations.md, where Compose is explained, names the server version %s", server)
	require.True(t, strings.Contains(string(ops), "UI "+ui), "docs/operations.md names the UI version %s", ui)
}

// The image: the Go that CI runs, a current distroless base without a
// shell, a user other than root.
func TestTheImageIsSmallCurrentAndNotRoot(t *testing.T) {
	df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	require.NotNil(t, goVersion)
	require.Contains(t, string(df), "FROM golang:"+string(goVersion[1])+" AS build", "the image builds with go.mod's Go, as CI does")
	require.Contains(t, string(df), "FROM gcr.io/distroless/static-debian13:nonroot", "distroless on Debian 13 (static: the binaries need no libc)")
	require.Regexp(t, `(?m)^USER 65532:65532$`, string(df), "distroless's nonroot user")
	require.Contains(t, string(df), "CGO_ENABLED=0", "static binaries")
	for _, pkg := range regexp.MustCompile(`-o /out/\S+ (\./\S*)`).FindAllStringSubmatch(string(df), -1) {
		_, err := os.Stat(filepath.Join("..", pkg[1]))
		require.NoError(t, err, pkg[1])
	}
}

// The worker the stack runs does not link the Temporal server or the
// web UI: built with -tags nodevstack it has neither.
func TestTheProductionWorkerHasNoEmbeddedTemporal(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "nodevstack", "../worker").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(dep, "go.temporal.io/server"), "the production worker links %s", dep)
		require.False(t, strings.HasPrefix(dep, "github.com/temporalio/ui-server"), "the production worker links %s", dep)
		require.NotEqual(t, "github.com/acme/smsorch/internal/devstack", dep)
	}
	full, err := exec.Command("go", "list", "-deps", "../worker").Output()
	require.NoError(t, err)
	require.Contains(t, string(full), "go.temporal.io/server/temporal\n", "without the tag, the same program runs the embedded server")
}

func TestComposeFileMatchesTheCode(t *testing.T) {
	raw, err := Read(composePath)
	require.NoError(t, err)
	env := userEnv(t)
	f, err := Load(composePath, env)
	require.NoError(t, err)
	for _, name := range []string{"postgres", "temporal", "temporal-ui", "simulator", "worker", "intake"} {
		require.Contains(t, f.Services, name)
	}
	require.Equal(t, 2, f.Services["temporal"].Replicas(), "two Temporal servers, one cluster")
	require.Equal(t, 2, f.Services["worker"].Replicas(), "two worker replicas")
	var ours, builders []string
	for name, s := range f.Services {
		if s.Image == ourImage {
			ours = append(ours, name)
			if s.Build != nil {
				require.Equal(t, ".", s.Build, "%s builds from the repository", name)
				builders = append(builders, name)
			}
			require.Equal(t, "never", s.PullPolicy, "%s: the image is built here, never pulled", name)
		}
	}
	require.Equal(t, []string{"temporal"}, builders, "one service builds the image: five builds of one tag at once collide")

	t.Run("secrets are files, each seen only by the services that need it", func(t *testing.T) {
		example, err := ReadEnv(filepath.Join("..", ".env.example"))
		require.NoError(t, err)
		for _, k := range secretVars {
			require.NotContains(t, example, k, ".env.example holds no secret: %s is a file now", k)
		}
		ef, err := Load(composePath, example)
		require.NoError(t, err, "the settings of .env.example as they are load: the secrets are files")
		names := make([]string, 0, len(stacksecrets.All))
		for _, sec := range stacksecrets.All {
			names = append(names, sec.Name)
			require.Equal(t, "./secrets/"+sec.Name, ef.Secrets[sec.Name].File, "the secret %s is a file of ./secrets, where compose-secrets makes it", sec.Name)
		}
		require.ElementsMatch(t, names, keys(ef.Secrets), "the file's secrets are the ones smsctl compose-secrets makes")
		moved, err := Load(composePath, map[string]string{"SMSORCH_SECRETS": "/srv/smsorch-secrets"})
		require.NoError(t, err)
		require.Equal(t, "/srv/smsorch-secrets/codec-keys", moved.Secrets["codec-keys"].File, "SMSORCH_SECRETS moves the directory")

		// Who sees each secret: the services that need it, and no other.
		audience := map[string][]string{
			"postgres-password":      {"postgres", "postgres-roles"},
			"ledger-db-password":     {"postgres-roles", "worker", "intake"},
			"temporal-db-password":   {"postgres-roles", "temporal"},
			"codec-keys":             {"worker", "intake", "temporal-ui"},
			"codec-token":            {"temporal-ui"},
			"intake-secret":          {"intake"},
			"intake-secret-previous": {"intake"},
			"intake-senders":         {"intake"},
			"bird-access-key":        {"worker", "intake", "simulator"},
			"sendy-token":            {"worker", "intake", "simulator"},
			"ui-oidc-client-secret":  {"temporal-ui"},
		}
		require.ElementsMatch(t, names, keys(audience), "every secret has its audience here")
		for sec, who := range audience {
			var got []string
			for name, s := range f.Services {
				if slices.Contains(s.Secrets, sec) {
					got = append(got, name)
				}
			}
			require.ElementsMatch(t, who, got, "the services that see %s", sec)
		}
		for name, s := range f.Services {
			for _, k := range secretVars {
				require.NotContains(t, s.Environment, k, "%s is given %s in its environment: give it the file (%s%s)", name, k, k, secrets.FileSuffix)
			}
			// What it lists it reads, through a NAME_FILE, and nothing else.
			read := map[string]bool{}
			for k, v := range s.Environment {
				if sec, ok := strings.CutPrefix(v, SecretsDir+"/"); ok {
					require.True(t, strings.HasSuffix(k, secrets.FileSuffix), "%s: %s names a secret's file, so its name ends in %s", name, k, secrets.FileSuffix)
					require.Contains(t, s.Secrets, sec, "%s: %s names %s, which the service does not list", name, k, sec)
					read[sec] = true
				}
				if u, err := url.Parse(v); err == nil && u.Scheme != "" {
					_, hasPassword := u.User.Password()
					hasPassword = hasPassword || u.Query().Has("password")
					require.False(t, hasPassword, "%s: %s holds a password; it comes from %s%s", name, k, k, secrets.PasswordSuffix+secrets.FileSuffix)
				}
			}
			for _, sec := range s.Secrets {
				require.Contains(t, ef.Secrets, sec, "%s lists %s, which the file does not define", name, sec)
				require.True(t, read[sec], "%s lists %s but reads it through no NAME_FILE: it need not see it", name, sec)
			}
		}
		ignore, err := os.ReadFile(filepath.Join("..", ".gitignore"))
		require.NoError(t, err)
		require.Contains(t, string(ignore), "/.env", ".env is git-ignored")
		require.Contains(t, string(ignore), "/secrets/", "the secret files are git-ignored")
		// The image builds from the repository (COPY . .): the secrets
		// stay out of its build context, or a layer holds them.
		dockerIgnore, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
		require.NoError(t, err)
		require.Contains(t, strings.Fields(string(dockerIgnore)), "secrets", "the secret files stay out of the image's build context")
		require.Contains(t, strings.Fields(string(dockerIgnore)), ".env")
	})

	t.Run("every variable our services set is read", func(t *testing.T) {
		read := variablesTheCodeReads(t)
		for _, name := range ours {
			for k := range f.Services[name].Environment {
				require.True(t, read[k], "%s sets %s, which no code reads", name, k)
			}
		}
		for _, name := range []string{"worker", "intake"} {
			e := f.Services[name].Environment
			require.True(t, ledger.IsPostgresDSN(e[app.EnvLedger]), "%s: the replicas share the PostgreSQL ledger", name)
			require.NotEmpty(t, e["TEMPORAL_ADDRESS"])
			require.NotEmpty(t, e[codec.EnvKeysFile], "%s seals payloads", name)
		}
		require.NotEmpty(t, f.Services["intake"].Environment[app.EnvIntakeSecret+secrets.FileSuffix], "the intake is published: it must require signatures")
	})

	t.Run("everything is published on loopback only", func(t *testing.T) {
		seen := map[string]string{}
		for name, s := range f.Services {
			for _, p := range s.Ports {
				parts := strings.Split(p, ":")
				require.GreaterOrEqual(t, len(parts), 2, "%s: publish as [IP:]HOST:CONTAINER, got %q", name, p)
				host := strings.Join(parts[:len(parts)-1], ":")
				require.True(t, strings.HasPrefix(host, "127.0.0.1:"), "%s publishes %q: on the host's loopback only (a TLS proxy on the host reaches it there)", name, p)
				prev, dup := seen[host]
				require.False(t, dup, "%s and %s both publish %s", prev, name, host)
				seen[host] = name
			}
		}
		for _, name := range []string{"postgres", "temporal", "worker", "simulator"} {
			require.Empty(t, f.Services[name].Ports, "%s is reached inside the compose network only", name)
		}
	})

	t.Run("each service reaches PostgreSQL as a role of its own, and only postgres-roles as the superuser", func(t *testing.T) {
		roles := f.Services["postgres-roles"]
		require.Equal(t, []string{"smsctl", "postgres-roles"}, roles.Command)
		require.True(t, roles.OneShot())
		ledgerDSN := "postgres://smsorch_ledger@postgres:5432/smsorch?sslmode=disable"
		temporalDSN := "postgres://smsorch_temporal@postgres:5432/temporal?sslmode=disable"
		require.Equal(t, ledgerDSN, roles.Environment["SMSORCH_LEDGER"])
		require.Equal(t, temporalDSN, roles.Environment["SMSORCH_TEMPORAL_DB"])
		require.Equal(t, temporalDSN, f.Services["temporal"].Environment["SMSORCH_TEMPORAL_DB"])
		for _, name := range []string{"worker", "intake"} {
			require.Equal(t, ledgerDSN, f.Services[name].Environment["SMSORCH_LEDGER"], "%s uses the ledger's role", name)
		}
		// Each password is a secret only its role's services see (the
		// audiences are checked with the other secrets').
		require.Equal(t, SecretsDir+"/postgres-password", f.Services["postgres"].Environment["POSTGRES_PASSWORD_FILE"], "the postgres image reads the superuser's password from the secret")
		// The addresses and their passwords come together in the code, as
		// each service sees them.
		dir := userSecrets(t)
		for _, c := range []struct{ service, dsn, secret string }{
			{"postgres-roles", cli.EnvPostgresAdmin, "postgres-password"},
			{"postgres-roles", app.EnvTemporalDB, "temporal-db-password"},
			{"postgres-roles", app.EnvLedger, "ledger-db-password"},
			{"temporal", app.EnvTemporalDB, "temporal-db-password"},
			{"worker", app.EnvLedger, "ledger-db-password"},
			{"intake", app.EnvLedger, "ledger-db-password"},
		} {
			env := seenHere(t, f.Services[c.service], dir)
			got, err := secrets.DSN(func(k string) string { return env[k] }, c.dsn)
			require.NoError(t, err, c.service)
			pw, err := os.ReadFile(filepath.Join(dir, c.secret))
			require.NoError(t, err)
			u, err := url.Parse(got)
			require.NoError(t, err)
			p, _ := u.User.Password()
			require.Equal(t, strings.TrimSpace(string(pw)), p, "%s reaches PostgreSQL with the password of %s", c.service, c.secret)
		}
	})

	t.Run("the simulator is a profile, its credentials the workers' files", func(t *testing.T) {
		sim := raw.Services["simulator"]
		require.Equal(t, []string{"sim"}, sim.Profiles)
		for _, a := range sim.Command {
			require.NotContains(t, a, "token", "no secret on the simulator's command line")
			require.NotContains(t, a, "access-key")
		}
		require.Equal(t, SecretsDir+"/bird-access-key", sim.Environment[app.EnvBirdAccessKey+secrets.FileSuffix])
		require.Equal(t, SecretsDir+"/sendy-token", sim.Environment[app.EnvSendyToken+secrets.FileSuffix])
		for _, w := range []string{"worker", "intake"} {
			require.Equal(t, sim.Environment[app.EnvBirdAccessKey+secrets.FileSuffix], f.Services[w].Environment[app.EnvBirdAccessKey+secrets.FileSuffix], "%s presents the key the simulator takes", w)
		}
		for name, s := range raw.Services {
			require.NotContains(t, s.DependsOn, "simulator", "%s must start without the sim profile", name)
		}
	})

	t.Run("the web UI's login, when set, reaches the UI and the servers, and passes Validate", func(t *testing.T) {
		login := userEnv(t)
		for k, v := range map[string]string{"SMSORCH_OIDC_ISSUER": "https://idp.example", "SMSORCH_OIDC_JWKS": "https://idp.example/keys",
			"SMSORCH_UI_OIDC_CLIENT_ID": "smsorch-ui", "SMSORCH_UI_OIDC_CALLBACK_URL": "https://temporal.example/auth/sso/callback"} {
			require.Contains(t, login, k, ".env.example lists %s", k)
			login[k] = v
		}
		dir := userSecrets(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "ui-oidc-client-secret"), []byte("a-secret-from-the-provider\n"), stacksecrets.FileMode))
		lf, err := Load(composePath, login)
		require.NoError(t, err)
		t.Cleanup(func() { app.UseEmbedded(nil) })
		app.UseEmbedded(stackproc.Start)
		for _, name := range []string{"temporal", "temporal-ui"} {
			s := lf.Services[name]
			for k, v := range seenHere(t, s, dir) {
				t.Setenv(k, v)
			}
			var cfg app.Config
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			require.NoError(t, fs.Parse(s.Command[1:]), name)
			cfg.ReadEnv(os.Getenv)
			require.NoError(t, cfg.WithDefaults().Validate(), name)
			if name == "temporal" {
				require.Equal(t, "https://idp.example/keys", cfg.TemporalAPIKeysJWKS)
				require.Equal(t, "smsorch-ui", cfg.TemporalAPIKeysAudience, "the servers take the UI's people's ID tokens")
			} else {
				require.Equal(t, "https://idp.example", cfg.UIOIDCIssuer)
				require.Equal(t, "a-secret-from-the-provider", cfg.UIOIDCClientSecret.Reveal())
			}
			for k := range s.Environment {
				_ = os.Unsetenv(k)
			}
		}
	})

	t.Run("every command line parses with the real flags and passes Validate", func(t *testing.T) {
		t.Cleanup(func() { app.UseEmbedded(nil) })
		dir := userSecrets(t)
		for _, name := range ours {
			s := f.Services[name]
			if s.Command[0] == "smssim" || s.Command[0] == "smsctl" {
				continue // their own flags; the rehearsal starts them
			}
			require.Contains(t, []string{"worker", "smsorch-temporal"}, s.Command[0], name)
			for k, v := range seenHere(t, s, dir) {
				t.Setenv(k, v)
			}
			// smsorch-temporal holds the embedded server, the image's
			// worker (-tags nodevstack) does not: Validate says which modes
			// each can take.
			if s.Command[0] == "smsorch-temporal" {
				app.UseEmbedded(stackproc.Start)
			} else {
				app.UseEmbedded(nil)
			}
			var cfg app.Config
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			require.NoError(t, fs.Parse(s.Command[1:]), name)
			require.Empty(t, fs.Args(), "%s: stray arguments", name)
			cfg = cfg.WithDefaults()
			require.NoError(t, cfg.Validate(), name)
			if name == "worker" || name == "intake" {
				require.NotEmpty(t, cfg.Bird.AccessKey.Reveal(), "%s reads the provider's credential from its file", name)
				u, err := url.Parse(cfg.LedgerPath)
				require.NoError(t, err)
				_, hasPassword := u.User.Password()
				require.True(t, hasPassword, "%s reaches the ledger with the password from its file", name)
			}
			require.False(t, cfg.Dev, "%s is not dev mode", name)
			require.False(t, cfg.PlaintextPayloads, name)
			for k := range s.Environment {
				_ = os.Unsetenv(k) // t.Setenv restores it at the end
			}
		}
	})

	t.Run("our services run with least privilege", func(t *testing.T) {
		for _, name := range ours {
			s := f.Services[name]
			require.True(t, s.ReadOnly, "%s: a read-only root file system", name)
			require.Equal(t, []string{"/tmp:size=64m"}, s.Tmpfs, "%s: scratch space in /tmp only", name)
			require.Equal(t, []string{"ALL"}, s.CapDrop, "%s: no Linux capability", name)
			require.Contains(t, s.SecurityOpt, "no-new-privileges:true", name)
			require.Positive(t, s.PidsLimit, "%s: a ceiling on processes", name)
			require.Regexp(t, `^[0-9]+[mg]$`, s.MemLimit, "%s: a ceiling on memory", name)
		}
		require.Contains(t, f.Services["postgres"].SecurityOpt, "no-new-privileges:true")
	})

	t.Run("the intake trusts the network's gateway alone as its proxy", func(t *testing.T) {
		net0 := f.Networks["default"].IPAM.Config
		require.Len(t, net0, 1, "the default network has one fixed range")
		_, subnet, err := net.ParseCIDR(net0[0].Subnet)
		require.NoError(t, err)
		gateway := net.ParseIP(net0[0].Gateway)
		require.NotNil(t, gateway, "gateway %q", net0[0].Gateway)
		require.True(t, subnet.Contains(gateway))
		var cfg app.Config
		fs := flag.NewFlagSet("intake", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		require.NoError(t, fs.Parse(f.Services["intake"].Command[1:]))
		require.Len(t, cfg.IntakeProxies, 1)
		ones, bits := cfg.IntakeProxies[0].Mask.Size()
		require.Equal(t, bits, ones, "one address, not a range: %s", cfg.IntakeProxies[0])
		require.True(t, cfg.IntakeProxies[0].IP.Equal(gateway), "the proxy is the gateway %s, not %s", gateway, cfg.IntakeProxies[0])
		other := append(net.IP(nil), gateway.To4()...)
		other[3]++
		require.False(t, cfg.IntakeProxies[0].Contains(other), "another container of the network, %s, is no proxy", other)
	})

	t.Run("Temporal speaks mutual TLS and each client holds its own certificate", func(t *testing.T) {
		server := f.Services["temporal"]
		require.NotContains(t, server.Command, "--frontend-without-tls")
		require.NotContains(t, server.Command, "--temporal-tls-any-client", "the roles in certificates decide each call")
		for _, a := range []string{"--temporal-tls-cert=/tls/cert.pem", "--temporal-tls-key=/tls/key.pem", "--temporal-tls-ca=/tls/ca.pem"} {
			require.Contains(t, server.Command, a)
		}
		require.Equal(t, map[string]DependsOn{"postgres-roles": {"service_completed_successfully"}, "certs": {"service_completed_successfully"}}, server.DependsOn)
		certs := f.Services["certs"]
		require.Equal(t, []string{"smsctl", "certs", "--dir=/certs", "--server-name=temporal"}, certs.Command)
		// Each service mounts its own certificate's volume, read-only, and
		// only the certs service the CA's key (pki).
		want := map[string]string{"temporal": "tls-temporal", "worker": "tls-worker", "intake": "tls-intake", "temporal-ui": "tls-ui"}
		for name, s := range f.Services {
			for _, v := range s.Volumes {
				vol := strings.Split(v, ":")[0]
				if strings.HasPrefix(vol, "tls-") || vol == "pki" {
					require.Contains(t, f.Volumes, vol)
					if name == "certs" {
						continue
					}
					require.Equal(t, want[name]+":/tls:ro", v, "%s mounts its own certificate only, read-only", name)
				}
			}
		}
		for name, vol := range want {
			require.Contains(t, f.Services[name].Volumes, vol+":/tls:ro", name)
			require.Contains(t, certs.Volumes, vol+":/certs/"+strings.TrimPrefix(vol, "tls-"), "the certs service writes %s's", name)
		}
		require.Contains(t, certs.Volumes, "pki:/certs/"+pki.CADir)
		// The certs service writes what the others read.
		for _, sc := range pki.StackCerts {
			if sc.Dir != pki.CADir {
				require.Contains(t, f.Volumes, "tls-"+sc.Dir, "a volume for %s's certificate", sc.Dir)
			}
		}
		for _, name := range []string{"worker", "intake", "temporal-ui"} {
			e := f.Services[name].Environment
			require.Equal(t, "/tls/cert.pem", e["TEMPORAL_TLS_CLIENT_CERT_PATH"], name)
			require.Equal(t, "/tls/key.pem", e["TEMPORAL_TLS_CLIENT_KEY_PATH"], name)
			require.Equal(t, "/tls/ca.pem", e["TEMPORAL_TLS_SERVER_CA_CERT_PATH"], name)
			require.Equal(t, "temporal", e["TEMPORAL_TLS_SERVER_NAME"], name)
		}
		df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
		require.NoError(t, err)
		for _, p := range []string{"/rootfs/tls", "/rootfs/certs/ca", "/rootfs/certs/temporal", "/rootfs/certs/worker", "/rootfs/certs/intake", "/rootfs/certs/ui"} {
			require.Contains(t, string(df), p, "the image holds the mount point %s, owned by its user", p)
		}
		require.Contains(t, string(df), "COPY --from=build --chown=65532:65532 /rootfs/ /")
	})

	t.Run("start order and health checks", func(t *testing.T) {
		for _, name := range ours {
			s := f.Services[name]
			if s.OneShot() {
				require.Nil(t, s.Healthcheck, "%s runs once: its dependents wait for it to finish", name)
				continue
			}
			require.NotNil(t, s.Healthcheck, name)
			require.Equal(t, []string{"CMD", "worker", "healthcheck"}, s.Healthcheck.Test[:3], "%s: the image has no shell; the binary checks", name)
			for dep, cond := range s.DependsOn {
				want := "service_healthy"
				if f.Services[dep].OneShot() {
					want = "service_completed_successfully"
				}
				require.Equal(t, want, cond.Condition, "%s waits for %s", name, dep)
			}
		}
		for _, name := range []string{"worker", "intake", "temporal-ui"} {
			require.Contains(t, f.Services[name].DependsOn, "temporal", name)
		}
		require.Contains(t, f.Services["temporal"].DependsOn, "postgres-roles")
		require.Contains(t, f.Services["postgres-roles"].DependsOn, "postgres")
		require.Contains(t, strings.Join(f.Services["postgres"].Healthcheck.Test, " "), "pg_isready -h 127.0.0.1", "over TCP: the image's first-boot server listens on its socket only")
		for _, name := range []string{"worker", "intake"} {
			require.Equal(t, "30s", f.Services[name].StopGracePeriod, "%s: sends in flight finish (--stop-timeout 25s)", name)
		}
	})

	t.Run("the connection pools fit PostgreSQL's default", func(t *testing.T) {
		const pgDefault, reserved = 100, 3 // max_connections, superuser_reserved_connections
		servers := f.Services["temporal"].Replicas() * defaults.PostgresMaxConnsPerServer
		workers := 0
		for _, s := range f.Services {
			if ledger.IsPostgresDSN(s.Environment[app.EnvLedger]) && !s.OneShot() {
				workers += s.Replicas() * ledger.DefaultPostgresPoolSize
			}
		}
		t.Logf("at most %d connections from the servers and %d from the workers' ledgers, of %d", servers, workers, pgDefault-reserved)
		require.LessOrEqual(t, servers+workers, pgDefault-reserved-25, "room for an operator's psql, a migration and a replica more")
	})
}

// variablesTheCodeReads lists the environment variables the programs
// read: the worker's (the Env* constants, found in the source where they
// are read), the simulator's, and those of the Temporal SDK's envconfig,
// found in its source.
func variablesTheCodeReads(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	src, err := os.ReadFile(filepath.Join("..", "app", "config.go"))
	require.NoError(t, err)
	// A secret read with secrets.Get or Optional is also read from the
	// file NAME_FILE names; an address read with secrets.DSN takes its
	// password from NAME_PASSWORD or NAME_PASSWORD_FILE too.
	readSecret := func(k string) { read[k], read[k+secrets.FileSuffix] = true, true }
	readDSN := func(k string) {
		readSecret(k)
		readSecret(k + secrets.PasswordSuffix)
	}
	for name, k := range map[string]string{
		"EnvIntakeSecret": app.EnvIntakeSecret, "codec.EnvToken": codec.EnvToken,
	} {
		require.Contains(t, string(src), "get("+name+")", "config.go reads %s (or its _FILE)", k)
		readSecret(k)
	}
	for name, k := range map[string]string{
		"EnvBirdAccessKey": app.EnvBirdAccessKey, "EnvSendyToken": app.EnvSendyToken,
		"EnvIntakePreviousSecret": app.EnvIntakePreviousSecret, "EnvIntakeSenders": app.EnvIntakeSenders, "EnvUIOIDCClientSecret": app.EnvUIOIDCClientSecret,
	} {
		require.Contains(t, string(src), "optional("+name+")", "config.go reads %s (or its _FILE, empty for none)", k)
		readSecret(k)
	}
	for name, k := range map[string]string{"EnvLedger": app.EnvLedger, "EnvTemporalDB": app.EnvTemporalDB} {
		require.Contains(t, string(src), "dsn("+name+", ", "config.go reads %s (its password apart)", k)
		readDSN(k)
	}
	// smsctl postgres-roles's superuser.
	roles, err := os.ReadFile(filepath.Join("..", "cmd", "smsctl", "cli", "pgroles.go"))
	require.NoError(t, err)
	require.Contains(t, string(roles), "get(EnvPostgresAdmin)")
	require.Contains(t, string(roles), "secrets.DSN(c.getenv, name)")
	readDSN(cli.EnvPostgresAdmin)
	// The payload keys, through the codec package.
	require.Contains(t, string(src), "codec.FromEnv(getenv)")
	codecSrc, err := os.ReadFile(filepath.Join("..", "codec", "codec.go"))
	require.NoError(t, err)
	for name, k := range map[string]string{"EnvKeys": codec.EnvKeys, "EnvKeyFile": codec.EnvKeyFile, "EnvKeysFile": codec.EnvKeysFile} {
		require.Contains(t, string(codecSrc), "getenv("+name+")", "codec.FromEnv reads %s", k)
		read[k] = true
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk/contrib/envconfig").Output()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "*.go"))
	require.NoError(t, err)
	var sdk strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sdk.Write(b)
	}
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME"} {
		if strings.Contains(sdk.String(), `"`+k+`"`) {
			read[k] = true
		}
	}
	require.True(t, read["TEMPORAL_ADDRESS"], "the SDK's envconfig reads TEMPORAL_ADDRESS")
	return read
}

func keys[V any](m map[string]V) []string { return slices.Collect(maps.Keys(m)) }
