{{- define "gitops-ray.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gitops-ray.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gitops-ray.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gitops-ray.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gitops-ray.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "gitops-ray.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gitops-ray.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gitops-ray.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The settings file: values.config plus what the chart itself decides (the keys listed in
gitops_ray/schema.py CHART_OWNED, which values.schema.json keeps out of config).
values.config.leaderElection may still tune the timings (leaseDuration, ...).
*/}}
{{- define "gitops-ray.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $_ := set $config "controlNamespace" .Release.Namespace -}}
{{- $election := dict "enabled" (gt (int .Values.replicaCount) 1) "leaseName" (include "gitops-ray.fullname" .) -}}
{{- $_ := set $config "leaderElection" (merge $election ($config.leaderElection | default dict)) -}}
{{- $sharded := and (gt (int .Values.replicaCount) 1) .Values.sharding.enabled -}}
{{- $_ := set $config "sharding" (merge (dict "enabled" $sharded) ($config.sharding | default dict)) -}}
{{- $_ := set $config "listen" (dict "metrics" (printf ":%d" (int .Values.service.metricsPort)) "health" ":8081" "webhook" (printf ":%d" (int .Values.service.webhookPort))) -}}
{{- $_ := set $config "ui" (dict "enabled" .Values.ui.enabled "actions" .Values.ui.actions.enabled "tokenAudience" .Values.ui.actions.audience) -}}
{{- $_ := set $config "podShapes" (dict "instanceTypesConfigMap" (printf "%s-instance-types" (include "gitops-ray.fullname" .)) "patchesConfigMap" (printf "%s-patches" (include "gitops-ray.fullname" .))) -}}
{{- if .Values.credentials -}}
{{- $_ := set $config "credentials" .Values.credentials -}}
{{- end -}}
{{- if .Values.webhook.secretName -}}
{{- $_ := set $config "webhook" (dict "secretFile" "/etc/gitops-ray/webhook/secret") -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}



{{- /* The settings ConfigMap's name: the release's, plus a digest of its content. */}}
{{- define "gitops-ray.configName" -}}
{{- printf "%s-config-%s" (include "gitops-ray.fullname" . | trunc 45 | trimSuffix "-") (include "gitops-ray.config" . | sha256sum | trunc 10) -}}
{{- end -}}
