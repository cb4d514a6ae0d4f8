// Package stackproc runs the embedded Temporal stack in a child process,
// for tests. The child (internal/devstack/devstackd) is built from this
// module without the race detector: a test binary built with -race then
// neither links the Temporal server nor runs it instrumented, which made
// the server the largest part of `go test -race ./...`. The worker
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
	logPath   string
	stopOnce  sync.Once
	stopErr   error
}

var _ stackspec.Starter = Start

// Start is a stackspec.Starter: it builds the child program (once per
// process; the go command finds it up to date after that), starts it
// with req, and returns once the stack answers. The child's log is in
// the data directory (devstack.log), else in a temporary directory.
func Start(ctx context.Context, req stackspec.Request, log *zap.Logger) (stackspec.Embedded, error) {
	bin, err := binary(ctx)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	logDir := req.DataDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "smsorch-devstack-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the dev-stack data directory %s: %w", logDir, err)
	}
	s := &Stack{logPath: filepath.Join(logDir, "devstack.log"), done: make(chan struct{})}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "-request", string(js))
	s.cmd.Stderr = logFile
	// Its own process group, killed with this process.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start the dev stack's process %s: %w", bin, err)
	}
	s.stdin = stdin
	log.Info("the dev stack runs in a child process", zap.Int("pid", s.cmd.Process.Pid), zap.String("log", s.logPath))
	readyc := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &s.ready)
		}
		readyc <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		s.waitErr = s.cmd.Wait()
		_ = logFile.Close()
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
		_ = s.Stop()
		return nil, fmt.Errorf("the dev stack did not start: %w%s", err, s.tail())
	}
	return s, nil
}

// tail is the end of the child's log, for an error.
func (s *Stack) tail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "\n" + s.logPath + " ends:\n" + strings.Join(lines, "\n")
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
	s.stopOnce.Do(func() {
		_ = s.stdin.Close()
		select {
		case <-s.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
			s.stopErr = fmt.Errorf("the dev stack's process did not stop within %s of its stdin closing and was killed%s", stopGrace, s.tail())
			return
		}
		if s.waitErr != nil {
			s.stopErr = fmt.Errorf("the dev stack's process: %w%s", s.waitErr, s.tail())
		}
	})
	return s.stopErr
}

// Prepare builds the child program now: a test's TestMain calls it
// before m.Run, so that a first, cold build of the Temporal server does
// not count against go test's -timeout.
func Prepare(ctx context.Context) error {
	_, err := binary(ctx)
	return err
}

var built struct {
	once sync.Once
	path string
	err  error
}

// binary builds devstackd without the race detector, once per process,
// into a directory of the module's own under the temporary directory; a
// file lock keeps the test binaries of one `go test` from building it at
// once, and the go command leaves it alone when it is up to date.
func binary(ctx context.Context) (string, error) {
	built.once.Do(func() { built.path, built.err = build(ctx) })
	return built.path, built.err
}

func build(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module to build the dev stack's process from: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("the dev stack's process is built from the smsorch module: run the tests from inside it")
	}
	root := filepath.Dir(mod)
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "smsorch-devstackd-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer func() { _ = lock.Close() }()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	bin := filepath.Join(dir, "devstackd")
	var msg bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./internal/devstack/devstackd")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &msg, &msg
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build the dev stack's process (go build ./internal/devstack/devstackd in %s): %w\n%s", root, err, msg.String())
	}
	return bin, nil
}
