{{/* The name of every object: RELEASE-smsorch, or RELEASE when it already says smsorch. */}}
{{- define "smsorch.fullname" -}}
{{- if contains "smsorch" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-smsorch" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "smsorch.labels" -}}
app.kubernetes.io/name: smsorch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels that select one component's pods: include with (list $ "worker"). */}}
{{- define "smsorch.selector" -}}
app.kubernetes.io/name: smsorch
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "smsorch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
What the chart refuses to render: Temporal without TLS and a client
identity, an intake neither on HTTPS nor behind a named proxy, no
provider, a web UI that cannot reach Temporal.
*/}}
{{- define "smsorch.check" -}}
{{- if not .Values.temporal.address -}}
{{- fail "temporal.address is required: the Temporal frontend as host:port, like temporal-frontend.temporal.svc:7233 (the official chart) or NAMESPACE.ACCOUNT.tmprl.cloud:7233 (Temporal Cloud)" -}}
{{- end -}}
{{- if not (regexMatch "^[^:/ ]+:[0-9]+$" .Values.temporal.address) -}}
{{- fail (printf "temporal.address %q is not host:port: give it like temporal-frontend.temporal.svc:7233, with no scheme" .Values.temporal.address) -}}
{{- end -}}
{{- if and (not .Values.temporal.clientCertificates.enabled) (not .Values.temporal.apiKeySecret) -}}
{{- fail "the workers need an identity at Temporal: keep temporal.clientCertificates.enabled with a certificate Secret per component, or set temporal.apiKeySecret (a Secret with the key api-key); the chart does not speak plain gRPC" -}}
{{- end -}}
{{- if and .Values.ui.enabled (not .Values.temporal.clientCertificates.enabled) -}}
{{- fail "the web UI reaches Temporal with a client certificate only: set temporal.clientCertificates, or ui.enabled=false (Temporal Cloud has its own UI)" -}}
{{- end -}}
{{- if and .Values.ui.enabled (not .Values.temporal.serverCASecret) -}}
{{- fail "the web UI checks the server's certificate against temporal.serverCASecret only: set it (a Secret with ca.crt), or ui.enabled=false (Temporal Cloud has its own UI)" -}}
{{- end -}}
{{- if and .Values.worker.keda.enabled .Values.temporal.apiKeySecret (not .Values.temporal.clientCertificates.enabled) .Values.temporal.serverCASecret -}}
{{- fail "KEDA's Temporal scaler checks a server's private CA only with a client certificate: with an API key alone it trusts the system's roots (Temporal Cloud); keep temporal.clientCertificates for KEDA, or set worker.keda.enabled=false" -}}
{{- end -}}
{{- if and (or .Values.metrics.serviceMonitor .Values.metrics.prometheusRule) (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor and metrics.prometheusRule need metrics.enabled: without metrics the alert on pollers would fire for good" -}}
{{- end -}}
{{- if and .Values.metrics.enabled (not .Values.networkPolicy.enabled) -}}
{{- fail "the metrics port has no login: it is served only with networkPolicy.enabled, which lets metrics.scraperNamespace alone reach it (your CNI must enforce NetworkPolicies)" -}}
{{- end -}}
{{- if has (int .Values.metrics.port) (list 8080 8090) -}}
{{- fail (printf "metrics.port %d is the intake's (8080) or the health port (8090): choose another, like 9090" (int .Values.metrics.port)) -}}
{{- end -}}
{{- if and .Values.intake.tlsSecret .Values.intake.behindProxy -}}
{{- fail "intake.tlsSecret and intake.behindProxy exclude each other: HTTPS in the pod, or plain HTTP behind your ingress controller" -}}
{{- end -}}
{{- if and .Values.intake.enabled (not .Values.intake.tlsSecret) (not .Values.intake.behindProxy) -}}
{{- fail "the intake needs HTTPS or a proxy it trusts: set intake.tlsSecret (a kubernetes.io/tls Secret), or intake.behindProxy to your ingress controller's pod addresses" -}}
{{- end -}}
{{- if and (not .Values.providers.bird.url) (not .Values.providers.sendy.url) -}}
{{- fail "no provider: set providers.bird.url (with workspace and channel) or providers.sendy.url" -}}
{{- end -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) 15 -}}
{{- fail "terminationGracePeriodSeconds below 10 leaves sends in flight no time to be recorded: keep 30" -}}
{{- end -}}
{{- end -}}

{{/* The environment that reaches Temporal: include with (list $ "worker"). */}}
{{- define "smsorch.temporalEnv" -}}
{{- $ := index . 0 -}}
{{- $t := $.Values.temporal -}}
- name: TEMPORAL_ADDRESS
  value: {{ $t.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ $t.namespace | quote }}
- name: TEMPORAL_TLS
  value: "true"
{{- with $t.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if $t.serverCASecret }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/smsorch/temporal-ca/ca.crt
{{- end }}
{{- if $t.clientCertificates.enabled }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/smsorch/tls/tls.crt
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/smsorch/tls/tls.key
{{- end }}
{{- if $t.apiKeySecret }}
- name: TEMPORAL_API_KEY_FILE
  value: /etc/smsorch/temporal-api-key/api-key
{{- end }}
{{- end -}}

{{/* The volumes that reach Temporal: include with (list $ "worker"). */}}
{{- define "smsorch.temporalVolumes" -}}
{{- $ := index . 0 -}}
{{- $t := $.Values.temporal -}}
{{- if $t.serverCASecret }}
- name: temporal-ca
  secret:
    secretName: {{ $t.serverCASecret }}
    defaultMode: 0440
    items: [{key: ca.crt, path: ca.crt}]
{{- end }}
{{- if $t.clientCertificates.enabled }}
- name: tls
  secret:
    secretName: {{ index $t.clientCertificates (printf "%sSecret" (index . 1)) }}
    defaultMode: 0440
    items: [{key: tls.crt, path: tls.crt}, {key: tls.key, path: tls.key}]
{{- end }}
{{- if $t.apiKeySecret }}
- name: temporal-api-key
  secret:
    secretName: {{ $t.apiKeySecret }}
    defaultMode: 0440
    items: [{key: api-key, path: api-key}]
{{- end }}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- end -}}

{{- define "smsorch.temporalMounts" -}}
{{- $t := .Values.temporal -}}
{{- if $t.serverCASecret }}
- {name: temporal-ca, mountPath: /etc/smsorch/temporal-ca, readOnly: true}
{{- end }}
{{- if $t.clientCertificates.enabled }}
- {name: tls, mountPath: /etc/smsorch/tls, readOnly: true}
{{- end }}
{{- if $t.apiKeySecret }}
- {name: temporal-api-key, mountPath: /etc/smsorch/temporal-api-key, readOnly: true}
{{- end }}
- {name: tmp, mountPath: /tmp}
{{- end -}}

{{/* The secrets a worker reads, as NAME_FILE: include with (list $ intake?). */}}
{{- define "smsorch.workerSecretEnv" -}}
{{- $ := index . 0 -}}
- name: SMSORCH_LEDGER_FILE
  value: /etc/smsorch/secrets/ledger
- name: SMSORCH_CODEC_KEYS_FILE
  value: /etc/smsorch/secrets/codec-keys
{{- if $.Values.providers.bird.url }}
- name: BIRD_ACCESS_KEY_FILE
  value: /etc/smsorch/secrets/bird-access-key
{{- end }}
{{- if $.Values.providers.sendy.url }}
- name: SENDY_TOKEN_FILE
  value: /etc/smsorch/secrets/sendy-token
{{- end }}
{{- if index . 1 }}
- name: SMSORCH_INTAKE_SECRET_FILE
  value: /etc/smsorch/secrets/intake-secret
{{- if $.Values.intake.previousSecret }}
- name: SMSORCH_INTAKE_SECRET_PREVIOUS_FILE
  value: /etc/smsorch/secrets/intake-secret-previous
{{- end }}
{{- if $.Values.intake.namedSenders }}
- name: SMSORCH_INTAKE_SENDERS_FILE
  value: /etc/smsorch/secrets/intake-senders
{{- end }}
{{- end }}
{{- end -}}

{{- define "smsorch.workerSecretVolume" -}}
{{- $ := index . 0 -}}
- name: secrets
  secret:
    secretName: {{ $.Values.secretName }}
    defaultMode: 0440
    items:
      - {key: ledger, path: ledger}
      - {key: codec-keys, path: codec-keys}
{{- if $.Values.providers.bird.url }}
      - {key: bird-access-key, path: bird-access-key}
{{- end }}
{{- if $.Values.providers.sendy.url }}
      - {key: sendy-token, path: sendy-token}
{{- end }}
{{- if index . 1 }}
      - {key: intake-secret, path: intake-secret}
{{- if $.Values.intake.previousSecret }}
      - {key: intake-secret-previous, path: intake-secret-previous}
{{- end }}
{{- if $.Values.intake.namedSenders }}
      - {key: intake-senders, path: intake-senders}
{{- end }}
{{- end }}
{{- end -}}

{{/* The worker's flags every worker pod passes: include with (list $ extraArgs preStopSeconds). */}}
{{- define "smsorch.workerArgs" -}}
{{- $ := index . 0 -}}
{{- $p := $.Values.providers -}}
{{- with $p.bird.url }}
- {{ printf "--bird-url=%s" . | quote }}
- {{ printf "--bird-workspace=%s" (required "providers.bird.workspace is required with providers.bird.url: your Bird workspace id" $p.bird.workspace) | quote }}
- {{ printf "--bird-channel=%s" (required "providers.bird.channel is required with providers.bird.url: your Bird SMS channel id" $p.bird.channel) | quote }}
{{- end }}
{{- with $p.sendy.url }}
- {{ printf "--sendy-url=%s" . | quote }}
- {{ printf "--sendy-sender=%s" $p.sendy.sender | quote }}
{{- end }}
- --task-queue-partitions={{ int $.Values.worker.taskQueuePartitions }}
- --stop-timeout={{ sub (sub (int $.Values.terminationGracePeriodSeconds) 5) (index . 2) }}s
- --health=127.0.0.1:8090
- --log-format=json
{{- if $.Values.metrics.enabled }}
- --metrics=0.0.0.0:{{ int $.Values.metrics.port }}
{{- end }}
{{- range index . 1 }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* Liveness and readiness: the image has no shell; worker healthcheck asks the loopback health port. */}}
{{- define "smsorch.probes" -}}
readinessProbe:
  exec:
    command: [worker, healthcheck, "http://127.0.0.1:8090/readyz"]
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
livenessProbe:
  exec:
    command: [worker, healthcheck, "http://127.0.0.1:8090/healthz"]
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
startupProbe:
  exec:
    command: [worker, healthcheck, "http://127.0.0.1:8090/healthz"]
  periodSeconds: 2
  timeoutSeconds: 5
  failureThreshold: 90
{{- end -}}
