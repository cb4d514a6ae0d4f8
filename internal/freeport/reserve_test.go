//go:build unix

package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A port another process holds (here: another open file description of
// its lock file, which flock treats alike) is not handed out; one nobody
// holds is, once.
func TestAPortAnotherProcessReservedIsNotHandedOut(t *testing.T) {
	const p = 31999
	dir := filepath.Join(os.TempDir(), "smsorch-ports")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB))
	require.False(t, reservePort(p), "another process holds the port")
	require.NoError(t, f.Close())
	require.True(t, reservePort(p), "released, the port can be reserved")
	require.False(t, reservePort(p), "and this process holds it now")
}
