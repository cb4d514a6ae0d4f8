package app

// Docker cannot run on this project's machines, so docker-compose.yml is
// checked against the code here: it parses; every build context and
// Dockerfile exists; every variable our services set is one the code
// reads, and every variable the code requires is set; host ports do not
// collide; each worker's command line parses with the real flag set and
// passes Validate; the search attributes made at start are the contract's.

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// ours are the services built from this repository.
var ours = []string{"worker", "intake", "simulator"}

func loadCompose(t *testing.T) (composeFile, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	require.NoError(t, err, "docker-compose.yml is part of the project's top level")
	var c composeFile
	require.NoError(t, yaml.Unmarshal(b, &c), "docker-compose.yml must parse")
	example, err := os.ReadFile(filepath.Join("..", ".env.example"))
	require.NoError(t, err, ".env.example documents the secrets")
	env := map[string]string{}
	for _, line := range strings.Split(string(example), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	return c, env
}

// interpolate expands ${VAR}, ${VAR:-default} and ${VAR:?message} as
// docker compose does, from env.
var varRE = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}`)

func interpolate(t *testing.T, s string, env map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		p := varRE.FindStringSubmatch(m)
		if v, ok := env[p[1]]; ok && v != "" {
			return v
		}
		switch p[2] {
		case "-":
			return p[3]
		case "?":
			t.Errorf("%s is required (%s) but .env.example does not set it", p[1], p[3])
		}
		return ""
	})
}

func TestComposeFileMatchesTheCode(t *testing.T) {
	c, dotenv := loadCompose(t)
	for _, name := range []string{"postgres", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "simulator", "worker", "intake"} {
		require.Contains(t, c.Services, name)
	}
	require.Equal(t, 2, c.Services["worker"].Deploy.Replicas, "two worker replicas")

	t.Run("build contexts and the Dockerfile exist", func(t *testing.T) {
		for _, name := range ours {
			require.Equal(t, ".", c.Services[name].Build, name)
		}
		df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
		require.NoError(t, err)
		require.Contains(t, string(df), "AS build", "multi-stage")
		require.Contains(t, string(df), "CGO_ENABLED=0", "static binaries")
		require.Regexp(t, `(?m)^USER [0-9]+`, string(df), "not root")
		for _, bin := range []string{"./worker", "./cmd/smssim", "./cmd/smsctl"} {
			require.Contains(t, string(df), bin)
			_, err := os.Stat(filepath.Join("..", bin))
			require.NoError(t, err, bin)
		}
	})

	t.Run("every variable our services set is read, every required one set", func(t *testing.T) {
		read := variablesTheCodeReads(t)
		for _, name := range ours {
			for k := range c.Services[name].Environment {
				require.True(t, read[k], "%s sets %s, which no code reads", name, k)
			}
		}
		for _, name := range []string{"worker", "intake"} {
			envs := c.Services[name].Environment
			for _, k := range []string{EnvBirdAccessKey, EnvSendyToken, EnvLedger, "TEMPORAL_ADDRESS", codec.EnvKeys} {
				require.NotEmpty(t, envs[k], "%s needs %s", name, k)
			}
			require.True(t, ledger.IsPostgresDSN(interpolate(t, envs[EnvLedger], dotenv)), "%s: the replicas share the Postgres ledger", name)
		}
		require.NotEmpty(t, c.Services["intake"].Environment[EnvIntakeSecret], "the intake serves on all interfaces: it must require signatures")
	})

	t.Run("no secret is written in the file", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
		require.NoError(t, err)
		for _, k := range []string{"POSTGRES_PASSWORD", EnvBirdAccessKey, EnvSendyToken, EnvIntakeSecret, codec.EnvKeys} {
			require.NotContains(t, string(raw), dotenv[k], "%s's value comes from .env, not the file", k)
		}
		ignore, err := os.ReadFile(filepath.Join("..", ".gitignore"))
		require.NoError(t, err)
		require.Contains(t, string(ignore), "/.env", ".env is git-ignored")
	})

	t.Run("host ports do not collide", func(t *testing.T) {
		seen := map[string]string{}
		for name, s := range c.Services {
			for _, p := range s.Ports {
				host, _, ok := strings.Cut(p, ":")
				require.True(t, ok, "%s: publish as HOST:CONTAINER, got %q", name, p)
				prev, dup := seen[host]
				require.False(t, dup, "%s and %s both publish host port %s", prev, name, host)
				seen[host] = name
			}
		}
	})

	t.Run("the workers' command lines parse with the real flags", func(t *testing.T) {
		for _, name := range []string{"worker", "intake"} {
			s := c.Services[name]
			require.Equal(t, "worker", s.Command[0])
			env := map[string]string{}
			for k, v := range s.Environment {
				env[k] = interpolate(t, v, dotenv)
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			var cfg Config
			fs := flag.NewFlagSet(name, flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			args := make([]string, 0, len(s.Command)-1)
			for _, a := range s.Command[1:] {
				args = append(args, interpolate(t, a, dotenv))
			}
			require.NoError(t, fs.Parse(args), name)
			require.Empty(t, fs.Args(), "%s: stray arguments", name)
			cfg = cfg.WithDefaults()
			require.NoError(t, cfg.Validate(), name)
			require.False(t, cfg.Dev, "%s runs against the Temporal cluster", name)
			require.True(t, ledger.IsPostgresDSN(cfg.LedgerPath), "%s reads SMSORCH_LEDGER", name)
		}
	})

	t.Run("start order and health checks", func(t *testing.T) {
		require.Equal(t, "service_healthy", c.Services["temporal-schema"].DependsOn["postgres"].Condition)
		require.Equal(t, "service_completed_successfully", c.Services["temporal"].DependsOn["temporal-schema"].Condition)
		for _, name := range []string{"worker", "intake"} {
			require.Equal(t, "service_completed_successfully", c.Services[name].DependsOn["temporal-namespace"].Condition, name)
			require.Equal(t, "service_healthy", c.Services[name].DependsOn["simulator"].Condition, name)
		}
		for _, name := range []string{"postgres", "simulator", "intake"} {
			require.NotNil(t, c.Services[name].Healthcheck, name)
		}
	})

	t.Run("the namespace and search attributes are the contract's", func(t *testing.T) {
		script := strings.Join(c.Services["temporal-namespace"].Command, "\n")
		require.Contains(t, script, "--retention 720h", "30-day retention")
		var names []string
		for k := range contract.SearchAttributes() {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, n := range names {
			require.Contains(t, script, n)
		}
		require.Contains(t, script, "--type Keyword")
	})
}

// variablesTheCodeReads lists the environment variables the worker reads:
// its own (the Env* constants, found in the source where they are read)
// and those of the Temporal SDK's envconfig, found in its source.
func variablesTheCodeReads(t *testing.T) map[string]bool {
	t.Helper()
	read := map[string]bool{}
	src, err := os.ReadFile("config.go")
	require.NoError(t, err)
	for name, k := range map[string]string{
		"EnvBirdAccessKey": EnvBirdAccessKey, "EnvSendyToken": EnvSendyToken,
		"EnvIntakeSecret": EnvIntakeSecret, "EnvLedger": EnvLedger, "EnvTemporalDB": EnvTemporalDB,
		"codec.EnvToken": codec.EnvToken,
	} {
		require.Contains(t, string(src), "os.Getenv("+name+")", "config.go reads %s", k)
		read[k] = true
	}
	// The payload keys, through the codec package.
	require.Contains(t, string(src), "codec.FromEnv(os.Getenv)")
	codecSrc, err := os.ReadFile(filepath.Join("..", "codec", "codec.go"))
	require.NoError(t, err)
	for name, k := range map[string]string{"EnvKeys": codec.EnvKeys, "EnvKeyFile": codec.EnvKeyFile} {
		require.Contains(t, string(codecSrc), "getenv("+name+")", "codec.FromEnv reads %s", k)
		read[k] = true
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/sdk/contrib/envconfig").Output()
	require.NoError(t, err)
	dir := strings.TrimSpace(string(out))
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
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
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} {
		if strings.Contains(sdk.String(), `"`+k+`"`) {
			read[k] = true
		}
	}
	require.True(t, read["TEMPORAL_ADDRESS"], "the SDK's envconfig reads TEMPORAL_ADDRESS")
	return read
}
