//go:build !linux

package stackproc

import "syscall"

// ChildAttr puts a child in its own process group (Stop kills the
// group); where there is no parent-death signal, the child stops when
// its stdin closes, which this process's death does.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
