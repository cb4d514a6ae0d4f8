//go:build !race

package devstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
)

// With mutual TLS the server answers only clients that present a
// certificate of its CA: the stack's own (the namespace setup, the web
// UI's server, the system worker) and a worker's; a client without one,
// or with one from another CA, or speaking plain gRPC, is refused.
func TestStackWithMutualTLSAnswersOnlyClientsOfItsCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "worker", pki.RoleWorker)
	require.NoError(t, err)
	stranger, err := pki.Generate(filepath.Join(dir, "other"), []string{"temporal.internal"}, nil, "mallory")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{
		FrontendAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0", DataDir: filepath.Join(dir, "state"),
		SearchAttributes: testAttributes, Logger: zap.NewNop(),
		TLS: &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.CA},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	require.Equal(t, "temporal.internal", s.ClientTLS().ServerName, "the name clients check is the certificate's first DNS name")

	pool := x509.NewCertPool()
	ca, err := os.ReadFile(files.CA)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(ca))
	call := func(t *testing.T, conf *tls.Config) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := client.DialContext(cctx, client.Options{
			HostPort: s.FrontendAddress(), Logger: logging.SDK(zap.NewNop()),
			ConnectionOptions: client.ConnectionOptions{TLS: conf},
		})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WorkflowService().DescribeNamespace(cctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err
	}
	load := func(cert, key string) []tls.Certificate {
		pair, err := tls.LoadX509KeyPair(cert, key)
		require.NoError(t, err)
		return []tls.Certificate{pair}
	}

	require.NoError(t, call(t, &tls.Config{Certificates: load(files.ClientCert, files.ClientKey), RootCAs: pool, ServerName: "temporal.internal"}), "a worker's certificate")
	require.NoError(t, call(t, s.ClientTLS()), "the stack's own")
	require.Error(t, call(t, nil), "plain gRPC")
	require.Error(t, call(t, &tls.Config{RootCAs: pool, ServerName: "temporal.internal"}), "TLS without a client certificate")
	require.Error(t, call(t, &tls.Config{Certificates: load(stranger.ClientCert, stranger.ClientKey), RootCAs: pool, ServerName: "temporal.internal"}), "a certificate of another CA")

	// The web UI's server reaches the frontend with the stack's
	// certificate (its connection, made before the server listened, may
	// still be waiting to redial).
	uiNamespace(t, s.UIURL())

	// A UI alone, for a Temporal elsewhere, with a worker's certificate.
	ui, err := StartUI(ctx, UIConfig{Address: "127.0.0.1:0", Frontend: s.FrontendAddress(), Logger: zap.NewNop(),
		TLS: &TLS{CertFile: files.ClientCert, KeyFile: files.ClientKey, CAFile: files.CA, ServerName: "temporal.internal"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ui.Stop() })
	uiNamespace(t, ui.UIURL())
}

// uiNamespace asks the web UI at url for the default namespace, as its
// pages do, until it answers (within a minute).
func uiNamespace(t *testing.T, url string) {
	t.Helper()
	var last string
	ok := assert.Eventually(t, func() bool {
		resp, err := http.Get(url + "/api/v1/namespaces/default")
		if err != nil {
			last = err.Error()
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var ns struct {
			NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK && json.Unmarshal(body, &ns) == nil && ns.NamespaceInfo.Name == "default"
	}, time.Minute, 200*time.Millisecond)
	require.True(t, ok, "the web UI at %s did not show the namespace: %s", url, last)
}

// Broken TLS files are refused before anything listens, saying which.
func TestStartRefusesBrokenTLSFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"temporal.internal"}, nil, "worker")
	require.NoError(t, err)
	other, err := pki.Generate(filepath.Join(dir, "other"), []string{"temporal.internal"}, nil, "worker")
	require.NoError(t, err)
	for _, tc := range []struct {
		tls  TLS
		want string
	}{
		{TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey}, "give all three files"},
		{TLS{CertFile: files.ServerCert, KeyFile: other.ServerKey, CAFile: files.CA}, "do not load"},
		{TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: other.CA}, "does not verify against the CA"},
		{TLS{CertFile: files.ClientCert, KeyFile: files.ClientKey, CAFile: files.CA}, "both extended key usages"},
		{TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey, CAFile: files.ServerKey}, "holds no PEM certificate"},
	} {
		_, err := Start(context.Background(), Config{FrontendAddress: "127.0.0.1:0", UIAddress: UIOff, DataDir: filepath.Join(dir, "state"), TLS: &tc.tls})
		require.ErrorContains(t, err, tc.want)
	}
}
