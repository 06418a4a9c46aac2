{{- define "ray-cluster.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ray-cluster.worker" -}}
- groupName: {{ .name }}
  replicas: {{ .group.replicas | default 0 }}
  minReplicas: {{ .group.minReplicas | default 0 }}
  maxReplicas: {{ .group.maxReplicas | default 1 }}
  rayStartParams: {{ toYaml (.group.rayStartParams | default dict) | nindent 4 }}
  template:
    spec:
      containers:
        - name: ray-worker
          image: {{ .image }}
          resources: {{ toYaml .group.resources | nindent 12 }}
{{- end -}}
