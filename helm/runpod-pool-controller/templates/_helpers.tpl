{{/*
Names and labels shared by every template.
*/}}

{{/* The name of every controller object: runpod-pool-controller unless overridden. */}}
{{- define "rpp.fullname" -}}
{{- default .Chart.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The selector: the standard name and instance labels, never the full name. A Deployment's
selector cannot change, so a later fullnameOverride (which renames every object) must
leave it alone for `helm upgrade` to work.
*/}}
{{- define "rpp.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rpp.labels" -}}
{{ include "rpp.selectorLabels" . }}
app.kubernetes.io/part-of: runpod-pool-controller
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The labels that mark `helm test`'s pod, and by which the NetworkPolicy lets it in: the
release's selector labels and the test component (the controller's pods are "controller").
*/}}
{{- define "rpp.testLabels" -}}
{{ include "rpp.selectorLabels" . }}
app.kubernetes.io/component: test
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is set (it then wins over the tag). */}}
{{- define "rpp.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The controller's ServiceAccount: the chart's (the full name unless named), or yours. */}}
{{- define "rpp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rpp.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* A pool's slots ConfigMap: spec.nginx.slotsConfigMap, or <pool>-nginx-slots. */}}
{{- define "rpp.slotsConfigMap" -}}
{{- $nginx := (.pool.spec | default dict).nginx | default dict -}}
{{- $nginx.slotsConfigMap | default (printf "%s-nginx-slots" .name) -}}
{{- end -}}

{{/* Every slots ConfigMap the Role names: the chart's pools', then rbac.extraSlotsConfigMaps. */}}
{{- define "rpp.slotsConfigMaps" -}}
{{- $names := list -}}
{{- range $name, $pool := .Values.pools -}}
{{- $names = append $names (include "rpp.slotsConfigMap" (dict "name" $name "pool" $pool)) -}}
{{- end -}}
{{- concat $names .Values.rbac.extraSlotsConfigMaps | uniq | toJson -}}
{{- end -}}

{{/* Every env Secret the Role names: the chart's pools' envFromSecret, then rbac.extraEnvSecrets. */}}
{{- define "rpp.envSecrets" -}}
{{- $names := list -}}
{{- range $name, $pool := .Values.pools -}}
{{- with ($pool.spec | default dict).envFromSecret -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- concat $names .Values.rbac.extraEnvSecrets | uniq | toJson -}}
{{- end -}}

{{/* rbac.mode, checked against watchNamespaces: named serves the release namespace only,
and only a ClusterRole reaches every namespace. */}}
{{- define "rpp.rbacMode" -}}
{{- $mode := .Values.rbac.mode | default "named" -}}
{{- if not (has $mode (list "named" "namespace" "cluster")) -}}
{{- fail (printf "rbac.mode: %q is not named, namespace or cluster" $mode) -}}
{{- end -}}
{{- $watched := .Values.watchNamespaces | default list -}}
{{- if and (has "*" $watched) (ne $mode "cluster") -}}
{{- fail "watchNamespaces: [\"*\"] (every namespace) needs rbac.mode: cluster" -}}
{{- end -}}
{{- if and (has "*" $watched) (gt (len $watched) 1) -}}
{{- fail "watchNamespaces: \"*\" stands alone (every namespace); remove the other names" -}}
{{- end -}}
{{- if and (eq $mode "named") (without $watched .Release.Namespace) -}}
{{- fail (printf "watchNamespaces: rbac.mode named grants objects in the release namespace (%s) only; set rbac.mode: namespace or cluster" .Release.Namespace) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}

{{/* The namespaces served, as a JSON list: watchNamespaces, or the release namespace. */}}
{{- define "rpp.watchNamespaces" -}}
{{- .Values.watchNamespaces | default (list .Release.Namespace) | uniq | toJson -}}
{{- end -}}

{{/* The pools' rules, in any mode: read and watch them, write only their status and their
finalizer (patch also keeps an unreadable status in an annotation when the controller
rebuilds it), and Events on them (get finds an Event to bump its count after a restart). */}}
{{- define "rpp.poolRules" -}}
# The pools: read and watch them, write only their status and their finalizer; patch
# also keeps an unreadable status in an annotation when the controller rebuilds it.
- apiGroups: [{{ .Values.crdGroup | quote }}]
  resources: [runpodpools]
  verbs: [get, list, watch, patch]
- apiGroups: [{{ .Values.crdGroup | quote }}]
  resources: [runpodpools/status]
  verbs: [update]
# Events on the pools; get finds an Event to bump its count after a restart.
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, get]
{{- end -}}

{{/* rbac.mode namespace and cluster: every slots ConfigMap and env Secret where the rule
applies, so a pool applied with kubectl acts without a helm upgrade. */}}
{{- define "rpp.namespaceObjectRules" -}}
# Every slots ConfigMap (read, create, rewrite) and env Secret (read only) of the pools.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, update]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end -}}
