// Package procs runs the project's programs as child processes, for the
// fault drill and the benchmark: built from the module, each in its own
// process group with its output in a log file, killed or stopped on
// demand, and waited for until it answers.
package procs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/freeport"
	"github.com/acme/smsorch/internal/logging"
)

// Binaries are the programs run as separate processes: the production
// worker (built with -tags nodevstack, as the image's worker is), the
// same program with the embedded Temporal server and web UI (for
// --server-only and --dev), and the simulator.
type Binaries struct {
	Worker, Server, Simulator string
}

// Build compiles the three programs from the module at root into dir, so
// a drill or a benchmark exercises the very programs a user runs.
func Build(ctx context.Context, root, dir string, log io.Writer) (Binaries, error) {
	b := Binaries{Worker: filepath.Join(dir, "worker"), Server: filepath.Join(dir, "smsorch-temporal"), Simulator: filepath.Join(dir, "smssim")}
	for _, p := range []struct {
		out  string
		args []string
	}{
		{b.Worker, []string{"-tags", "nodevstack", "./worker"}},
		{b.Server, []string{"./worker"}},
		{b.Simulator, []string{"./cmd/smssim"}},
	} {
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", p.out}, p.args...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, log, log
		if err := cmd.Run(); err != nil {
			return b, fmt.Errorf("build %s in %s: %w (run it from the repository, or give -worker-bin, -server-bin and -sim-bin)", p.args[len(p.args)-1], root, err)
		}
	}
	return b, nil
}

// Ensure returns bins when the programs are given (a worker built with
// the embedded server serves as the server too), or builds them from the
// module around the working directory into dir.
func Ensure(ctx context.Context, bins Binaries, dir string, log io.Writer) (Binaries, error) {
	if bins.Server == "" {
		bins.Server = bins.Worker
	}
	if bins.Worker != "" && bins.Simulator != "" {
		return bins, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return bins, err
	}
	fmt.Fprintf(log, "building the worker, the server and the simulator into %s\n", dir)
	return Build(ctx, root, dir, log)
}

// ModuleRoot finds the directory of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the smsorch module: run it from the repository (go run ./cmd/smsdrill, go run ./cmd/smsbench)")
	}
	return filepath.Dir(mod), nil
}

// Proc is one child process with its output in a log file.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	done chan error
}

// Start starts bin with args and env (added to this process's) as name,
// its output appended to logPath.
func Start(name, bin string, args, env []string, logPath string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// Its own process group: a kill of the drill does not leave it behind
	// unnoticed, and our SIGKILL reaches only it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		_ = f.Close()
	}()
	return p, nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err // kept for Wait
}

// Wait waits until the process exits and returns how it ended; when ctx
// ends first, it kills the process.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-ctx.Done():
		p.Kill()
		return ctx.Err()
	}
}

// Stop sends SIGTERM and waits up to grace before killing.
func (p *Proc) Stop(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // kept for Wait
	case <-time.After(grace):
		p.Kill()
	}
}

// FreeAddr returns a loopback address with a port free right now, below
// the kernel's range for outgoing connections, which could take it
// before the process that is to listen there binds it.
func FreeAddr() (string, error) {
	p, err := freeport.Low("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// WaitReady calls probe until it succeeds, or the process exits, or
// timeout; what names what was awaited in the error.
func WaitReady(ctx context.Context, p *Proc, what string, timeout time.Duration, probe func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("%s exited before it was ready: %v", p.Name, err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %s within %s: %v", p.Name, what, timeout, last)
}

// WaitHTTP waits until url answers 200, or the process exits, or timeout.
func WaitHTTP(ctx context.Context, p *Proc, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	return WaitReady(ctx, p, url, timeout, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// Take empties the slots of ps under mu and returns what they held.
func Take(mu *sync.Mutex, ps []*Proc) []*Proc {
	mu.Lock()
	defer mu.Unlock()
	out := append([]*Proc(nil), ps...)
	clear(ps)
	return out
}

// StopEach stops each process (SIGTERM, then SIGKILL after 30 s).
func StopEach(ps []*Proc) {
	for _, p := range ps {
		if p != nil {
			p.Stop(30 * time.Second)
		}
	}
}

// WaitTemporal waits until the frontend at addr answers in the default
// namespace, or the process exits, or timeout. conf is the client's TLS,
// nil for plain gRPC.
func WaitTemporal(ctx context.Context, p *Proc, addr string, conf *tls.Config, timeout time.Duration) error {
	return WaitReady(ctx, p, "on "+addr, timeout, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		c, err := client.DialContext(cctx, client.Options{HostPort: addr, Logger: logging.SDK(zap.NewNop()), ConnectionOptions: client.ConnectionOptions{TLS: conf}})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WorkflowService().CountWorkflowExecutions(cctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: client.DefaultNamespace})
		return err
	})
}
