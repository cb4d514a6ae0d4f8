package stackproc

import "syscall"

// ChildAttr puts a child in its own process group (Stop kills the
// group), killed when this process dies.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
