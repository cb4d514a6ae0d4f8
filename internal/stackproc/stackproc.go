// Package stackproc runs the embedded Temporal stack in a child process,
// for tests. The child (internal/devstack/devstackd) is built from this
// module without the race detector: a test binary built with -race then
// neither links the Temporal server nor runs it instrumented (the first
// `go test -race ./...` on a fresh clone measured 977 s before, 731 s
// after). The worker
// itself runs the same stack in its own process (devstack.Embed); the
// child runs that very function.
package stackproc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acme/smsorch/internal/stackspec"
)

// stopGrace is how long Stop waits for the child to stop its stack
// before it kills it.
const stopGrace = time.Minute

// Stack is a stack running in a child process.
type Stack struct {
	ready     stackspec.Ready
	clientTLS *tls.Config
	cmd       *exec.Cmd
	stdin     io.Closer
	done      chan struct{}
	waitErr   error
	out       *childLog
	tempDir   string // made for the log when the request has no data directory
	stopOnce  sync.Once
	stopErr   error
}

var _ stackspec.Starter = Start

// Start is a stackspec.Starter: it builds the child program (once per
// process; the go command finds it up to date after that), starts it
// with req, and returns once the stack answers. The child's log is in
// the data directory (devstack.log), else in a temporary directory, and
// its lines reach log too, at their level, as the server's lines reach
// the worker's log in its own process.
func Start(ctx context.Context, req stackspec.Request, log *zap.Logger) (stackspec.Embedded, error) {
	if log == nil {
		log = zap.NewNop()
	}
	bin, err := binary(ctx)
	if err != nil {
		return nil, err
	}
	// The test binary holds none of the server: the files the child is
	// built from are what go test's cache must see change. It records
	// what a test opens once m.Run has begun, so each start opens them.
	if err := open(built.sources); err != nil {
		return nil, err
	}
	js, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	s := &Stack{done: make(chan struct{})}
	logDir := req.DataDir
	if logDir == "" {
		if s.tempDir, err = os.MkdirTemp("", "smsorch-devstack-"); err != nil {
			return nil, err
		}
		logDir = s.tempDir
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the dev-stack data directory %s: %w", logDir, err)
	}
	if s.out, err = openChildLog(filepath.Join(logDir, "devstack.log"), log); err != nil {
		s.removeTemp()
		return nil, err
	}
	// The request goes in the child's environment, which only its user
	// reads, not on its command line, which every user does (it may
	// hold the web UI's client secret).
	s.cmd = exec.Command(bin, "-log-level", lowestLevel(log))
	s.cmd.Env = append(os.Environ(), stackspec.EnvRequest+"="+string(js))
	s.cmd.SysProcAttr = ChildAttr()
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		return nil, s.abandon(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, s.abandon(err)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, s.abandon(err)
	}
	if err := s.cmd.Start(); err != nil {
		return nil, s.abandon(fmt.Errorf("start the dev stack's process %s: %w", bin, err))
	}
	s.stdin = stdin
	log.Info("the dev stack runs in a child process", zap.Int("pid", s.cmd.Process.Pid), zap.String("log", s.out.path))
	readyc := make(chan error, 1)
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() {
		defer pipes.Done()
		s.out.copy(stderr)
	}()
	go func() {
		defer pipes.Done()
		found := false
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, stackspec.ReadyPrefix); ok && !found {
				found = true
				readyc <- json.Unmarshal([]byte(rest), &s.ready)
				continue
			}
			s.out.line(line)
		}
		if !found {
			readyc <- errors.New("the child exited before it was ready")
		}
	}()
	go func() {
		// Wait closes the pipes: only once both are read to their end.
		pipes.Wait()
		s.waitErr = s.cmd.Wait()
		s.out.close()
		close(s.done)
	}()
	select {
	case err = <-readyc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil && s.ready.ClientTLS && req.TLS != nil {
		cert, pool, name, lerr := req.TLS.Load()
		if lerr != nil {
			err = lerr
		} else {
			s.clientTLS = stackspec.ClientConfig(cert, pool, name)
		}
	}
	if err != nil {
		// The child stops first, and its log goes only after the message
		// quotes its end.
		s.stopOnce.Do(s.halt)
		err = fmt.Errorf("the dev stack did not start: %w%s", err, s.out.tail())
		s.removeTemp()
		return nil, err
	}
	return s, nil
}

// abandon releases what Start made before the child ran.
func (s *Stack) abandon(err error) error {
	s.out.close()
	s.removeTemp()
	return err
}

func (s *Stack) removeTemp() {
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}

// FrontendAddress is the host:port SDK clients dial.
func (s *Stack) FrontendAddress() string { return s.ready.FrontendAddress }

// UIURL is the web UI's address, or "" when the UI is off.
func (s *Stack) UIURL() string { return s.ready.UIURL }

// ClientTLS is what a client presents to the server (a copy), or nil
// when the server speaks plain gRPC.
func (s *Stack) ClientTLS() *tls.Config {
	if s.clientTLS == nil {
		return nil
	}
	return s.clientTLS.Clone()
}

// Namespace is the namespace registered at start.
func (s *Stack) Namespace() string { return s.ready.Namespace }

// State says where the server keeps its state.
func (s *Stack) State() string { return s.ready.State }

// Stop closes the child's stdin, on which it stops its stack and exits,
// and kills it if it has not within a minute. It is safe to call more
// than once.
func (s *Stack) Stop() error {
	s.stopOnce.Do(s.halt)
	s.removeTemp()
	return s.stopErr
}

// halt stops the child and says in stopErr how it ended.
func (s *Stack) halt() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		s.stopErr = fmt.Errorf("the dev stack's process did not stop within %s of its stdin closing and was killed%s", stopGrace, s.out.tail())
		return
	}
	if s.waitErr != nil {
		s.stopErr = fmt.Errorf("the dev stack's process: %w%s", s.waitErr, s.out.tail())
	}
}

// lowestLevel is the lowest level log writes, which the child logs at
// (info when log writes nothing: the child's file still has its lines).
func lowestLevel(log *zap.Logger) string {
	for _, l := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel, zapcore.ErrorLevel} {
		if log.Core().Enabled(l) {
			return l.String()
		}
	}
	return zapcore.InfoLevel.String()
}

// childLog keeps the child's lines in a file and hands each to the
// parent's logger at the level the line gives.
type childLog struct {
	path string
	log  *zap.Logger
	mu   sync.Mutex
	f    *os.File
}

func openChildLog(path string, log *zap.Logger) (*childLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &childLog{path: path, log: log, f: f}, nil
}

func (c *childLog) copy(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		c.line(sc.Text())
	}
	// A line longer than the buffer ends the scan: read on, so the child
	// never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

func (c *childLog) line(l string) {
	c.mu.Lock()
	if c.f != nil {
		_, _ = c.f.WriteString(l + "\n")
	}
	c.mu.Unlock()
	var entry struct {
		Level string `json:"level"`
		Msg   string `json:"msg"`
	}
	level, msg := zapcore.WarnLevel, l // a line that is not the logger's: printed by the program
	if json.Unmarshal([]byte(l), &entry) == nil && entry.Msg != "" {
		msg = entry.Msg
		if err := level.UnmarshalText([]byte(entry.Level)); err != nil {
			level = zapcore.InfoLevel
		}
	}
	if ce := c.log.Check(level, "dev stack: "+msg); ce != nil {
		ce.Write(zap.String("line", l))
	}
}

func (c *childLog) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}

// tail is the end of the child's log, for an error.
func (c *childLog) tail() string {
	b, err := os.ReadFile(c.path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "\n" + c.path + " ends:\n" + strings.Join(lines, "\n")
}

// Prepare builds the child program now: a test's TestMain calls it
// before m.Run, so that a first, cold build of the Temporal server does
// not count against go test's -timeout.
func Prepare(ctx context.Context) error {
	_, err := binary(ctx)
	return err
}

var built struct {
	once    sync.Once
	path    string
	sources []string
	err     error
}

// binary builds devstackd without the race detector, once per process,
// into a directory of the module's own under the temporary directory.
func binary(ctx context.Context) (string, error) {
	built.once.Do(func() { built.path, built.sources, built.err = build(ctx) })
	return built.path, built.err
}

func build(ctx context.Context) (string, []string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(os.TempDir(), "smsorch-devstackd-"+hashOf(root))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "devstackd")
	err = WithBuildLock(ctx, func() error {
		// The go command leaves an up-to-date binary alone, and replaces a
		// stale one by a rename, which a running child does not notice.
		return goCmd(ctx, root, "build", "-o", bin, "./internal/devstack/devstackd")
	})
	if err != nil {
		return "", nil, err
	}
	sources, err := Sources(ctx, root, "./internal/devstack/devstackd", false)
	return bin, sources, err
}

// WithBuildLock runs f under this module's build lock, shared by the
// test binaries of one `go test ./...`: the first compiles the Temporal
// server, the others find it built.
func WithBuildLock(ctx context.Context, f func() error) error {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "smsorch-build-"+hashOf(root)+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	return f()
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// ModuleRoot is the directory of the module the working directory is in.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module to build the dev stack's process from: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("the dev stack's process is built from the smsorch module: run it from inside the module")
	}
	return filepath.Dir(mod), nil
}

// goCmd runs the go command in root without the race detector, even
// where GOFLAGS asks for it.
func goCmd(ctx context.Context, root string, args ...string) error {
	var msg bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &msg, &msg
	cmd.Env = WithoutRace(os.Environ())
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), root, err, msg.String())
	}
	return nil
}

// WithoutRace is env with -race taken out of GOFLAGS.
func WithoutRace(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			var keep []string
			for _, f := range strings.Fields(v) {
				if f != "-race" && f != "--race" && f != "-race=true" {
					keep = append(keep, f)
				}
			}
			kv = "GOFLAGS=" + strings.Join(keep, " ")
		}
		out = append(out, kv)
	}
	return out
}

// Sources are go.mod, go.sum and the module's own source files that pkg
// is built from (with tests, its tests' too). go test caches a test's
// result by its binary and the files the test opened: a test that runs
// what a program built apart holds must open these (Consult) so that a
// change to one runs it again.
func Sources(ctx context.Context, root, pkg string, tests bool) ([]string, error) {
	args := []string{"list", "-deps"}
	if tests {
		args = append(args, "-test")
	}
	const each = `{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}
{{end}}{{range .TestGoFiles}}{{$.Dir}}/{{.}}
{{end}}{{range .XTestGoFiles}}{{$.Dir}}/{{.}}
{{end}}{{end}}`
	args = append(args, "-f", each, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, WithoutRace(os.Environ())
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w", strings.Join(args[:len(args)-3], " "), err)
	}
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, f := range strings.Fields(string(out)) {
		// The go command's own test main lives in its build cache.
		if strings.HasPrefix(f, root+string(filepath.Separator)) && !strings.Contains(f[len(root):], "//") {
			files = append(files, f)
		}
	}
	return files, nil
}

// Consult opens the Sources of pkg: call it from a test, after m.Run
// has begun, when go test records what the test opens.
func Consult(ctx context.Context, root, pkg string, tests bool) error {
	files, err := Sources(ctx, root, pkg, tests)
	if err != nil {
		return err
	}
	return open(files)
}

func open(files []string) error {
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		_ = fh.Close()
	}
	return nil
}
