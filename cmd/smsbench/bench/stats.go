package bench

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Latencies summarises durations: the percentiles the table prints.
type Latencies struct {
	P50 Seconds `json:"p50"`
	P95 Seconds `json:"p95"`
	P99 Seconds `json:"p99"`
	Max Seconds `json:"max"`
	// N is how many durations were measured.
	N int `json:"n"`
}

// Seconds is a duration printed and encoded in seconds.
type Seconds float64

func secondsOf(d time.Duration) Seconds { return Seconds(d.Seconds()) }

// summarise returns the percentiles of ds (nearest rank).
func summarise(ds []time.Duration) Latencies {
	if len(ds) == 0 {
		return Latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) Seconds {
		i := int(p*float64(len(s))+0.999999) - 1
		return secondsOf(s[min(max(i, 0), len(s)-1)])
	}
	return Latencies{P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: secondsOf(s[len(s)-1]), N: len(s)}
}

// Usage is what a process used: CPU (user and system) and memory.
type Usage struct {
	CPU time.Duration
	// PeakRSS is the resident set's high-water mark, RSS the resident
	// set now, both in bytes. AnonRSS is the part of RSS that is the
	// process's own memory (heap, stacks): the rest are pages of files,
	// the program's code and data mostly, shared with every process that
	// runs the same program.
	PeakRSS, RSS, AnonRSS int64
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// readUsage reads pid's usage from /proc ("self" for this process).
func readUsage(pid string) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return u, fmt.Errorf("read the CPU time of process %s: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it are fixed.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return u, fmt.Errorf("process %s: /proc stat has %d fields after the name", pid, len(fields))
	}
	// utime and stime are fields 14 and 15 of the whole line.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("process %s: unreadable CPU times %q %q", pid, fields[11], fields[12])
	}
	u.CPU = time.Duration(utime+stime) * time.Second / clockTicks
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return u, fmt.Errorf("read the memory of process %s: %w", pid, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmHWM" && name != "VmRSS" && name != "RssAnon") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("process %s: unreadable %s %q", pid, name, rest)
		}
		switch name {
		case "VmHWM":
			u.PeakRSS = kb << 10
		case "VmRSS":
			u.RSS = kb << 10
		default:
			u.AnonRSS = kb << 10
		}
	}
	return u, sc.Err()
}
