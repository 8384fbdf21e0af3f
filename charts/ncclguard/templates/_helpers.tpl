{{/* Object name prefix: the release name when it contains the chart name, else release-chart. */}}
{{- define "ncclguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ncclguard.controllerName" -}}{{ include "ncclguard.fullname" . }}-controller{{- end -}}
{{- define "ncclguard.probeName" -}}{{ include "ncclguard.fullname" . }}-probe{{- end -}}
{{- define "ncclguard.webhookServiceName" -}}{{ include "ncclguard.fullname" . }}-webhook{{- end -}}
{{/* The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration share this name. */}}
{{- define "ncclguard.webhookConfigurationName" -}}{{ include "ncclguard.fullname" . }}{{- end -}}
{{- define "ncclguard.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "ncclguard.fullname" .)) .Values.webhook.certificates.secretName -}}
{{- end -}}

{{- define "ncclguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ncclguard
{{- end -}}

{{- define "ncclguard.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "ncclguard.probeSelectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: probe
{{- end -}}

{{- define "ncclguard.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "ncclguard.selfManagedCerts" -}}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificates.mode "self") -}}true{{- end -}}
{{- end -}}

{{- define "ncclguard.certManager" -}}
{{- if and .Values.webhook.enabled (eq .Values.webhook.certificates.mode "certManager") -}}true{{- end -}}
{{- end -}}

{{- define "ncclguard.controllerMetricsServiceName" -}}{{ include "ncclguard.controllerName" . }}-metrics{{- end -}}

{{/*
A pod's annotations: podAnnotations, and while metrics are on without the Prometheus operator
(metrics.serviceMonitor.enabled=false) the prometheus.io/scrape, /port and /path annotations a
Prometheus with the usual pod discovery follows. podAnnotations win (prometheus.io/scrape: "false"
opts a pod out). Call with (dict "root" . "podAnnotations" <map> "port" <metrics port>).
*/}}
{{- define "ncclguard.podAnnotations" -}}
{{- $metrics := .root.Values.metrics -}}
{{- $scrape := dict -}}
{{- if and $metrics.enabled (not $metrics.serviceMonitor.enabled) -}}
{{- $scrape = dict "prometheus.io/scrape" "true" "prometheus.io/port" (toString .port) "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- $annotations := merge (deepCopy .podAnnotations) $scrape -}}
{{- with $annotations }}
{{- toYaml . }}
{{- end -}}
{{- end -}}
