//go:build !unix

package devstack

// reservePort reserves nothing where flock is not available: the port
// is free, as FreeLowPort checked.
func reservePort(int) bool { return true }
