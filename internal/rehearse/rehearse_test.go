package rehearse

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// What a container sees, mapped to what a process here sees.
func TestRewriteMapsWhatAContainerSees(t *testing.T) {
	hosts := map[string]string{"postgres": "127.0.0.1", "temporal": "127.0.1.1", "temporal-frontend.temporal.svc": "127.0.1.2"}
	for in, want := range map[string]string{
		"--frontend=0.0.0.0:7233":     "--frontend=127.0.1.9:7233",
		"--health=127.0.0.1:8090":     "--health=127.0.1.9:8090",
		"temporal:7233":               "127.0.1.1:7233",
		"temporal:7233,temporal:7233": "127.0.1.1:7233,127.0.1.1:7233",
		"postgres://postgres:5432secret@postgres:5432/db?sslmode=no": "postgres://postgres:5432secret@127.0.0.1:5432/db?sslmode=no",
		"http://simulator:8299":                     "http://simulator:8299", // not a host of this map
		"--ui-codec-endpoint=http://127.0.0.1:8234": "--ui-codec-endpoint=http://127.0.1.9:8234",
		"temporal-frontend.temporal.svc:7233":       "127.0.1.2:7233",
		"xtemporal-frontend.temporal.svc:7233":      "xtemporal-frontend.temporal.svc:7233",
	} {
		require.Equal(t, want, Rewrite(in, "127.0.1.9", hosts), in)
	}
	require.Equal(t, []string{"-trimpath", "-ldflags=-s -w", "-tags", "nodevstack"}, ShellWords(`-trimpath -ldflags="-s -w" -tags nodevstack`))
}

func TestMountsPutEachVolumeUnderTheContainersRoot(t *testing.T) {
	dir := t.TempDir()
	m := Link(t, dir, "worker-1", []Mount{{Volume: "tls-worker", Path: "/tls"}, {Volume: "keys", Path: "/var/run/secrets/smsorch"}, {Volume: "tmp", Path: "/tmp"}})
	require.Equal(t, "--temporal-tls-ca="+dir+"/worker-1-root/tls/ca.pem", m.Path("--temporal-tls-ca=/tls/ca.pem"))
	require.Equal(t, dir+"/worker-1-root/var/run/secrets/smsorch/keys", m.Path("/var/run/secrets/smsorch/keys"))
	require.Equal(t, dir+"/worker-1-root/tmp/x", m.Path("/tmp/x"), "a path is rewritten once, though the root lies under a mount's path")
	require.Equal(t, "/tlsx/ca.pem", m.Path("/tlsx/ca.pem"), "a path that only starts like a mount is not one")
}
