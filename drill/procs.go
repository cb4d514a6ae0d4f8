package drill

import (
	"context"
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

	"github.com/acme/smsorch/devstack"
)

// Binaries are the programs the drill runs as separate processes.
type Binaries struct {
	Worker, Simulator string
}

// Build compiles the worker and the simulator from the module at root
// into dir, so the drill exercises the very programs a user runs.
func Build(ctx context.Context, root, dir string, log io.Writer) (Binaries, error) {
	b := Binaries{Worker: filepath.Join(dir, "worker"), Simulator: filepath.Join(dir, "smssim")}
	for _, p := range []struct{ out, pkg string }{{b.Worker, "./worker"}, {b.Simulator, "./cmd/smssim"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", p.out, p.pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, log, log
		if err := cmd.Run(); err != nil {
			return b, fmt.Errorf("build %s in %s: %w (run the drill from the repository, or give -worker-bin and -sim-bin)", p.pkg, root, err)
		}
	}
	return b, nil
}

// ModuleRoot finds the directory of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the smsorch module: run the drill from the repository (go run ./cmd/smsdrill)")
	}
	return filepath.Dir(mod), nil
}

// proc is one child process with its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func startProc(name, bin string, args, env []string, logPath string) (*proc, error) {
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
	p := &proc{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		_ = f.Close()
	}()
	return p, nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to grace before killing.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// freeAddr returns a loopback address with a port free right now, below
// the kernel's range for outgoing connections, which could take it
// before the process that is to listen there binds it.
func freeAddr() (string, error) {
	p, err := devstack.FreeLowPort("127.0.0.1")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// waitReady calls probe until it succeeds, or the process exits, or
// timeout; what names what was awaited in the error.
func waitReady(ctx context.Context, p *proc, what string, timeout time.Duration, probe func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("%s exited before it was ready: %v", p.name, err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %s within %s: %v", p.name, what, timeout, last)
}

// waitHTTP waits until url answers 200, or the process exits, or timeout.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	return waitReady(ctx, p, url, timeout, func(ctx context.Context) error {
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

// take empties the slots of ps under mu and returns what they held.
func take(mu *sync.Mutex, ps []*proc) []*proc {
	mu.Lock()
	defer mu.Unlock()
	out := append([]*proc(nil), ps...)
	clear(ps)
	return out
}

// stopEach stops each process (SIGTERM, then SIGKILL after 30 s).
func stopEach(ps []*proc) {
	for _, p := range ps {
		if p != nil {
			p.stop(30 * time.Second)
		}
	}
}
