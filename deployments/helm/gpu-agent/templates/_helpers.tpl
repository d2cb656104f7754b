{{/*
Names. The objects carry the overlays' names (gpu-agent, gpu-agent-static,
gpu-agent-dra, gpu-agent-config, ...), not the release's, so a cluster moves
between `kubectl apply -k manifests/...` and this chart without renaming (a
DaemonSet's selector cannot change). fullnameOverride (or nameOverride)
replaces the "gpu-agent" they start with.
*/}}
{{- define "gpu-agent.base" -}}
{{- default (default "gpu-agent" .Values.nameOverride) .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-agent.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* The DaemonSet, and its app.kubernetes.io/name label. */}}
{{- define "gpu-agent.name" -}}
{{- $base := include "gpu-agent.base" . -}}
{{- if eq .Values.mode "plugin" -}}{{ $base }}{{- else -}}{{ printf "%s-%s" $base .Values.mode }}{{- end -}}
{{- end -}}

{{- define "gpu-agent.configMapName" -}}
{{- printf "%s-config" (include "gpu-agent.base" .) -}}
{{- end -}}

{{/*
Labels of every object: the overlays' common label, and helm's own.
*/}}
{{- define "gpu-agent.labels" -}}
app.kubernetes.io/part-of: gpu-agent
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "gpu-agent.selectorLabels" -}}
{{- if .Values.selectorLabelsOverride -}}
{{ toYaml .Values.selectorLabelsOverride }}
{{- else -}}
app.kubernetes.io/name: {{ include "gpu-agent.name" . }}
{{- end -}}
{{- end -}}

{{/*
How the agent reaches the driver: runtime, host or gpu-operator.
*/}}
{{- define "gpu-agent.driver" -}}
{{- if ne .Values.driver "auto" -}}
{{- .Values.driver -}}
{{- else if and (ne .Values.mode "dra") (ne (include "gpu-agent.modeHandover" .) "true") -}}
runtime
{{- else if eq (toString .Values.nvidiaDriverRoot) "/run/nvidia/driver" -}}
gpu-operator
{{- else -}}
host
{{- end -}}
{{- end -}}

{{/*
"true" when the plugin-mode pod may move its node to DRA mode and back
(modeHandover, as components/mode-handover): a node label naming a config of
mode dra switches the running agent. validation.yaml refuses modeHandover in
the other modes.
*/}}
{{- define "gpu-agent.modeHandover" -}}
{{- and .Values.modeHandover (eq .Values.mode "plugin") -}}
{{- end -}}

{{/* The driver root as the host sees it. */}}
{{- define "gpu-agent.driverRoot" -}}
{{- if .Values.nvidiaDriverRoot -}}
{{- .Values.nvidiaDriverRoot -}}
{{- else if eq (include "gpu-agent.driver" .) "gpu-operator" -}}
/run/nvidia/driver
{{- else -}}
/
{{- end -}}
{{- end -}}

{{/*
The configs of config.map parsed, as JSON: {"name": {...}, ...}. A config
that is not YAML parses to {"Error": "..."}.
*/}}
{{- define "gpu-agent.mapConfigs" -}}
{{- $out := dict -}}
{{- range $name, $text := (default dict .Values.config).map -}}
{{- $_ := set $out $name (fromYaml (toString $text)) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
One config per node, chosen by the node label nvidia.com/device-plugin.config
(NVIDIA's config.*), as JSON: enabled, configMap (the ConfigMap of named
configs), own (it is the chart's example ConfigMap, already mounted),
create (the chart makes it from config.map), dir (where it is mounted),
default (the config of nodes without the label; "" for the chart's base
config), error (why no default can be chosen).
*/}}
{{- define "gpu-agent.nodeConfig" -}}
{{- $c := default dict .Values.config -}}
{{- $r := dict "enabled" false "own" false "create" false "default" "" "error" "" -}}
{{- $keys := list -}}
{{- $known := false -}}
{{- if $c.map -}}
  {{- $_ := set $r "enabled" true -}}
  {{- $_ := set $r "create" true -}}
  {{- $_ := set $r "configMap" (printf "%s-node-configs" (include "gpu-agent.base" .)) -}}
  {{- $_ := set $r "dir" "/available-configs" -}}
  {{- $keys = keys $c.map | sortAlpha -}}
  {{- $known = true -}}
{{- else if $c.name -}}
  {{- $_ := set $r "enabled" true -}}
  {{- $_ := set $r "configMap" $c.name -}}
  {{- if eq $c.name (include "gpu-agent.configMapName" .) -}}
    {{- $_ := set $r "own" true -}}
    {{- $_ := set $r "dir" "/etc/gpu-agent" -}}
    {{- range $path, $_ := .Files.Glob "files/*.yaml" -}}
      {{- $keys = append $keys (base $path) -}}
    {{- end -}}
    {{- $known = true -}}
  {{- else -}}
    {{- $_ := set $r "dir" "/available-configs" -}}
    {{- $existing := lookup "v1" "ConfigMap" (include "gpu-agent.namespace" .) $c.name -}}
    {{- if $existing -}}
      {{- $keys = keys (default dict $existing.data) | sortAlpha -}}
      {{- $known = true -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- if $r.enabled -}}
  {{- $names := list -}}
  {{- range $keys -}}{{- $names = append $names (trimSuffix ".yaml" .) -}}{{- end -}}
  {{- if $c.default -}}
    {{- $_ := set $r "default" $c.default -}}
    {{- if and $known (not (has (trimSuffix ".yaml" $c.default) $names)) -}}
      {{- $_ := set $r "error" (printf "config.default: %q is not a config of ConfigMap %s (it holds %s); name one of them" $c.default $r.configMap (join ", " $keys)) -}}
    {{- end -}}
  {{- else if not $known -}}
    {{- $_ := set $r "error" (printf "config.name: ConfigMap %s is not visible to this render (helm template, or it does not exist yet in namespace %s), so the chart cannot apply config.fallbackStrategies to it: set config.default to the config that nodes without the nvidia.com/device-plugin.config label run" $c.name (include "gpu-agent.namespace" .)) -}}
  {{- else -}}
    {{- $found := false -}}
    {{- range $c.fallbackStrategies -}}
      {{- if not $found -}}
        {{- if and (eq . "named") (has "default" $names) -}}
          {{- $_ := set $r "default" "default" -}}{{- $found = true -}}
        {{- else if and (eq . "single") (eq (len $keys) 1) -}}
          {{- $_ := set $r "default" (first $keys) -}}{{- $found = true -}}
        {{- else if eq . "empty" -}}
          {{- $found = true -}}
        {{- end -}}
      {{- end -}}
    {{- end -}}
    {{- if and (not $found) $r.create -}}
      {{- $_ := set $r "error" (printf "config.map holds %d configs and none is the default: set config.default, or add to config.fallbackStrategies (now %s) a strategy that finds one: named (a config called \"default\"), single (only one config), empty (the chart's base config)" (len $keys) (toJson $c.fallbackStrategies)) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- toJson $r -}}
{{- end -}}

{{/*
"true" when the agent may meet MIG: the overlays' MIG variant, migStrategy
single or mixed, a config of config.map with such a strategy, or an existing
ConfigMap the chart cannot read through (as NVIDIA's chart assumes then).
*/}}
{{- define "gpu-agent.migOn" -}}
{{- $on := or .Values.mig (has (toString .Values.migStrategy) (list "single" "mixed")) -}}
{{- $c := default dict .Values.config -}}
{{- if and $c.name (not $c.map) (ne $c.name (include "gpu-agent.configMapName" .)) -}}
{{- $on = true -}}
{{- end -}}
{{- range $name, $cfg := include "gpu-agent.mapConfigs" . | fromJson -}}
{{- if has (toString (dig "flags" "migStrategy" "" $cfg)) (list "single" "mixed") -}}{{- $on = true -}}{{- end -}}
{{- end -}}
{{- $on -}}
{{- end -}}

{{/*
"true" when plugin mode may write a CDI spec (a cdi-* device list strategy)
and so needs the host's /var/run/cdi: deviceListStrategy, a config of
config.map, or an existing ConfigMap the chart cannot read through.
*/}}
{{- define "gpu-agent.cdiOn" -}}
{{- $on := contains "cdi-" (toString .Values.deviceListStrategy) -}}
{{- $c := default dict .Values.config -}}
{{- if and $c.name (not $c.map) (ne $c.name (include "gpu-agent.configMapName" .)) -}}
{{- $on = true -}}
{{- end -}}
{{- range $name, $cfg := include "gpu-agent.mapConfigs" . | fromJson -}}
{{- $s := dig "flags" "plugin" "deviceListStrategy" "" $cfg -}}
{{- if kindIs "slice" $s -}}{{- $s = join "," $s -}}{{- end -}}
{{- if contains "cdi-" (toString $s) -}}{{- $on = true -}}{{- end -}}
{{- end -}}
{{- and (eq .Values.mode "plugin") $on -}}
{{- end -}}

{{/* Where the GPU labels go: auto, node, nfd or none (auto: the agent's default). */}}
{{- define "gpu-agent.nodeLabels" -}}
{{- if and (eq .Values.nodeLabels "auto") (dig "enabled" false (default dict .Values.gfd)) (ne .Values.mode "static") -}}
nfd
{{- else -}}
{{- .Values.nodeLabels -}}
{{- end -}}
{{- end -}}

{{/* The plugin-mode pod talks to the API server (a service account of its own). */}}
{{- define "gpu-agent.pluginApi" -}}
{{- and (eq .Values.mode "plugin") (or .Values.nodeHealth (fromJson (include "gpu-agent.nodeConfig" .)).enabled) -}}
{{- end -}}

{{/* The pod's service account; "" for plugin mode without API access. */}}
{{- define "gpu-agent.serviceAccount" -}}
{{- if ne .Values.mode "plugin" -}}
{{- include "gpu-agent.name" . -}}
{{- else if eq (include "gpu-agent.pluginApi" .) "true" -}}
{{- include "gpu-agent.base" . -}}
{{- end -}}
{{- end -}}

{{/*
The resource.k8s.io version of DeviceClasses the cluster serves, newest
first: by kind where the capabilities list kinds (a cluster; helm template
--api-versions resource.k8s.io/v1beta1/DeviceClass), else by group version.
*/}}
{{- define "gpu-agent.deviceClassVersion" -}}
{{- $found := "" -}}
{{- range list "v1" "v1beta2" "v1beta1" -}}
{{- if and (not $found) ($.Capabilities.APIVersions.Has (printf "resource.k8s.io/%s/DeviceClass" .)) -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- range list "v1" "v1beta2" "v1beta1" -}}
{{- if and (not $found) ($.Capabilities.APIVersions.Has (printf "resource.k8s.io/%s" .)) -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}

{{/* The ValidatingAdmissionPolicy is rendered: where the agent writes its Node or its ResourceSlices. */}}
{{- define "gpu-agent.admissionPolicy" -}}
{{- $slices := or (ne .Values.mode "plugin") (eq (include "gpu-agent.modeHandover" .) "true") -}}
{{- and (dig "enabled" true (default dict .Values.admissionPolicy)) $slices (.Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy") -}}
{{- end -}}
