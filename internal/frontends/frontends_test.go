package frontends_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/acme/smsorch/internal/frontends"
)

func TestParse(t *testing.T) {
	got, err := frontends.Parse(" 10.0.0.1:7233 ,10.0.0.2:7233")
	if err != nil || strings.Join(got, "|") != "10.0.0.1:7233|10.0.0.2:7233" {
		t.Fatalf("Parse = %q, %v", got, err)
	}
	for _, bad := range []string{"10.0.0.1:7233,", "10.0.0.1,10.0.0.2:7233", ","} {
		if _, err := frontends.Parse(bad); err == nil || !strings.Contains(err.Error(), "host:port") {
			t.Errorf("Parse(%q) error = %v, want one that says host:port", bad, err)
		}
	}
}

func TestApplyKeepsTLSVerifiable(t *testing.T) {
	opts := client.Options{HostPort: "t1.internal:7233,t2.internal:7233", ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{}}}
	require.NoError(t, frontends.Apply(&opts))
	require.Equal(t, "t1.internal", opts.ConnectionOptions.TLS.ServerName)
	opts = client.Options{HostPort: "a:7233,b:7233", ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{ServerName: "temporal.internal"}}}
	require.NoError(t, frontends.Apply(&opts))
	require.Equal(t, "temporal.internal", opts.ConnectionOptions.TLS.ServerName, "a server name given is kept")
}

func TestApplyLeavesOneAddressAlone(t *testing.T) {
	opts := client.Options{HostPort: "temporal:7233"}
	if err := frontends.Apply(&opts); err != nil || opts.HostPort != "temporal:7233" || len(opts.ConnectionOptions.DialOptions) != 0 {
		t.Fatalf("Apply changed a single address: %+v, %v", opts, err)
	}
}

// A client given a dead frontend and a live one connects and keeps
// answering: calls go to the one that answers.
func TestDialsTheFrontendThatAnswers(t *testing.T) {
	live := healthServer(t)
	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		return l.Addr().String()
	}()
	opts := client.Options{HostPort: dead + "," + live}
	if err := frontends.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", opts.HostPort, err)
	}
	defer c.Close()
	for i := 0; i < 5; i++ {
		if _, err := c.WorkflowService().GetSystemInfo(ctx, &workflowservice.GetSystemInfoRequest{}); err != nil {
			t.Fatalf("call %d through the list: %v", i, err)
		}
	}
}

// frontend answers what the SDK asks when it connects.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{ServerVersion: "test"}, nil
}

// healthServer stands in for a Temporal frontend: the health service and
// GetSystemInfo.
func healthServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h := health.NewServer()
	h.SetServingStatus("temporal.api.workflowservice.v1.WorkflowService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, h)
	workflowservice.RegisterWorkflowServiceServer(s, frontend{})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}
