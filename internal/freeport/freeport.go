// Package freeport hands out loopback ports for servers a process or its
// children are about to start: below the kernel's range for outgoing
// connections, and reserved across the processes of a host.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Resolve splits host:port and replaces port 0 with a free port
// below 32768 (Low): no outgoing connection takes it between the
// pick and the server's listen.
func Resolve(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", portStr)
	}
	if port == 0 {
		port, err = Low(host)
	}
	return host, port, err
}

var (
	lowPortsMu sync.Mutex
	lowPorts   = map[int]bool{} // handed out by this process
)

// Low returns a port below 32768, free on host right now,
// never returned before by this process, and not handed out by another
// process of this host in the last minutes (reservePort: go test runs
// test binaries side by side, each starting servers, and a port free at
// one's pick could be taken by the other's before its server listens). Below 32768 no outgoing
// connection takes it (the kernel hands those ports out from 32768 up)
// while the process that is to listen there starts.
func Low(host string) (int, error) {
	lowPortsMu.Lock()
	defer lowPortsMu.Unlock()
	for i := 0; i < 500; i++ {
		p := 20000 + rand.IntN(32768-20000)
		if !lowPorts[p] && Check(net.JoinHostPort(host, strconv.Itoa(p))) == nil && reservePort(p) {
			lowPorts[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("find a free port below 32768 on %s: 500 tries failed", host)
}

// Check says whether addr can be listened on right now.
func Check(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}
