package helm

import (
	"bufio"
	"bytes"
	"flag"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/acme/smsorch/app"
)

// selfHosted is a user of the official Temporal chart: certificates per
// component (cert-manager's Secrets), both providers.
func selfHosted() map[string]any {
	return map[string]any{
		"temporal": map[string]any{"address": "temporal-frontend.temporal.svc:7233", "serverName": "temporal-frontend.temporal.svc"},
		"providers": map[string]any{
			"bird":  map[string]any{"url": "https://api.bird.com", "workspace": "ws-1", "channel": "ch-1"},
			"sendy": map[string]any{"url": "https://api.sendy.example"},
		},
	}
}

// cloud is a user of Temporal Cloud with an API key: no certificates, no
// UI of ours, the intake behind an ingress controller, KEDA and the
// Prometheus Operator.
func cloud() map[string]any {
	return map[string]any{
		"temporal": map[string]any{
			"address": "eu-west-1.aws.api.temporal.io:7233", "namespace": "sms.a1b2c",
			"serverCASecret": "", "clientCertificates": map[string]any{"enabled": false}, "apiKeySecret": "temporal-api-key",
		},
		"providers": map[string]any{"sendy": map[string]any{"url": "https://api.sendy.example", "sender": "Acme #1: SMS"}},
		"intake":    map[string]any{"tlsSecret": "", "behindProxy": "10.42.0.0/16", "previousSecret": true, "namedSenders": true, "clientRate": "off"},
		"ui":        map[string]any{"enabled": false},
		"worker":    map[string]any{"keda": map[string]any{"enabled": true}, "extraArgs": []any{"--sendy-rate-limit=120"}},
		"metrics":   map[string]any{"enabled": true, "serviceMonitor": true, "prometheusRule": true},
	}
}

func TestTheChartRendersIntoValidObjectsForEachSetOfValues(t *testing.T) {
	for name, values := range map[string]map[string]any{"self-hosted": selfHosted(), "cloud": cloud(), "rehearsal": rehearsalValues()} {
		t.Run(name, func(t *testing.T) {
			m, err := render(t, "sms", values)
			require.NoError(t, err)
			require.NotEmpty(t, m.Deployments)
			for dname, d := range m.Deployments {
				checkPod(t, dname, d.Spec.Template.Spec, values)
				require.Equal(t, d.Spec.Selector.MatchLabels, pick(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels), "%s's selector matches its pods", dname)
				component := d.Spec.Selector.MatchLabels["app.kubernetes.io/component"]
				if component == "ui" {
					continue
				}
				pdb, ok := m.PDBs[dname]
				require.True(t, ok, "%s has a PodDisruptionBudget", dname)
				require.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "%s's budget covers its pods", dname)
				require.Nil(t, pdb.Spec.MinAvailable, "%s: a minimum could equal the replicas and block every drain", dname)
				require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue(), "%s: one pod at a time", dname)
				require.Equal(t, "AlwaysAllow", string(*pdb.Spec.UnhealthyPodEvictionPolicy), "%s: an outage that makes every pod unready does not block a drain", dname)
			}
			if _, ok := m.Deployments["sms-smsorch-intake"]; ok {
				svc, ok := m.Services["sms-smsorch-intake"]
				require.True(t, ok, "the intake has a Service")
				require.Equal(t, "intake", svc.Spec.Ports[0].TargetPort.String(), "the intake's Service reaches the intake's port")
				require.Equal(t, "intake", svc.Spec.Selector["app.kubernetes.io/component"])
			}
			for _, np := range m.NetworkPolicies {
				for _, in := range np.Spec.Ingress {
					for _, p := range in.Ports {
						require.Contains(t, []int{8080, 9090}, p.Port.IntValue(), "only the intake's and the metrics port are open: the health ports, the UI and the codec server are on loopback")
					}
				}
			}
			require.Contains(t, m.Notes, "smsctl status KEY")
		})
	}
}

// checkPod checks what every pod of the chart must be: the image,
// non-root on a read-only root, no capability, probes on the loopback
// health port, limits, secrets as files only, every file it names
// mounted, and flags the worker knows.
func checkPod(t *testing.T, name string, pod corev1.PodSpec, values map[string]any) {
	t.Helper()
	require.NotNil(t, pod.AutomountServiceAccountToken)
	require.False(t, *pod.AutomountServiceAccountToken, "%s needs no Kubernetes API token", name)
	require.True(t, *pod.SecurityContext.RunAsNonRoot, "%s runs as non-root", name)
	require.Equal(t, int64(65532), *pod.SecurityContext.RunAsUser, "%s runs as the image's user", name)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, "smsorch:1.0.0", c.Image, "%s runs the image of the chart's appVersion", name)
	sc := c.SecurityContext
	require.True(t, *sc.ReadOnlyRootFilesystem, "%s: read-only root", name)
	require.False(t, *sc.AllowPrivilegeEscalation, "%s: no privilege escalation", name)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, "%s drops every capability", name)
	require.False(t, c.Resources.Limits.Memory().IsZero(), "%s has a memory limit", name)
	require.False(t, c.Resources.Requests.Cpu().IsZero(), "%s requests CPU", name)
	for probe, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		require.NotNil(t, p, "%s has a %s probe", name, probe)
		require.NotNil(t, p.Exec, "%s's %s probe runs worker healthcheck (the image has no shell, the health port is on loopback)", name, probe)
		require.Equal(t, "worker", p.Exec.Command[0])
		require.Equal(t, "healthcheck", p.Exec.Command[1])
		want := "http://127.0.0.1:8090/healthz"
		if probe == "readiness" {
			want = "http://127.0.0.1:8090/readyz"
		}
		require.Equal(t, want, p.Exec.Command[2], "%s's %s probe", name, probe)
	}
	require.Contains(t, c.Command, "--health=127.0.0.1:8090", "%s serves the health port its probes ask", name)

	// Every file a variable names is in a volume the container mounts,
	// as an item of that volume; no secret is in a variable itself.
	mounted := map[string]bool{}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		v, ok := vols[vm.Name]
		require.True(t, ok, "%s mounts the volume %s, which the pod lacks", name, vm.Name)
		if v.Secret != nil {
			require.True(t, vm.ReadOnly, "%s mounts the Secret %s read-only", name, v.Secret.SecretName)
			require.NotEmpty(t, v.Secret.Items, "%s mounts only the keys of %s it reads", name, v.Secret.SecretName)
			for _, it := range v.Secret.Items {
				mounted[path.Join(vm.MountPath, it.Path)] = true
			}
			require.Equal(t, int32(0o440), *v.Secret.DefaultMode, "%s: the secret files are readable by the pod's user and group only", name)
		}
	}
	require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"}, "%s has a writable /tmp on a read-only root", name)
	for _, e := range c.Env {
		require.Nil(t, e.ValueFrom, "%s: %s comes from a file, not a variable (variables show in kubectl describe and in crash dumps)", name, e.Name)
		if strings.HasSuffix(e.Name, "_FILE") || strings.HasSuffix(e.Name, "_PATH") {
			require.True(t, mounted[e.Value], "%s: %s=%s names a file no mounted Secret holds", name, e.Name, e.Value)
		}
		for _, secret := range []string{"SMSORCH_LEDGER", "SMSORCH_CODEC_KEYS", "SMSORCH_CODEC_TOKEN", "SMSORCH_INTAKE_SECRET", "BIRD_ACCESS_KEY", "SENDY_TOKEN", "TEMPORAL_API_KEY"} {
			require.NotEqual(t, secret, e.Name, "%s: the secret %s is given in a variable: use %s_FILE", name, secret, secret)
		}
	}
	for _, a := range c.Command {
		if k, v, ok := strings.Cut(a, "="); ok && (strings.HasSuffix(k, "-cert") || strings.HasSuffix(k, "-key")) {
			require.True(t, mounted[v], "%s: %s names a file no mounted Secret holds", name, a)
		}
	}
	checkFlags(t, name, c.Command)
	stop := stopTimeout(t, c.Command)
	if c.Command[0] == "worker" {
		require.NotZero(t, stop, "%s says how long sends in flight may take at a stop", name)
		var preStop int64
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			preStop = c.Lifecycle.PreStop.Sleep.Seconds
		}
		require.LessOrEqual(t, preStop+stop+5, *pod.TerminationGracePeriodSeconds, "%s: Kubernetes waits longer than the preStop sleep and the worker's --stop-timeout before it kills", name)
		if slices.Contains(c.Command, "--intake=0.0.0.0:8080") {
			require.Positive(t, preStop, "%s: the intake keeps taking requests until the Service has stopped sending them", name)
		}
	}
}

// checkFlags parses a container's command line with the flags of the
// program it runs: a flag the chart passes and the program has renamed
// or dropped fails here, with the program's own message.
func checkFlags(t *testing.T, name string, command []string) {
	t.Helper()
	require.Contains(t, []string{"worker", "smsorch-temporal"}, command[0], "%s runs a program of the image", name)
	var c app.Config
	fs := flag.NewFlagSet(command[0], flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse(command[1:]), "%s: the chart passes a flag %s does not take: %s", name, command[0], out.String())
	require.Empty(t, fs.Args(), "%s: arguments after the flags: %v", name, fs.Args())
}

func stopTimeout(t *testing.T, command []string) int64 {
	for _, a := range command {
		if v, ok := strings.CutPrefix(a, "--stop-timeout="); ok {
			s, err := strconv.ParseInt(strings.TrimSuffix(v, "s"), 10, 64)
			require.NoError(t, err, "--stop-timeout in whole seconds: %s", a)
			return s
		}
	}
	return 0
}

// pick is the labels of m named in like.
func pick(m, like map[string]string) map[string]string {
	out := map[string]string{}
	for k := range like {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestTheChartRefusesValuesThatAreNotSafe(t *testing.T) {
	set := func(base map[string]any, path string, v any) map[string]any {
		keys := strings.Split(path, ".")
		m := base
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
		return base
	}
	for _, c := range []struct {
		name   string
		values map[string]any
		says   string
	}{
		{"the chart's own defaults", map[string]any{}, "temporal.address is required: the Temporal frontend as host:port"},
		{"an address with a scheme", set(selfHosted(), "temporal.address", "https://temporal:7233"), "is not host:port"},
		{"no identity at Temporal", set(selfHosted(), "temporal.clientCertificates.enabled", false), "the chart does not speak plain gRPC"},
		{"the UI with an API key only", set(set(selfHosted(), "temporal.clientCertificates.enabled", false), "temporal.apiKeySecret", "k"), "the web UI reaches Temporal with a client certificate only"},
		{"an intake in plain HTTP with no proxy", set(selfHosted(), "intake.tlsSecret", ""), "the intake needs HTTPS or a proxy it trusts"},
		{"no provider", set(set(selfHosted(), "providers.bird.url", ""), "providers.sendy.url", ""), "no provider: set providers.bird.url"},
		{"Bird without its channel", set(selfHosted(), "providers.bird.channel", ""), "providers.bird.channel is required"},
		{"no time to finish a send", set(selfHosted(), "terminationGracePeriodSeconds", 3), "leaves sends in flight no time"},
		{"a value the chart does not have", set(selfHosted(), "worker.replica", 3), "additional properties 'replica' not allowed"},
		{"a replica count that is not a number", set(selfHosted(), "worker.replicas", "two"), "/worker/replicas': got string, want integer"},
		{"the UI without the server's CA", set(selfHosted(), "temporal.serverCASecret", ""), "the web UI checks the server's certificate against temporal.serverCASecret only"},
		{"KEDA with an API key and a private CA", set(set(set(set(selfHosted(), "temporal.clientCertificates.enabled", false), "temporal.apiKeySecret", "k"), "ui.enabled", false), "worker.keda.enabled", true), "KEDA's Temporal scaler checks a server's private CA only with a client certificate"},
		{"alert rules with no metrics", set(selfHosted(), "metrics.prometheusRule", true), "need metrics.enabled"},
		{"metrics with no NetworkPolicy", set(set(selfHosted(), "metrics.enabled", true), "networkPolicy.enabled", false), "the metrics port has no login"},
		{"metrics on the intake's port", set(set(selfHosted(), "metrics.enabled", true), "metrics.port", 8080), "metrics.port 8080 is the intake's"},
		{"HTTPS and a proxy at once", set(selfHosted(), "intake.behindProxy", "10.0.0.0/8"), "exclude each other"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, "sms", c.values)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.says)
		})
	}
}

func TestTheCloudValuesUseTheAPIKeyKEDAAndTheTestedAlerts(t *testing.T) {
	m, err := render(t, "sms", cloud())
	require.NoError(t, err)
	w := m.Deployments["sms-smsorch-worker"]
	require.NotNil(t, w)
	require.Nil(t, w.Spec.Replicas, "KEDA owns the workers' replica count")
	env := map[string]string{}
	for _, e := range w.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	require.Equal(t, "/etc/smsorch/temporal-api-key/api-key", env["TEMPORAL_API_KEY_FILE"])
	require.Equal(t, "true", env["TEMPORAL_TLS"], "an API key goes over TLS")
	require.NotContains(t, env, "TEMPORAL_TLS_CLIENT_CERT_PATH")
	require.NotContains(t, env, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "Temporal Cloud's certificate is checked against the system's roots")
	require.NotContains(t, env, "BIRD_ACCESS_KEY_FILE", "Bird is not configured")
	require.Contains(t, w.Spec.Template.Spec.Containers[0].Command, "--sendy-rate-limit=120", "extra flags reach the worker")
	require.Contains(t, w.Spec.Template.Spec.Containers[0].Command, "--sendy-sender=Acme #1: SMS", "a value with YAML's own characters reaches the flag whole")
	require.NotContains(t, m.Deployments, "sms-smsorch-ui")

	in := m.Deployments["sms-smsorch-intake"].Spec.Template.Spec.Containers[0]
	require.Contains(t, in.Command, "--intake-behind-proxy=10.42.0.0/16")
	var intakeEnv []string
	for _, e := range in.Env {
		intakeEnv = append(intakeEnv, e.Name)
	}
	require.Contains(t, intakeEnv, "SMSORCH_INTAKE_SECRET_PREVIOUS_FILE", "the previous secret is mounted while senders move")
	require.Contains(t, intakeEnv, "SMSORCH_INTAKE_SENDERS_FILE", "named senders")
	require.Contains(t, w.Spec.Template.Spec.Containers[0].Command, "--metrics=0.0.0.0:9090")

	so := m.ScaledObjects["sms-smsorch-worker"]
	require.NotNil(t, so)
	require.Equal(t, "sms-smsorch-worker", so.Spec.ScaleTargetRef.Name)
	require.Equal(t, "temporal", so.Spec.Triggers[0].Type)
	require.Equal(t, "sms", so.Spec.Triggers[0].Metadata.TaskQueue, "the workers' task queue (contract.TaskQueue)")
	require.Equal(t, "sms.a1b2c", so.Spec.Triggers[0].Metadata.Namespace)
	ta := m.TriggerAuths[so.Spec.Triggers[0].AuthenticationRef.Name]
	require.NotNil(t, ta)
	require.Equal(t, "apiKey", ta.Spec.SecretTargetRef[0].Parameter)

	// The alert rules are the ones promtool tests.
	rule := m.PrometheusRules["sms-smsorch"]
	require.NotNil(t, rule)
	var tested struct {
		Groups []any `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(readFile(t, filepath.Join("..", "prometheus", "alerts.yml")), &tested))
	rendered, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)
	var got struct {
		Groups []any `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(rendered, &got))
	require.NotEmpty(t, tested.Groups)
	require.Equal(t, tested.Groups, got.Groups, "the chart's files/alerts.yml is deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml deploy/helm/smsorch/files/")
	require.NotEmpty(t, m.ServiceMonitors)
	np := m.NetworkPolicies["sms-smsorch"]
	require.NotNil(t, np)
	require.Len(t, np.Spec.Ingress, 2, "the intake's port and the metrics port")
}

// Each value of values.yaml says what it is: a comment above it, or
// above the block it belongs to when its name says enough.
func TestEveryTopLevelValueIsDocumented(t *testing.T) {
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, filepath.Join(chartDir, "values.yaml"))))
	prevComment, n := false, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			prevComment = true
			continue
		}
		if line != "" && line[0] != ' ' {
			n++
			key, _, _ := strings.Cut(line, ":")
			if !slices.Contains([]string{"image", "podSecurityContext", "securityContext"}, key) {
				require.True(t, prevComment, "values.yaml: %s has no comment above it", key)
			}
		}
		prevComment = false
	}
	require.Greater(t, n, 5)
}
