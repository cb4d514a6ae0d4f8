package helm

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, beside this test.
const chartDir = "smsorch"

// manifests is what `helm template` prints for one set of values, each
// object decoded strictly into its Kubernetes API type.
type manifests struct {
	Deployments     map[string]*appsv1.Deployment
	Services        map[string]*corev1.Service
	PDBs            map[string]*policyv1.PodDisruptionBudget
	NetworkPolicies map[string]*networkingv1.NetworkPolicy
	ServiceMonitors map[string]*monitoringv1.ServiceMonitor
	PrometheusRules map[string]*monitoringv1.PrometheusRule
	ScaledObjects   map[string]*scaledObject
	TriggerAuths    map[string]*triggerAuthentication
	Notes           string
}

// render renders the chart as `helm template RELEASE smsorch -f values`
// does: Helm's own loader, values coalescing and schema check, and
// template engine.
func render(t *testing.T, release string, values map[string]any) (manifests, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err, "helm loads the chart")
	opts := common.ReleaseOptions{Name: release, Namespace: "sms", Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValuesWithSchemaValidation(ch, values, opts, common.DefaultCapabilities, false)
	if err != nil {
		return manifests{}, err
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return manifests{}, err
	}
	m := manifests{
		Deployments: map[string]*appsv1.Deployment{}, Services: map[string]*corev1.Service{},
		PDBs: map[string]*policyv1.PodDisruptionBudget{}, NetworkPolicies: map[string]*networkingv1.NetworkPolicy{},
		ServiceMonitors: map[string]*monitoringv1.ServiceMonitor{}, PrometheusRules: map[string]*monitoringv1.PrometheusRule{},
		ScaledObjects: map[string]*scaledObject{}, TriggerAuths: map[string]*triggerAuthentication{},
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			m.Notes = files[name]
			continue
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(files[name], -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			decode(t, name, []byte(doc), &m)
		}
	}
	return m, nil
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// decode puts one rendered object into m, strictly: a field its API type
// does not have fails, as the API server would refuse it.
func decode(t *testing.T, file string, doc []byte, m *manifests) {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	require.NoError(t, yaml.Unmarshal(doc, &head), "%s is YAML:\n%s", file, doc)
	kind := head.APIVersion + "/" + head.Kind
	name := head.Metadata.Name
	require.NotEmpty(t, name, "%s: a %s without a name", file, kind)
	into, ok := map[string]func() any{
		"apps/v1/Deployment":                      func() any { return put(m.Deployments, name) },
		"v1/Service":                              func() any { return put(m.Services, name) },
		"policy/v1/PodDisruptionBudget":           func() any { return put(m.PDBs, name) },
		"networking.k8s.io/v1/NetworkPolicy":      func() any { return put(m.NetworkPolicies, name) },
		"monitoring.coreos.com/v1/ServiceMonitor": func() any { return put(m.ServiceMonitors, name) },
		"monitoring.coreos.com/v1/PrometheusRule": func() any { return put(m.PrometheusRules, name) },
		"keda.sh/v1alpha1/ScaledObject":           func() any { return put(m.ScaledObjects, name) },
		"keda.sh/v1alpha1/TriggerAuthentication":  func() any { return put(m.TriggerAuths, name) },
	}[kind]
	require.True(t, ok, "%s renders a %s, which this test does not know: decode it into its API type here", file, kind)
	require.NoError(t, yaml.UnmarshalStrict(doc, into()), "%s: a %s with a field its API type lacks, or of the wrong type:\n%s", file, kind, doc)
}

// put makes a new object named name in objects and returns it.
func put[T any](objects map[string]*T, name string) *T {
	o := new(T)
	objects[name] = o
	return o
}

// scaledObject and triggerAuthentication are the fields of KEDA's
// keda.sh/v1alpha1 types (github.com/kedacore/keda/v2/apis/keda/v1alpha1)
// the chart uses, written out here: KEDA's module would bring its whole
// operator into this test. Strict decoding still refuses any other.
type scaledObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   metaNameLabels `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type              string          `json:"type"`
			Metadata          temporalTrigger `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

// temporalTrigger is the metadata KEDA's Temporal scaler reads
// (pkg/scalers/temporal_scaler.go, temporalMetadata): a key it does not
// read fails here instead of being ignored there.
type temporalTrigger struct {
	Endpoint                  string `json:"endpoint"`
	Namespace                 string `json:"namespace"`
	TaskQueue                 string `json:"taskQueue"`
	QueueTypes                string `json:"queueTypes"`
	TargetQueueSize           string `json:"targetQueueSize"`
	ActivationTargetQueueSize string `json:"activationTargetQueueSize"`
	TLSServerName             string `json:"tlsServerName,omitempty"`
}

type triggerAuthentication struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   metaNameLabels `json:"metadata"`
	Spec       struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

type metaNameLabels struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// readFile reads a file of the repository.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
