package stackproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/stackspec"
)

// A stack in a child process answers in its namespace with the
// project's search attributes, and after Stop (twice: safe) its
// frontend is gone.
func TestAStackInAChildProcessAnswersAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	s, err := Start(ctx, stackspec.Request{FrontendAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0", DataDir: dir}, zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, "default", s.Namespace())
	require.Equal(t, filepath.Join(dir, "temporal.db"), s.State())
	require.Nil(t, s.ClientTLS(), "plain gRPC")
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, s.UIURL())

	c, err := client.DialContext(ctx, client.Options{HostPort: s.FrontendAddress()})
	require.NoError(t, err)
	attrs, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	require.NoError(t, err)
	for name := range contract.SearchAttributes() {
		require.Contains(t, attrs.CustomAttributes, name)
	}
	c.Close()

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "a second Stop is harmless")
	_, err = net.DialTimeout("tcp", s.FrontendAddress(), time.Second)
	require.Error(t, err, "the frontend stopped with its process")
}

// A child that cannot start says why, with the end of its log, and
// leaves nothing running.
func TestAChildThatCannotStartSaysWhy(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = busy.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	core, logs := observer.New(zapcore.WarnLevel)
	_, err = Start(ctx, stackspec.Request{FrontendAddress: busy.Addr().String(), UIAddress: "off", DataDir: t.TempDir()}, zap.New(core))
	require.Error(t, err)
	require.Contains(t, err.Error(), "the dev stack did not start")
	require.Contains(t, err.Error(), "the Temporal frontend cannot listen on "+busy.Addr().String())
	require.Contains(t, err.Error(), "devstack.log ends:")
	require.Equal(t, 1, logs.FilterMessageSnippet("cannot listen on "+busy.Addr().String()).Len(),
		"the child's lines reach the parent's log, as the server's reach the worker's: %v", logs.All())
}

// Without a data directory the child's log is in a temporary one: the
// error still quotes its end, and the directory is gone after.
func TestAChildWithoutADataDirectoryKeepsItsLogForTheError(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = busy.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = Start(ctx, stackspec.Request{FrontendAddress: busy.Addr().String(), UIAddress: "off"}, zap.NewNop())
	require.Error(t, err)
	require.Contains(t, err.Error(), "the Temporal frontend cannot listen on "+busy.Addr().String())
	m := regexp.MustCompile(`\n(\S+devstack\.log) ends:`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, err.Error())
	_, statErr := os.Stat(filepath.Dir(m[1]))
	require.True(t, os.IsNotExist(statErr), "the temporary directory is removed: %v", statErr)
}

// A child's builds drop -race from GOFLAGS: the child program has no
// files under it, and the devstack tests would build themselves again.
func TestWithoutRaceKeepsTheOtherFlags(t *testing.T) {
	got := WithoutRace([]string{"HOME=/root", "GOFLAGS=-race -mod=mod -race=true", "GOFLAGSX=-race"})
	require.Equal(t, []string{"HOME=/root", "GOFLAGS=-mod=mod", "GOFLAGSX=-race"}, got)
}

// TestMain builds the child program before m.Run, so that a cold build
// does not count against -timeout.
func TestMain(m *testing.M) {
	if err := Prepare(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
