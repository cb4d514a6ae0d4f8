// Package compose reads docker-compose.yml as docker compose does (its
// variables from an env file, its anchors and merges), so that tests can
// check the file against the code and start its services from their own
// lines (compose_test.go, rehearsal_test.go).
package compose

import (
	"errors"
	"fmt"
	"os"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/acme/smsorch/internal/stacksecrets"
)

// File is the part of a compose file this project uses.
type File struct {
	Services map[string]Service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
	Networks map[string]Network `yaml:"networks"`
	// Secrets are the file secrets a service lists in its own secrets:
	// each mounted at /run/secrets/NAME.
	Secrets map[string]SecretSource `yaml:"secrets"`
}

// SecretSource is where a secret's contents are: a file of the host,
// relative to the compose file's directory unless absolute.
type SecretSource struct {
	File string `yaml:"file"`
}

// SecretsDir is where a container sees the secrets it lists.
const SecretsDir = "/run/secrets"

// Service is one service of the file.
type Service struct {
	Image           string                 `yaml:"image"`
	PullPolicy      string                 `yaml:"pull_policy"`
	Build           any                    `yaml:"build"`
	Command         []string               `yaml:"command"`
	Environment     map[string]string      `yaml:"environment"`
	Ports           []string               `yaml:"ports"`
	Profiles        []string               `yaml:"profiles"`
	DependsOn       map[string]DependsOn   `yaml:"depends_on"`
	Deploy          struct{ Replicas int } `yaml:"deploy"`
	Healthcheck     *Healthcheck           `yaml:"healthcheck"`
	StopGracePeriod string                 `yaml:"stop_grace_period"`
	ReadOnly        bool                   `yaml:"read_only"`
	Tmpfs           []string               `yaml:"tmpfs"`
	CapDrop         []string               `yaml:"cap_drop"`
	SecurityOpt     []string               `yaml:"security_opt"`
	PidsLimit       int                    `yaml:"pids_limit"`
	MemLimit        string                 `yaml:"mem_limit"`
	// Volumes are VOLUME:PATH[:ro] mounts.
	Volumes []string `yaml:"volumes"`
	// Secrets name the file's secrets the service sees in SecretsDir.
	Secrets []string `yaml:"secrets"`
	Restart string   `yaml:"restart"`
}

// OneShot says the service runs once to completion at each start (its
// dependents wait with service_completed_successfully).
func (s Service) OneShot() bool { return s.Restart == "no" }

// DependsOn is a start condition: service_started, service_healthy or
// service_completed_successfully.
type DependsOn struct {
	Condition string `yaml:"condition"`
}

// Healthcheck is a service's health check.
type Healthcheck struct {
	Test     []string `yaml:"test"`
	Interval string   `yaml:"interval"`
	Timeout  string   `yaml:"timeout"`
	Retries  int      `yaml:"retries"`
}

// Replicas is how many containers of the service run (1 by default).
func (s Service) Replicas() int { return max(1, s.Deploy.Replicas) }

// Read parses the file at path without interpolating its variables.
func Read(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{}, err
	}
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		return File{}, fmt.Errorf("%s does not parse: %w", path, err)
	}
	return f, nil
}

// Network is a network of the file: its address ranges.
type Network struct {
	IPAM struct {
		Config []struct {
			Subnet  string `yaml:"subnet"`
			Gateway string `yaml:"gateway"`
		} `yaml:"config"`
	} `yaml:"ipam"`
}

// Load parses the file at path and interpolates every command,
// environment value, port, health check and secret's file from env as docker compose
// does: ${VAR}, ${VAR:-default}, ${VAR:?message} (an error naming each
// missing variable) and $$ for a literal $.
func Load(path string, env map[string]string) (File, error) {
	f, err := Read(path)
	if err != nil {
		return File{}, err
	}
	var errs []error
	in := func(s string) string {
		v, err := Interpolate(s, env)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	for name, s := range f.Services {
		for i := range s.Command {
			s.Command[i] = in(s.Command[i])
		}
		for k, v := range s.Environment {
			s.Environment[k] = in(v)
		}
		for i := range s.Ports {
			s.Ports[i] = in(s.Ports[i])
		}
		if s.Healthcheck != nil {
			for i := range s.Healthcheck.Test {
				s.Healthcheck.Test[i] = in(s.Healthcheck.Test[i])
			}
		}
		s.Image = in(s.Image)
		f.Services[name] = s
	}
	for name, sec := range f.Secrets {
		sec.File = in(sec.File)
		f.Secrets[name] = sec
	}
	for _, n := range f.Networks {
		for i := range n.IPAM.Config {
			c := &n.IPAM.Config[i]
			c.Subnet, c.Gateway = in(c.Subnet), in(c.Gateway)
		}
	}
	return f, errors.Join(errs...)
}

var varRE = regexp.MustCompile(`\$\$|\$\{([A-Za-z0-9_]+)(?::([-?])([^}]*))?\}`)

// Interpolate expands s from env as docker compose does.
func Interpolate(s string, env map[string]string) (string, error) {
	var errs []error
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		p := varRE.FindStringSubmatch(m)
		if v := env[p[1]]; v != "" {
			return v
		}
		switch p[2] {
		case "-":
			return p[3]
		case "?":
			errs = append(errs, fmt.Errorf("%s is required: %s", p[1], p[3]))
		}
		return ""
	})
	return out, errors.Join(errs...)
}

// ReadEnv reads an env file (.env, .env.example) as docker compose
// does: KEY=VALUE lines, comments and blank lines skipped.
func ReadEnv(path string) (map[string]string, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	return stacksecrets.ReadEnvFile(path)
}
