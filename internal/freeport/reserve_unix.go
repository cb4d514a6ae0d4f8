//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// portHold is how long a port handed out stays reserved for this
// process: its server listens within seconds of the pick; a server that
// has not by then failed its start.
const portHold = 5 * time.Minute

// reservePort reserves port p for this process against the others of
// this host that use Low, for portHold: an exclusive flock on a
// file named after the port, which the kernel releases if the process
// dies. It reports false when another process holds p.
func reservePort(p int) bool {
	dir := filepath.Join(os.TempDir(), "smsorch-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true // no reservation possible: the port is free, as before
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return false
	}
	time.AfterFunc(portHold, func() { _ = f.Close() })
	return true
}
