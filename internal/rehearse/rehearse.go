// Package rehearse starts containers as processes, for the tests that
// rehearse a deployment file on a machine without Docker or Kubernetes
// (compose/rehearsal_test.go for docker-compose.yml, deploy/helm for the
// chart). Each container runs the binary its image's Dockerfile line
// builds, with the command line and environment the file gives it, on an
// address of its own on loopback (127.0.1.N), with its volumes as
// directories linked into a root of its own; names the file uses for
// other containers resolve to theirs.
package rehearse

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Binaries builds each binary the Dockerfile in root builds, into dir:
// the same package, build tags and link flags, in the environment of the
// calling test. Two of the lines' settings are left to .ci/run, which
// builds every package with them before the tests: CGO_ENABLED=0 and
// -trimpath. They make the binaries static and strip this machine's
// paths from them; neither changes a command line, a listener or a
// setting that a deployment file gives, which is what a rehearsal tries.
// Applied here they would compile all 1,800 packages of the Temporal
// server a third time on a machine that built the dev stack (once
// without -race, once with it for the tests): about 7 more minutes on 2
// cores for the README's test command.
func Binaries(root, dir string) (map[string]string, error) {
	df, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	line := regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 go build -trimpath (.*) -o /out/(\S+) (\./\S*)$`)
	bins := map[string]string{}
	for _, m := range line.FindAllStringSubmatch(string(df), -1) {
		args := append([]string{"build"}, ShellWords(m[1])...)
		args = append(args, "-o", filepath.Join(dir, m[2]), m[3])
		cmd := exec.Command("go", args...)
		cmd.Dir = root
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

// ShellWords splits s as the shell does for the Dockerfile's simple
// words: spaces separate, double quotes group (-ldflags="-s -w").
func ShellWords(s string) []string {
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

// Rewrite maps what a container sees to what a process here sees:
// 0.0.0.0 and 127.0.0.1 are the container's own address (where a port
// published on the host's loopback appears here too), and each name of
// hosts, followed by a port, is that host's address.
func Rewrite(s, ip string, hosts map[string]string) string {
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

// Mount is a volume mounted into a container: its contents are the
// directory dir/volumes/Volume of the rehearsal.
type Mount struct {
	Volume string
	// Path is where the container sees it: absolute.
	Path string
}

// Mounts maps the paths where a container sees its volumes to where
// they are here: each volume a directory under dir/volumes, linked into
// the container's own root directory.
type Mounts struct {
	root string
	tops []string // the first component of each mount's path
}

// VolumeDir is where the rehearsal under dir keeps a volume's contents.
func VolumeDir(dir, volume string) string { return filepath.Join(dir, "volumes", volume) }

// Link links each of ms into a root of the container name's own.
func Link(t *testing.T, dir, name string, ms []Mount) Mounts {
	t.Helper()
	m := Mounts{root: filepath.Join(dir, name+"-root")}
	for _, v := range ms {
		require.True(t, strings.HasPrefix(v.Path, "/"), "%s mounts %s at %q, not an absolute path", name, v.Volume, v.Path)
		host := VolumeDir(dir, v.Volume)
		require.NoError(t, os.MkdirAll(host, 0o700))
		link := filepath.Join(m.root, v.Path)
		require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o700))
		if err := os.Symlink(host, link); err != nil && !os.IsExist(err) {
			require.NoError(t, err)
		}
		if top := "/" + strings.SplitN(v.Path[1:], "/", 2)[0]; !slices.Contains(m.tops, top) {
			m.tops = append(m.tops, top)
		}
	}
	return m
}

// Path rewrites the container's paths in an argument or a value.
func (m Mounts) Path(s string) string {
	if len(m.tops) == 0 {
		return s
	}
	// One pass over every mount: the root may itself lie under a path
	// a container mounts (/tmp).
	quoted := make([]string, len(m.tops))
	for i, top := range m.tops {
		quoted[i] = regexp.QuoteMeta(top)
	}
	re := regexp.MustCompile(`(^|=)(` + strings.Join(quoted, "|") + `)(/|$)`)
	return re.ReplaceAllString(s, "${1}"+m.root+"${2}${3}")
}

// Container is what a deployment file says of one container.
type Container struct {
	Name string
	// Command is the container's command line; Command[0] names a
	// binary of the image.
	Command []string
	// Env is the container's whole environment.
	Env    map[string]string
	Mounts []Mount
	// Health is the command whose success says the container is ready
	// (Health[0] a binary of the image); empty for a one-shot container.
	Health []string
	// Grace is how long it has to stop after SIGTERM (10 s if zero).
	Grace time.Duration
}

// Process is one running container.
type Process struct {
	Name, LogPath string
	cmd           *exec.Cmd
	// Done receives the process's exit once (Wait and Stop put it back).
	done   chan error
	health []string
	bins   map[string]string
	grace  time.Duration
}

// Start starts c from bins on the address ip, its names resolved by
// hosts, its log in dir/NAME.log.
func Start(t *testing.T, bins map[string]string, dir string, c Container, ip string, hosts map[string]string) *Process {
	t.Helper()
	require.NotEmpty(t, c.Command, "%s has a command", c.Name)
	bin, ok := bins[c.Command[0]]
	require.True(t, ok, "%s runs %s, which the Dockerfile does not build", c.Name, c.Command[0])
	m := Link(t, dir, c.Name, c.Mounts)
	args := make([]string, 0, len(c.Command)-1)
	for _, a := range c.Command[1:] {
		args = append(args, m.Path(Rewrite(a, ip, hosts)))
	}
	// A container's environment: the file's, and nothing of ours.
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	for k, v := range c.Env {
		env = append(env, k+"="+m.Path(Rewrite(v, ip, hosts)))
	}
	p := &Process{Name: c.Name, LogPath: filepath.Join(dir, c.Name+".log"), bins: bins, grace: c.Grace, done: make(chan error, 1)}
	if p.grace == 0 {
		p.grace = 10 * time.Second
	}
	for _, a := range c.Health {
		p.health = append(p.health, Rewrite(a, ip, hosts))
	}
	log, err := os.Create(p.LogPath)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr, p.cmd.Dir = env, log, log, dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start(), "%s: %s %s", c.Name, bin, strings.Join(args, " "))
	go func() {
		p.done <- p.cmd.Wait()
		_ = log.Close()
	}()
	return p
}

// Wait waits for the process to exit.
func (p *Process) Wait() error {
	err := <-p.done
	p.done <- err
	return err
}

// WaitHealthy runs the container's health command until it passes.
func (p *Process) WaitHealthy(t *testing.T, ctx context.Context) {
	t.Helper()
	require.NotEmpty(t, p.health, "%s has a health check", p.Name)
	bin, ok := p.bins[p.health[0]]
	require.True(t, ok, "%s: the health check runs %s, which the image does not hold", p.Name, p.health[0])
	deadline := time.Now().Add(3 * time.Minute)
	var last []byte
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			log, _ := os.ReadFile(p.LogPath)
			t.Fatalf("%s exited at start (%v):\n%s", p.Name, err, Tail(log))
		default:
		}
		out, err := exec.CommandContext(ctx, bin, p.health[1:]...).CombinedOutput()
		if err == nil {
			return
		}
		last = out
		time.Sleep(500 * time.Millisecond)
	}
	log, _ := os.ReadFile(p.LogPath)
	t.Fatalf("%s's health check did not pass in 3 minutes (%s); its log:\n%s", p.Name, last, Tail(log))
}

// Stop is docker stop (and a pod's termination): SIGTERM, then SIGKILL
// after the grace period.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(p.grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within its grace period %s", p.Name, p.grace)
	}
}

// Kill kills the process and its children at once.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// Exec runs a binary of the image as `docker compose exec` or `kubectl
// exec` into c would: c's environment and mounts, here. It must succeed.
func Exec(t *testing.T, ctx context.Context, bins map[string]string, dir string, c Container, ip string, hosts map[string]string, bin string, args ...string) string {
	t.Helper()
	out, err := Run(t, ctx, bins, dir, c, ip, hosts, bin, args...)
	require.NoError(t, err, "%s %s: %s", bin, strings.Join(args, " "), out)
	return out
}

// Run is Exec for a command that may fail: its output and its error.
func Run(t *testing.T, ctx context.Context, bins map[string]string, dir string, c Container, ip string, hosts map[string]string, bin string, args ...string) (string, error) {
	t.Helper()
	m := Link(t, dir, c.Name+"-exec", c.Mounts)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	for k, v := range c.Env {
		env = append(env, k+"="+m.Path(Rewrite(v, ip, hosts)))
	}
	path, ok := bins[bin]
	require.True(t, ok, "the image holds no %s", bin)
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Tail is the end of a log, enough to see why a process stopped.
func Tail(b []byte) string {
	const n = 4000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Images are the image's binaries, built by Main for a rehearsal.
type Images struct {
	Bins map[string]string
	Err  error
}

// Main runs the tests of m, as a TestMain does; when the test named test
// is selected (not -short, and -run matches it), it first builds the
// binaries of the Dockerfile in root into images. The build is the
// rehearsal's setup, not what it tests, so go test's timeout does not
// count it: on a clone whose dev stack was built once it compiles little
// and links four binaries; on an empty build cache it compiles the
// Temporal server, about 7 minutes on 2 cores.
func Main(m *testing.M, root, test string, images *Images) int {
	flag.Parse()
	if !selected(test) {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "smsorch-image-bins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	images.Bins, images.Err = Binaries(root, dir)
	return m.Run()
}

// selected says whether this go test runs the test named test.
func selected(test string) bool {
	if testing.Short() {
		return false
	}
	run := flag.Lookup("test.run").Value.String()
	if run == "" {
		return true
	}
	// go test matches the part before the first slash against top-level
	// names; a pattern it rejects builds anyway and lets go test say why.
	re, err := regexp.Compile(strings.Split(run, "/")[0])
	return err != nil || re.MatchString(test)
}
