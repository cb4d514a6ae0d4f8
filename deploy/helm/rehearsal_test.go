package helm

// The rehearsal: Kubernetes does not run on this project's machines, so
// CI runs what the rendered chart says without it. Each pod of each
// Deployment starts as a process, from the binary its image's
// Dockerfile line builds, with the command line and environment of its
// container; each Secret volume is a directory holding only the items
// the pod mounts, where the container mounts it; each pod gets an
// address of its own on loopback and becomes ready when its readiness
// probe's command passes. Temporal stands where the official chart or
// Temporal Cloud would: this project's server with mutual TLS, the roles
// in certificates and API keys on. Then a signed event goes through the
// intake's HTTPS to the simulator, `kubectl exec … smsctl` reads the
// run, a worker with an API key from a Secret is served and one with a
// wrong key is refused with the server's reason, and every pod stops on
// SIGTERM within its grace period.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/apikeytest"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgtest"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/rehearse"
)

// The names the rehearsal's values give Temporal and the simulator, as
// Services of a cluster would be named.
const (
	temporalHost = "temporal-frontend.temporal.svc"
	simHost      = "sim.sms.svc"
)

// rehearsalValues are the values the rehearsal installs: the chart's
// defaults (certificates, HTTPS intake, the UI) with both providers at
// the simulator and Temporal where the rehearsal runs it.
func rehearsalValues() map[string]any {
	sim := "http://" + simHost + ":8299"
	return map[string]any{
		"temporal": map[string]any{"address": temporalHost + ":7233", "serverName": temporalHost},
		"providers": map[string]any{
			"bird":  map[string]any{"url": sim, "workspace": "dev-workspace", "channel": "dev-sms-channel"},
			"sendy": map[string]any{"url": sim},
		},
		// This project's server runs one partition a task queue.
		"worker": map[string]any{"taskQueuePartitions": 1},
		"intake": map[string]any{"replicas": 1, "namedSenders": true},
	}
}

// apiKeyValues are a second release beside it: a worker that proves who
// it is with an API key, as on Temporal Cloud.
func apiKeyValues() map[string]any {
	v := rehearsalValues()
	t := v["temporal"].(map[string]any)
	t["clientCertificates"] = map[string]any{"enabled": false}
	t["apiKeySecret"] = "temporal-api-key"
	v["worker"].(map[string]any)["replicas"] = 1
	v["intake"] = map[string]any{"enabled": false}
	v["ui"] = map[string]any{"enabled": false}
	return v
}

func TestTheChartRunsFromItsOwnManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("the rehearsal builds the image's binaries and starts every pod (about a minute)")
	}
	require.NoError(t, imageBinaries.Err, "building the image's binaries from the Dockerfile's lines")
	require.NotNil(t, imageBinaries.Bins, "TestMain builds the image's binaries before this test runs")
	bins, dir := imageBinaries.Bins, t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	certs, apiKeys := rendered(t, "sms", rehearsalValues()), rendered(t, "cloud", apiKeyValues())
	next := 1
	ip := func() string { next++; return fmt.Sprintf("127.0.2.%d", next) }
	tIP, simIP := ip(), ip()
	// The API keys' issuer serves its key set on this machine's loopback.
	hosts := map[string]string{temporalHost: tIP, simHost: simIP, "idp.test": "127.0.0.1"}

	// What the user puts in the cluster's Secrets: certificates made by
	// smsctl certs (or cert-manager), and the processes' secrets.
	pkiDir := filepath.Join(dir, "pki")
	_, err := pki.EnsureStack(pkiDir, []string{temporalHost}, 3650*24*time.Hour, 397*24*time.Hour, time.Now())
	require.NoError(t, err)
	file := func(parts ...string) []byte { return readFile(t, filepath.Join(append([]string{pkiDir}, parts...)...)) }
	tlsSecret := func(d string) map[string][]byte {
		return map[string][]byte{"tls.crt": file(d, pki.CertFile), "tls.key": file(d, pki.KeyFile)}
	}
	intakeIP := ip()
	https, err := pki.Generate(filepath.Join(dir, "https"), []string{"sms-smsorch-intake.sms.svc"}, []net.IP{net.ParseIP(intakeIP)}, "unused")
	require.NoError(t, err)
	shopSecret := hexOf(t, 32)
	key, err := codec.NewKey("k8s")
	require.NoError(t, err)
	idp := apikeytest.New(t, "2026-12")
	secrets := map[string]map[string][]byte{
		"smsorch-temporal-ca": {"ca.crt": file(pki.CADir, pki.CAFile)},
		"smsorch-worker-tls":  tlsSecret("worker"),
		"smsorch-intake-tls":  tlsSecret("intake"),
		"smsorch-ui-tls":      tlsSecret("ui"),
		"smsorch-intake-https": {
			"tls.crt": readFile(t, https.ServerCert), "tls.key": readFile(t, https.ServerKey),
		},
		"smsorch": {
			"ledger": []byte(pgtest.Database(t)), "codec-keys": []byte(key),
			"bird-access-key": []byte(hexOf(t, 16)), "sendy-token": []byte(hexOf(t, 16)),
			"intake-secret": []byte(hexOf(t, 32)), "codec-token": []byte(hexOf(t, 32)),
			"intake-senders": []byte("shop:order+refund:" + shopSecret + "\n"),
		},
		"temporal-api-key": {"api-key": []byte(idp.Sign(t, idp.Key, jwt.MapClaims{
			"sub": "cloud-worker", "iss": "https://idp.example", "aud": "temporal", "exp": time.Now().Add(time.Hour).Unix(),
			"smsorch_roles": []string{pki.RoleWorker}}))},
	}

	var running []*rehearse.Process
	defer func() {
		for i := len(running) - 1; i >= 0; i-- {
			running[i].Kill()
		}
	}()
	// Temporal and the providers, where the cluster would have them.
	sim := rehearse.Start(t, bins, dir, rehearse.Container{
		Name: "simulator", Command: []string{"smssim", "--addr=0.0.0.0:8299", "--log-format=json"},
		Env:    map[string]string{"BIRD_ACCESS_KEY": string(secrets["smsorch"]["bird-access-key"]), "SENDY_TOKEN": string(secrets["smsorch"]["sendy-token"])},
		Health: []string{"worker", "healthcheck", "http://127.0.0.1:8299/_sim/clock"},
	}, simIP, hosts)
	running = append(running, sim)
	temporal := rehearse.Start(t, bins, dir, rehearse.Container{
		Name: "temporal",
		Command: []string{"smsorch-temporal", "--server-only", "--frontend=0.0.0.0:7233", "--data-dir=" + filepath.Join(dir, "temporal-data"),
			"--temporal-tls-cert=" + filepath.Join(pkiDir, "temporal", pki.CertFile), "--temporal-tls-key=" + filepath.Join(pkiDir, "temporal", pki.KeyFile),
			"--temporal-tls-ca=" + filepath.Join(pkiDir, "temporal", pki.CAFile),
			"--temporal-api-keys-jwks=" + strings.Replace(idp.URL, "127.0.0.1", "idp.test", 1), "--temporal-api-keys-issuer=https://idp.example", "--temporal-api-keys-audience=temporal",
			"--ui=off", "--health=127.0.0.1:8090", "--log-format=json"},
		Health: []string{"worker", "healthcheck", "http://127.0.0.1:8090/readyz"},
	}, tIP, hosts)
	running = append(running, temporal)
	sim.WaitHealthy(t, ctx)
	temporal.WaitHealthy(t, ctx)

	// The pods, each Deployment's replicas together, ready by their probes.
	pods := map[string][]pod{}
	for _, d := range []*appsv1.Deployment{certs.Deployments["sms-smsorch-worker"], certs.Deployments["sms-smsorch-intake"], certs.Deployments["sms-smsorch-ui"], apiKeys.Deployments["cloud-smsorch-worker"]} {
		require.NotNil(t, d, "the chart renders the Deployments the rehearsal runs")
		replicas := 1
		if d.Spec.Replicas != nil {
			replicas = int(*d.Spec.Replicas)
		}
		for i := range replicas {
			addr := ip()
			if d.Name == "sms-smsorch-intake" {
				addr = intakeIP
			}
			p := startPod(t, bins, dir, d, fmt.Sprintf("%s-%d", d.Name, i), addr, hosts, secrets)
			running = append(running, p.process)
			pods[d.Name] = append(pods[d.Name], p)
		}
		for _, p := range pods[d.Name] {
			p.process.WaitHealthy(t, ctx)
		}
	}
	t.Logf("every pod is ready: %d workers with certificates, an intake, the UI, a worker with an API key", len(pods["sms-smsorch-worker"]))

	// An event from the shop, a named sender, to the intake's Service,
	// over HTTPS; the shop may not send a one-time code.
	svc := certs.Services["sms-smsorch-intake"]
	require.NotNil(t, svc)
	intakeURL := fmt.Sprintf("https://%s:%d/v1/events", intakeIP, svc.Spec.Ports[0].Port)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(readFile(t, https.CA)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}, Timeout: 30 * time.Second}
	postAs := func(body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, intakeURL, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range intake.SignAs("shop", logging.Secret(shopSecret), time.Now(), []byte(body)) {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(got)
	}
	code, got := postAs(`{"key":"order-58213-shipped","provider":"bird","to":"+31612345678","text":"Order 58213 has shipped."}`)
	require.Equal(t, http.StatusAccepted, code, "the shop's signed event: %s", got)
	code, got = postAs(`{"key":"otp-8412-7","provider":"bird","to":"+31612345678","text":"Your code is 123456."}`)
	require.Equal(t, http.StatusForbidden, code, "the shop sends no one-time codes: %s", got)
	require.Contains(t, got, "forbidden_kind")

	// kubectl exec deploy/sms-smsorch-worker -- smsctl wait KEY
	worker := pods["sms-smsorch-worker"][0]
	out := rehearse.Exec(t, ctx, bins, dir, worker.container, worker.ip, hosts, "smsctl", "wait", "order-58213-shipped")
	require.Contains(t, out, "Delivered", "the event was delivered: %s", out)
	require.Equal(t, 1, simMessages(t, ctx, simIP, "order-58213-shipped"), "the simulator made one message for the event")

	// The worker with an API key reads the run with its key, from its
	// Secret's file; with a wrong key it is refused, and says why.
	cloudWorker := pods["cloud-smsorch-worker"][0]
	out = rehearse.Exec(t, ctx, bins, dir, cloudWorker.container, cloudWorker.ip, hosts, "smsctl", "status", "order-58213-shipped")
	require.Contains(t, out, "Delivered", "smsctl with the API key reads the run: %s", out)
	wrong := cloudWorker.container
	wrong.Name += "-wrong-key"
	keyDir := rehearse.VolumeDir(dir, wrong.Name+"-temporal-api-key")
	require.NoError(t, os.MkdirAll(keyDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(keyDir, "api-key"), []byte(idp.Sign(t, idp.Stranger, jwt.MapClaims{
		"sub": "cloud-worker", "iss": "https://idp.example", "aud": "temporal", "exp": time.Now().Add(time.Hour).Unix(),
		"smsorch_roles": []string{pki.RoleWorker}})), 0o600))
	for i, m := range wrong.Mounts {
		if m.Path == "/etc/smsorch/temporal-api-key" {
			wrong.Mounts[i].Volume = wrong.Name + "-temporal-api-key"
		}
	}
	refused, err := rehearse.Run(t, ctx, bins, dir, wrong, cloudWorker.ip, hosts, "smsctl", "status", "order-58213-shipped")
	require.Error(t, err, "smsctl with a key the server's key set does not hold: %s", refused)
	require.Contains(t, refused, "the API key is not one this Temporal takes", "a wrong key is refused with the server's reason: %s", refused)
	t.Logf("a wrong API key: %s", strings.TrimSpace(refused))

	// No pod was refused a call it makes.
	for _, ps := range pods {
		for _, p := range ps {
			log := readFile(t, p.process.LogPath)
			for _, refusal := range []string{"Request unauthorized", " takes smsorch-", "names no role", "needs a client certificate", "not one this Temporal takes"} {
				require.NotContains(t, string(log), refusal, "%s was refused a call: its identity's roles are short of what it does", p.process.Name)
			}
		}
	}

	// The pods end as Kubernetes ends them: SIGTERM, then the grace period.
	for i := len(running) - 1; i >= 0; i-- {
		p := running[i]
		require.NoError(t, p.Stop(), "%s stops cleanly on SIGTERM (log: %s)", p.Name, p.LogPath)
	}
	running = nil
}

// rendered renders values as release, which must render.
func rendered(t *testing.T, release string, values map[string]any) manifests {
	t.Helper()
	m, err := render(t, release, values)
	require.NoError(t, err, "the %s values render", release)
	return m
}

// pod is one running replica of a Deployment.
type pod struct {
	container rehearse.Container
	ip        string
	process   *rehearse.Process
}

// startPod starts a replica of d as the kubelet would: each Secret
// volume holds only the items the pod names (a missing key fails the
// pod, as the kubelet fails it), each emptyDir is empty.
func startPod(t *testing.T, bins map[string]string, dir string, d *appsv1.Deployment, name, ip string, hosts map[string]string, secrets map[string]map[string][]byte) pod {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	ctr := rehearse.Container{Name: name, Command: c.Command, Env: map[string]string{}, Health: c.ReadinessProbe.Exec.Command}
	require.Empty(t, c.Args, "%s: the whole command line is in command", d.Name)
	for _, e := range c.Env {
		ctr.Env[e.Name] = e.Value
	}
	if spec.TerminationGracePeriodSeconds != nil {
		ctr.Grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	for _, vm := range c.VolumeMounts {
		vol := name + "-" + vm.Name
		ctr.Mounts = append(ctr.Mounts, rehearse.Mount{Volume: vol, Path: vm.MountPath})
		hostDir := rehearse.VolumeDir(dir, vol)
		require.NoError(t, os.MkdirAll(hostDir, 0o700))
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			data, ok := secrets[v.Secret.SecretName]
			require.True(t, ok, "%s mounts the Secret %s, which the user was told to make", d.Name, v.Secret.SecretName)
			for _, it := range v.Secret.Items {
				b, ok := data[it.Key]
				require.True(t, ok, "%s mounts the key %s of the Secret %s, which the user was told to make with other keys", d.Name, it.Key, v.Secret.SecretName)
				require.NoError(t, os.WriteFile(filepath.Join(hostDir, it.Path), b, 0o400))
			}
		}
	}
	return pod{container: ctr, ip: ip, process: rehearse.Start(t, bins, dir, ctr, ip, hosts)}
}

// simMessages counts the messages the simulator made for key.
func simMessages(t *testing.T, ctx context.Context, simIP, key string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+simIP+":8299/_sim/messages?key="+key, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return len(out.Messages)
}

func hexOf(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}
