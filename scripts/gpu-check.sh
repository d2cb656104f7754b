#!/usr/bin/env bash
# Every check that needs a real NVIDIA driver, in one command. Prints one
# table (check, result, figure) and writes it as results.json, with every
# log and capture, under the folder it names at the end.
#
#   scripts/gpu-check.sh [--out DIR] [--build DIR]   on a GPU machine (root, no cluster)
#   scripts/gpu-check.sh --standin [--fixture F]     the same checks on the NVML stand-in
#   scripts/gpu-check.sh --pack DIR                  a folder of this build's binaries and
#                                                    the libraries they need, for a GPU
#                                                    machine with no compiler or packages;
#                                                    there: gpu-check.sh --build DIR
#
# The checks: `gpu-agent devices` and `labels` against nvidia-smi (and the
# topology against `nvidia-smi topo -m`); plugin mode against the kubelet
# simulator in each device-list strategy (registers, every GPU Healthy,
# Allocate of every GPU, CDI names resolved against the written spec and
# every device node and host path in it present); XID events registered on
# every GPU, and every polled health check's answer (gpu-agent health); the
# ResourceSlices DRA mode would publish (gpu-agent dra slices) and DRA
# prepare and unprepare of one claim (the claim's CDI spec and its device
# nodes present); the
# container-like run (the host-driver DaemonSet's root, args and mounts, the
# real driver root at /driver-root); idle footprint and
# start -> registered (bench/e2e_bench); a capture of every NVML answer the
# agent uses (nvml-capture), checked by loading it into the stand-in and
# comparing `gpu-agent devices` and each health check's verdict with the
# driver's own. --standin puts the
# stand-in (and fake-nvml-tool's nvidia-smi answers) where the driver
# would be, so the script cannot rot between GPU runs (ctest gpu_check_standin).
# Never changes MIG mode, never resets a GPU, leaves nothing running.
# Exit 0 when every check passed or was skipped, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
standin=0
build=build
out=""
pack=""
fixture=tests/fixtures/nvml/8-gpu-nvlink.yaml
usage() {
  sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --standin) standin=1; shift ;;
    --build) build=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --fixture) fixture=${2:?}; shift 2 ;;
    --pack) pack=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
build=$(cd "$build" && pwd)

# --- Packing: binaries (stripped) and the libraries they need, but the C
# library and the C++ runtime, which a newer system has as well.
if [ -n "$pack" ]; then
  rm -rf "$pack"
  mkdir -p "$pack/lib" "$pack/fake-nvml" "$pack/bench" "$pack/daemonset"
  for b in gpu-agent kubelet-sim apiserver-stub nvml-capture fake-nvml-tool bench/e2e_bench; do
    [ -x "$build/$b" ] || { echo "gpu-check: $build/$b is not built" >&2; exit 1; }
    strip -o "$pack/$b" "$build/$b"
  done
  strip -o "$pack/fake-nvml/libnvidia-ml.so.1" "$build/fake-nvml/libnvidia-ml.so.1"
  for b in "$pack"/gpu-agent "$pack"/kubelet-sim "$pack"/apiserver-stub "$pack"/nvml-capture "$pack"/fake-nvml-tool \
    "$pack"/bench/e2e_bench "$pack"/fake-nvml/libnvidia-ml.so.1; do
    ldd "$b" | awk '$3 ~ /^\// {print $3}'
  done | sort -u | grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r l; do cp -L "$l" "$pack/lib/"; done
  kubectl kustomize manifests/plugin/host-driver >"$pack/daemonset/render.yaml"
  python3 tests/packaging/daemonset_spec.py "$pack/daemonset/render.yaml" "$pack/daemonset"
  echo "gpu-check: packed $(du -sh "$pack" | cut -f1) into $pack"
  exit 0
fi

[ -n "$out" ] || out=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-run.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for m in $(awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
results=$out/results.tsv
: >"$results"
record() {  # record CHECK RESULT FIGURE
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"
  printf '%-28s %-5s %s\n' "$1" "$2" "$3"
}

# The binaries: a build folder, or a packed one with its libraries beside.
bin=$build
[ -x "$bin/gpu-agent" ] || { echo "gpu-check: no gpu-agent in $bin" >&2; exit 1; }
ourlibs=""
[ -d "$bin/lib" ] && ourlibs=$bin/lib
ours() {  # ours PROGRAM ARGS...: one of this build's programs, with its libraries
  LD_LIBRARY_PATH="${ourlibs}${ourlibs:+:}${nvml_dir:-}${nvml_dir:+:}${LD_LIBRARY_PATH:-}" "$@"
}
# start_ours PROGRAM ARGS...: the same, in the background, with $! the
# program itself. (`ours PROGRAM &` backgrounds a subshell running the
# function: $! is the subshell, and stopping it leaves the program running.)
start_ours() {
  LD_LIBRARY_PATH="${ourlibs}${ourlibs:+:}${nvml_dir:-}${nvml_dir:+:}${LD_LIBRARY_PATH:-}" "$@" &
}
agent=$bin/gpu-agent

# The driver, or the stand-in in its place.
nvml_dir=""
sysfs=/sys
if [ "$standin" = 1 ]; then
  fixture=$(cd "$(dirname "$fixture")" && pwd)/$(basename "$fixture")
  nvml_dir=$bin/fake-nvml
  export FAKE_NVML_FIXTURE=$fixture
  sysfs=$work/sys
  ours "$bin/fake-nvml-tool" sysfs "$fixture" "$sysfs" >/dev/null
  mkdir -p "$work/smi"
  printf '#!/bin/sh\nexec %q smi %q "$@"\n' "$bin/fake-nvml-tool" "$fixture" >"$work/smi/nvidia-smi"
  chmod +x "$work/smi/nvidia-smi"
  PATH=$work/smi:$PATH
fi
agent_args=(--sysfs-root "$sysfs")
echo "gpu-check: $([ "$standin" = 1 ] && echo "NVML stand-in ($fixture)" || echo "real driver"), results in $out"
printf '%-28s %-5s %s\n' CHECK RESULT FIGURE

# 1. The driver as nvidia-smi sees it.
if ! command -v nvidia-smi >/dev/null; then
  record driver FAIL "no nvidia-smi on PATH"
  exit 1
fi
query=index,uuid,name,memory.total,pci.bus_id,compute_cap,mig.mode.current,driver_version
nvidia-smi --query-gpu=$query --format=csv,noheader,nounits >"$out/smi-query.csv" 2>"$out/smi.err" ||
  { record driver FAIL "nvidia-smi --query-gpu failed: $(head -c 200 "$out/smi.err")"; exit 1; }
nvidia-smi topo -m >"$out/smi-topo.txt" 2>>"$out/smi.err" || true
gpus=$(grep -c . "$out/smi-query.csv" || true)
driver=$(head -1 "$out/smi-query.csv" | awk -F', ' '{print $8}')
record driver PASS "$gpus GPU(s), driver $driver, $(head -1 "$out/smi-query.csv" | awk -F', ' '{print $3}')"

plugin_args=()
if [ "$standin" = 1 ]; then
  # What the CDI spec names, under roots of their own: device nodes (empty
  # files do) and the driver's files (the stand-in under NVML's names).
  mkdir -p "$work/devroot/dev"
  for n in nvidiactl nvidia-uvm nvidia-uvm-tools $(seq -f 'nvidia%g' 0 $((gpus - 1))); do
    : >"$work/devroot/dev/$n"
  done
  drv=$work/driver/usr/lib/x86_64-linux-gnu
  mkdir -p "$drv" "$work/driver/usr/bin"
  cp -L "$nvml_dir/libnvidia-ml.so.1" "$drv/libnvidia-ml.so.$driver"
  ln -s "libnvidia-ml.so.$driver" "$drv/libnvidia-ml.so.1"
  : >"$drv/libcuda.so.$driver"
  ln -s "libcuda.so.$driver" "$drv/libcuda.so.1"
  : >"$work/driver/usr/bin/nvidia-smi"
  plugin_args=(--dev-root "$work/devroot" --nvidia-driver-root "$work/driver")
fi

# 2. devices, topology, labels against nvidia-smi.
ours "$agent" devices "${agent_args[@]}" -o json >"$out/devices.json" 2>"$out/devices.err" ||
  record devices FAIL "gpu-agent devices: $(head -c 200 "$out/devices.err")"
ours "$agent" labels "${agent_args[@]}" >"$out/labels.txt" 2>"$out/labels.err" ||
  record labels FAIL "gpu-agent labels: $(head -c 200 "$out/labels.err")"
n0=$(wc -l <"$results")
python3 - "$out" "$sysfs" >>"$results" <<'EOF'
import json, os, re, sys
out, sysfs = sys.argv[1], sys.argv[2]
rows = []
def row(check, ok, figure):
    rows.append((check, "PASS" if ok else "FAIL", figure))
smi = [[f.strip() for f in l.split(", ")] for l in open(out + "/smi-query.csv") if l.strip()]
try:
    devs = json.load(open(out + "/devices.json"))
except Exception as e:
    devs = None
    row("devices", False, "no JSON from gpu-agent devices: %s" % e)
if devs is not None:
    bad = []
    if len(devs) != len(smi):
        bad.append("count %d, nvidia-smi %d" % (len(devs), len(smi)))
    for d, s in zip(devs, smi):
        idx, uuid, name, mem, bus, cc, mig = s[:7]
        want = {"index": int(idx), "uuid": uuid, "name": name, "memoryMiB": int(mem),
                "pciBusId": bus.upper(), "computeCapability": cc,
                "migEnabled": mig == "Enabled"}
        got = dict(d, pciBusId=d.get("pciBusId", "").upper())
        for k, v in want.items():
            if got.get(k) != v:
                bad.append("GPU %s %s: agent %r, nvidia-smi %r" % (idx, k, got.get(k), v))
        bdf = bus.lower()[4:] if len(bus) > 12 else bus.lower()
        try:
            numa = int(open("%s/bus/pci/devices/%s/numa_node" % (sysfs, bdf)).read())
        except OSError:
            numa = -1
        agent_numa = d.get("numaNode", -1)
        if agent_numa is None:
            agent_numa = -1
        if (numa if numa >= 0 else -1) != agent_numa:
            bad.append("GPU %s NUMA: agent %r, sysfs %r" % (idx, agent_numa, numa))
    row("devices", not bad, "; ".join(bad) if bad else
        "%d GPU(s): uuid, name, memory, PCI bus id, NUMA, CC, MIG mode agree" % len(devs))
    # Topology: the matrix of nvidia-smi topo -m.
    # nvidia-smi underlines the header with terminal escapes.
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    lines = [ansi.sub("", l.rstrip("\n")) for l in open(out + "/smi-topo.txt")]
    head = lines[0].split("\t") if lines else []
    cols = [h.strip() for h in head if re.fullmatch(r"\s*GPU\d+\s*", h)]
    bad, notes = [], []
    pairs = 0
    for l in lines[1:]:
        f = l.split("\t")
        if not re.fullmatch(r"GPU\d+", f[0].strip()):
            continue
        i = int(f[0].strip()[3:])
        for j, cell in enumerate(f[1:1 + len(cols)]):
            if i == j:
                continue
            pairs += 1
            agent_link = devs[i].get("links", {}).get(str(j)) if i < len(devs) else None
            if agent_link != cell.strip():
                bad.append("GPU%d-GPU%d: agent %s, nvidia-smi %s" % (i, j, agent_link, cell.strip()))
        rest = [x.strip() for x in f[1 + len(cols):]]
        if len(rest) >= 2 and i < len(devs):
            numa = rest[1]
            agent_numa = devs[i].get("numaNode")
            if agent_numa is None or agent_numa < 0:
                agent_numa = None
            want = None if numa in ("N/A", "") else int(numa.split("-")[0])
            if agent_numa is None and want is not None:
                # sysfs has no NUMA node for the GPU (checked above); nvidia-smi
                # takes one from the CPUs' affinity. The agent gives the kubelet
                # none, as NVIDIA's plugin does.
                notes.append("GPU%d: no NUMA node in sysfs, nvidia-smi affinity %s" % (i, numa))
            elif agent_numa != want:
                bad.append("GPU%d NUMA affinity: agent %s, nvidia-smi %s" % (i, agent_numa, numa))
    if not cols:
        row("topology", False, "cannot read nvidia-smi topo -m")
    else:
        row("topology", not bad, "; ".join(bad[:6]) if bad else
            "%d GPU pair(s) and NUMA affinity agree with nvidia-smi topo -m%s" %
            (pairs, "".join(" (" + n + ")" for n in notes)))
    # Labels.
    try:
        labels = dict(l.strip().split("=", 1) for l in open(out + "/labels.txt") if "=" in l)
    except Exception as e:
        labels = {}
    s = smi[0] if smi else None
    bad = []
    if s and labels:
        drv = s[7].split(".")
        cc = s[5].split(".")
        want = {"nvidia.com/gpu.count": str(len(smi)),
                "nvidia.com/gpu.product": re.sub(r"\s+", "-", s[2]),
                "nvidia.com/gpu.memory": s[3],
                "nvidia.com/cuda.driver.major": drv[0],
                "nvidia.com/cuda.driver.minor": drv[1] if len(drv) > 1 else "",
                "nvidia.com/gpu.compute.major": cc[0],
                "nvidia.com/gpu.compute.minor": cc[1] if len(cc) > 1 else "",
                "nvidia.com/mig.capable": None}
        for k, v in want.items():
            if v is None:
                if k not in labels:
                    bad.append("%s missing" % k)
            elif labels.get(k) != v:
                bad.append("%s=%s, nvidia-smi says %s" % (k, labels.get(k), v))
    row("labels", bool(labels) and not bad, "; ".join(bad) if bad else
        "%d labels; count, product, memory, driver, compute capability agree" % len(labels))
for r in rows:
    print("\t".join(r))
EOF
tail -n +$((n0 + 1)) "$results" | while IFS=$'\t' read -r c r f; do printf '%-28s %-5s %s\n' "$c" "$r" "$f"; done

# 3. Plugin mode against the kubelet simulator, in each device-list strategy.
wait_for() {  # wait_for FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  until grep -q -- "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}
stop() {  # stop PID: SIGTERM, then wait (SIGKILL after 10 s)
  kill -TERM "$1" 2>/dev/null || return 0
  local deadline=$((SECONDS + 10))
  while kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
watched_all=""
for strategy in envvar volume-mounts cdi-annotations cdi-cri; do
  d=$work/plugin-$strategy
  mkdir -p "$d/kubelet" "$d/cdi"
  start_ours "$bin/kubelet-sim" "$d/kubelet" --allocate "$gpus" --exit-after-updates 1 >"$d/sim.log" 2>&1
  sim=$!
  pids+=("$sim")
  wait_for "$d/sim.log" serving 10 || { record "plugin:$strategy" FAIL "kubelet simulator did not start"; continue; }
  start_ours "$agent" run "${agent_args[@]}" "${plugin_args[@]}" --kubelet-socket "$d/kubelet/kubelet.sock" \
    --device-list-strategy "$strategy" --cdi-spec-dir "$d/cdi" --metrics-address "" \
    --log-format json >"$d/agent.log" 2>&1
  ag=$!
  pids+=("$ag")
  ok=1
  why=""
  wait_for "$d/sim.log" "plugin registered" 20 || { ok=0; why="did not register"; }
  [ $ok = 1 ] && { wait_for "$d/sim.log" "Allocate $gpus -> " 20 || { ok=0; why="no Allocate answer"; }; }
  wait_for "$d/agent.log" "watching XID events" 5 || true
  # The spec as the agent serves it: it removes its spec as it exits.
  mkdir -p "$d/spec"
  [ -n "$(ls -A "$d/cdi")" ] && cp "$d"/cdi/* "$d/spec/" 2>/dev/null && cp "$d"/spec/* "$out/" || true
  stop "$ag"
  stop "$sim"
  cp "$d/sim.log" "$out/plugin-$strategy.sim.log"
  cp "$d/agent.log" "$out/plugin-$strategy.agent.log"
  if [ $ok = 0 ]; then
    record "plugin:$strategy" FAIL "$why (see $out/plugin-$strategy.*.log)"
    continue
  fi
  if [ -z "$watched_all" ]; then
    watched_all=$(grep -o '"msg":"watching XID events"[^}]*' "$d/agent.log" | head -1 || true)
  fi
  verdict=$(python3 - "$d" "$strategy" "$gpus" "$standin" <<'EOF'
import glob, json, os, re, sys
d, strategy, gpus, standin = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
log = open(d + "/sim.log").read()
upd = re.search(r"ListAndWatch update 1:(.*)", log)
devices = re.findall(r"(\S+)=(\S+)", upd.group(1)) if upd else []
healthy = [i for i, h in devices if h == "Healthy"]
alloc = re.search(r"Allocate \d+ -> (\S+) ?(.*)", log)
problems = []
if len(devices) != gpus or len(healthy) != gpus:
    problems.append("%d of %d GPUs listed Healthy" % (len(healthy), gpus))
if not alloc or alloc.group(1) != "OK":
    problems.append("Allocate: %s" % (alloc.group(2)[:200] if alloc else "none"))
resp = alloc.group(2) if alloc else ""
figure = ""
if strategy == "envvar":
    m = re.search(r'key: "NVIDIA_VISIBLE_DEVICES" value: "([^"]*)"', resp)
    ids = m.group(1).split(",") if m else []
    if sorted(ids) != sorted(i for i, _ in devices):
        problems.append("NVIDIA_VISIBLE_DEVICES=%s" % (m.group(1) if m else "(none)"))
    figure = "NVIDIA_VISIBLE_DEVICES names all %d" % len(ids)
elif strategy == "volume-mounts":
    paths = re.findall(r'container_path: "(/var/run/nvidia-container-devices/[^"]*)"', resp)
    if len(paths) != gpus:
        problems.append("%d volume mounts for %d GPUs" % (len(paths), gpus))
    figure = "%d device-list mounts" % len(paths)
else:
    if strategy == "cdi-cri":
        names = re.findall(r'cdi_devices \{ name: "([^"]*)" \}', resp)
    else:
        names = [n for v in re.findall(r'key: "cdi.k8s.io/[^"]*" value: "([^"]*)"', resp)
                 for n in v.split(",")]
    specs, common = {}, {}
    for f in glob.glob(d + "/spec/*"):
        text = open(f).read()
        try:
            spec = json.loads(text)
        except ValueError:
            import yaml
            spec = yaml.safe_load(text)
        for dev in spec.get("devices", []):
            specs["%s=%s" % (spec["kind"], dev["name"])] = dev
        common = spec.get("containerEdits", {})
    missing = [n for n in names if n not in specs]
    if not names or len(names) < gpus:
        problems.append("%d CDI names for %d GPUs" % (len(names), gpus))
    if missing:
        problems.append("not in the spec: " + ", ".join(missing))
    # Every node and host path the spec names must exist on this host.
    absent = []
    edits = [common] + [specs[n].get("containerEdits", {}) for n in names if n in specs]
    for e in edits:
        for node in e.get("deviceNodes", []):
            p = node.get("hostPath", node.get("path"))
            if not os.path.exists(p):
                absent.append(p)
        for m in e.get("mounts", []):
            if not os.path.exists(m["hostPath"]):
                absent.append(m["hostPath"])
    if absent:
        problems.append("spec names what this host lacks: " + ", ".join(sorted(set(absent))[:5]))
    figure = "%d CDI name(s) resolved in the spec, its device nodes and host paths present" % len(names)
print(("FAIL\t" + "; ".join(problems)) if problems else ("PASS\t%d GPU(s) Healthy, Allocate OK, %s" % (len(healthy), figure)))
EOF
)
  record "plugin:$strategy" "${verdict%%$'\t'*}" "${verdict#*$'\t'}"
done
if command -v podman >/dev/null; then
  record "cdi:podman" SKIP "podman resolution of every id is ctest cdi_podman_resolves_every_id"
else
  record "cdi:podman" SKIP "podman is not installed here (nothing can be installed); names resolved against the spec above"
fi

# 4. Health: XID events registered on every GPU; every polled check, where
#    the agent has them (gpu-agent health).
if [[ "$watched_all" =~ \"gpus\":\"([0-9]+)\",\"watched\":\"([0-9]+)\" ]]; then
  n=${BASH_REMATCH[1]}
  w=${BASH_REMATCH[2]}
  [ "$w" = "$n" ] && [ "$n" = "$gpus" ] && r=PASS || r=FAIL
  record "health:xid-events" $r "XID events registered on $w of $n GPU(s)"
else
  record "health:xid-events" FAIL "the agent never logged its XID registration"
fi
if ours "$agent" health --help >/dev/null 2>&1; then
  if ours "$agent" health "${agent_args[@]}" -o json >"$out/health.json" 2>"$out/health.err"; then
    verdict=$(python3 - "$out/health.json" "$gpus" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
gpus = d.get("gpus", [])
problems, parts = [], []
if len(gpus) != int(sys.argv[2]):
    problems.append("%d GPUs in the report, nvidia-smi %s" % (len(gpus), sys.argv[2]))
same = {}  # one line for the GPUs that read alike
for g in gpus:
    checks = g.get("checks", [])
    for c in checks:
        if not c.get("state"):
            problems.append("GPU %s %s: no state" % (g.get("index"), c.get("check")))
    line = "%s: %s" % (g.get("health"), " ".join("%s=%s" % (c["check"], c["state"]) for c in checks))
    same.setdefault(line, []).append(str(g.get("index")))
for line, idx in same.items():
    parts.append("GPU %s %s" % (",".join(idx), line))
print(("FAIL\t" + "; ".join(problems)) if problems else
      ("PASS\t%s NVML calls/GPU/poll; %s" % (d.get("nvmlCallsPerGpuPerPoll"), "; ".join(parts))))
EOF
)
    record "health:checks" "${verdict%%$'\t'*}" "${verdict#*$'\t'}"
  else
    record "health:checks" FAIL "gpu-agent health: $(head -c 200 "$out/health.err")"
  fi
else
  record "health:checks" SKIP "this build has no gpu-agent health (the polled checks are not built yet)"
fi

# DRA: the ResourceSlices the node's GPUs make, against nvidia-smi.
if ours "$agent" dra slices "${agent_args[@]}" -o json >"$out/dra-slices.json" 2>"$out/dra-slices.err"; then
  verdict=$(python3 - "$out/dra-slices.json" "$out/smi-query.csv" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
smi = [[f.strip() for f in l.split(", ")] for l in open(sys.argv[2]) if l.strip()]
devices = [dev for s in d.get("items", []) for dev in s["spec"].get("devices", [])]
gpus = [dev for dev in devices if dev["attributes"].get("type", {}).get("string") == "gpu"]
uuids = sorted(dev["attributes"]["uuid"]["string"] for dev in gpus)
problems = []
if uuids != sorted(s[1] for s in smi):
    problems.append("GPU uuids %s, nvidia-smi %s" % (uuids, sorted(s[1] for s in smi)))
for dev in gpus:
    s = next((s for s in smi if s[1] == dev["attributes"]["uuid"]["string"]), None)
    if s and dev["attributes"].get("productName", {}).get("string") != s[2]:
        problems.append("%s productName %r" % (dev["name"], dev["attributes"].get("productName")))
    mem = dev.get("capacity", {}).get("memory", {}).get("value")
    # A binary quantity in MiB ("32Gi" is 32768), as the API server writes it.
    units = {"Mi": 1, "Gi": 1024, "Ti": 1024 ** 2, "Pi": 1024 ** 3}
    mib = (int(mem[:-2]) * units[mem[-2:]]
           if isinstance(mem, str) and mem[-2:] in units and mem[:-2].isdigit() else None)
    if s and (mib is None or str(mib) != s[3]):
        problems.append("%s memory %s, nvidia-smi %s MiB" % (dev["name"], mem, s[3]))
first = gpus[0] if gpus else {}
print(("FAIL\t" + "; ".join(problems)) if problems else
      ("PASS\t%d slice(s), %d device(s); %s: %s" % (
          len(d.get("items", [])), len(devices), first.get("name"),
          ", ".join("%s=%s" % (k.split("/")[-1], list(v.values())[0])
                    for k, v in sorted(first.get("attributes", {}).items())
                    if k != "uuid"))))
EOF
)
  record dra:slices "${verdict%%$'\t'*}" "${verdict#*$'\t'}"
else
  record dra:slices FAIL "gpu-agent dra slices: $(head -c 200 "$out/dra-slices.err")"
fi

# DRA prepare of one claim end to end: the agent in DRA mode (the API server
# stand-in holding one claim of the first GPU, the kubelet's DRA side from
# kubelet-sim), NodePrepareResources, the claim's CDI spec naming the GPU's
# device node and every node and host path in it present, then
# NodeUnprepareResources removing the spec.
dra_device=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
g = [x["name"] for s in d.get("items", []) for x in s["spec"].get("devices", [])
     if x["attributes"].get("type", {}).get("string") == "gpu"]
print(g[0] if g else "")' "$out/dra-slices.json" 2>/dev/null || true)
if [ -z "$dra_device" ]; then
  record dra:prepare FAIL "no GPU in the slices dra slices printed"
else
  d=$work/dra
  mkdir -p "$d/registry" "$d/plugins" "$d/cdi" "$d/spec"
  dra_driver=gpu.gpu-agent.github.io
  dra_claim=default/gpu-check/6c1d7a52-gpu-check
  start_ours "$bin/apiserver-stub" gpu-check-node --claim "$dra_claim" "$dra_driver" "$dra_device" \
    >"$d/api.log" 2>&1
  api=$!
  pids+=("$api")
  ok=1
  why=""
  wait_for "$d/api.log" "serving" 10 || { ok=0; why="the API server stand-in did not start"; }
  url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$d/api.log")
  if [ $ok = 1 ]; then
    start_ours "$agent" run --mode dra --node-name gpu-check-node --proxy="$url" "${agent_args[@]}" \
      "${plugin_args[@]}" --dra-registry-dir "$d/registry" --dra-plugin-dir "$d/plugins" \
      --cdi-spec-dir "$d/cdi" --metrics-address "" --log-format json >"$d/agent.log" 2>&1
    ag=$!
    pids+=("$ag")
    if ! ours "$bin/kubelet-sim" dra "$d/registry" "$dra_driver" prepare "$dra_claim" \
      >"$d/prepare.log" 2>&1; then
      ok=0
      why="prepare: $(grep -v '^$' "$d/prepare.log" | tail -1 | head -c 200)"
    fi
    cp "$d"/cdi/*claim_* "$d/spec/" 2>/dev/null || true
    if [ $ok = 1 ] && ! ours "$bin/kubelet-sim" dra "$d/registry" "$dra_driver" unprepare "$dra_claim" \
      >"$d/unprepare.log" 2>&1; then
      ok=0
      why="unprepare: $(tail -1 "$d/unprepare.log" | head -c 200)"
    fi
    left=$(find "$d/cdi" -name '*claim_*' | wc -l)
    stop "$ag"
  fi
  stop "$api"
  for f in api.log agent.log prepare.log unprepare.log; do
    [ -f "$d/$f" ] && cp "$d/$f" "$out/dra-$f"
  done
  cp "$d"/spec/* "$out/" 2>/dev/null || true
  if [ $ok = 0 ]; then
    record dra:prepare FAIL "$why (see $out/dra-*.log)"
  else
    verdict=$(python3 - "$d" "$dra_device" "$out/dra-slices.json" "$left" <<'EOF'
import glob, json, os, re, sys
d, device, slices, left = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log = open(d + "/prepare.log").read()
m = re.search(r"device (\S+) cdi (\S+)", log)
problems = []
if not m or m.group(1) != device:
    problems.append("prepare answered %s" % (m.group(0) if m else "no device"))
ids = m.group(2).split(",") if m else []
specs = {}
for f in glob.glob(d + "/spec/*"):
    spec = json.load(open(f))
    for dev in spec.get("devices", []):
        specs["%s=%s" % (spec["kind"], dev["name"])] = (spec.get("containerEdits", {}), dev)
missing = [i for i in ids if i not in specs]
if not ids or missing:
    problems.append("CDI ids %s not in the claim's spec" % (missing or "none"))
minor = next((x["attributes"].get("minor", {}).get("int")
              for s in json.load(open(slices))["items"] for x in s["spec"]["devices"]
              if x["name"] == device), None)
nodes, absent = [], []
for i in ids:
    if i not in specs:
        continue
    for e in (specs[i][0], specs[i][1].get("containerEdits", {})):
        for node in e.get("deviceNodes", []):
            nodes.append(node["path"])
            if not os.path.exists(node.get("hostPath", node["path"])):
                absent.append(node.get("hostPath", node["path"]))
        for mnt in e.get("mounts", []):
            if not os.path.exists(mnt["hostPath"]):
                absent.append(mnt["hostPath"])
if minor is not None and "/dev/nvidia%d" % minor not in nodes:
    problems.append("the spec lacks /dev/nvidia%d (has %s)" % (minor, ", ".join(sorted(set(nodes)))))
if absent:
    problems.append("spec names what this host lacks: " + ", ".join(sorted(set(absent))[:5]))
if left:
    problems.append("%d claim spec(s) left after unprepare" % left)
print(("FAIL\t" + "; ".join(problems)) if problems else
      ("PASS\t%s prepared as %s: %d device node(s) present (%s), unprepare removed its spec" % (
          device, ",".join(ids), len(set(nodes)), ", ".join(sorted(set(nodes))))))
EOF
)
    record dra:prepare "${verdict%%$'\t'*}" "${verdict#*$'\t'}"
  fi
fi

# 5. The container-like run: the host-driver DaemonSet's args, env and
#    mounts, in a root holding only the binary and what ldd says it needs;
#    the driver root (the host's /, or the stand-in's folder) at /driver-root.
container_check() {
  local spec=$1 c=$work/container rootfs host
  rootfs=$c/rootfs
  mkdir -p "$rootfs/usr/bin" "$rootfs/proc" "$rootfs/tmp" "$c/kubelet"
  cp "$agent" "$rootfs/usr/bin/gpu-agent"
  # The system's libraries where they are; a packed folder's in /usr/lib,
  # which the loader always searches.
  ours ldd "$agent" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r l; do
    local to=$l
    [ -n "$ourlibs" ] && [ "$(dirname "$l")" = "$ourlibs" ] && to=/usr/lib/$(basename "$l")
    mkdir -p "$rootfs$(dirname "$to")"
    cp -L "$l" "$rootfs$to"
    # The C library's package brings its companions, which NVML needs
    # (libdl, libpthread, librt): the image's libc6 has them.
    if [ "$(basename "$l")" = libc.so.6 ]; then
      for x in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6 libresolv.so.2; do
        [ -e "$(dirname "$l")/$x" ] && cp -L "$(dirname "$l")/$x" "$rootfs$(dirname "$l")/"
      done
    fi
  done
  if [ "$standin" = 1 ]; then
    host=$c/host
    mkdir -p "$host/usr/lib64" "$host/dev"
    cp -L "$nvml_dir/libnvidia-ml.so.1" "$host/usr/lib64/"
    ours ldd "$nvml_dir/libnvidia-ml.so.1" | awk '/libyaml-cpp/ {print $3}' | xargs -r cp -L -t "$host/usr/lib64/"
    cp "$fixture" "$host/fixture.yaml"
    for i in $(seq 0 $((gpus - 1))); do : >"$host/dev/nvidia$i"; done
    : >"$host/dev/nvidiactl"
    : >"$host/dev/nvidia-uvm"
  else
    host=""
  fi
  local mounts="" kind a b mode hostpath
  while read -r kind a b mode; do
    case $kind in
      host)
        hostpath=$host$a
        [ "$a" = /var/lib/kubelet/device-plugins ] && hostpath=$c/kubelet
        [ -n "$host" ] && mkdir -p "$hostpath"
        mkdir -p "$rootfs$b"
        mounts+="mount --rbind $hostpath $rootfs$b; "
        [ "$mode" = ro ] && mounts+="mount -o remount,bind,ro $rootfs$b; "
        ;;
      file) install -D -m 0644 "$spec/cm-$(basename "$a")" "$rootfs$a" ;;
    esac
  done <"$spec/mounts"
  start_ours "$bin/kubelet-sim" "$c/kubelet" --allocate 1 --exit-after-updates 1 >"$c/sim.log" 2>&1
  local sim=$!
  pids+=("$sim")
  wait_for "$c/sim.log" serving 10 || { record container-like FAIL "kubelet simulator did not start"; return; }
  local fx=""
  [ "$standin" = 1 ] && fx="FAKE_NVML_FIXTURE=/driver-root/fixture.yaml"
  unshare --mount --net --propagation private -- sh -c "
    ${mounts}
    mount -t proc proc $rootfs/proc
    exec env -i $(cat "$spec/env") $fx $(command -v chroot) $rootfs /usr/bin/gpu-agent $(cat "$spec/args") --pass-device-specs
  " >"$c/agent.log" 2>&1 &
  local ag=$!
  pids+=("$ag")
  local ok=1 why=""
  wait_for "$c/sim.log" "plugin registered" 30 || { ok=0; why="did not register from inside the root"; }
  [ $ok = 1 ] && { wait_for "$c/sim.log" "Allocate 1 -> " 20 || { ok=0; why="no Allocate answer"; }; }
  stop "$ag"
  stop "$sim"
  cp "$c/agent.log" "$out/container.agent.log"
  cp "$c/sim.log" "$out/container.sim.log"
  if [ $ok = 1 ] && ! grep -q "Allocate 1 -> OK" "$c/sim.log"; then ok=0; why="Allocate failed"; fi
  if [ $ok = 1 ] && grep "Allocate 1 -> OK" "$c/sim.log" | grep -q 'host_path: "/driver-root'; then
    ok=0
    why="Allocate names a path inside the container"
  fi
  if [ $ok = 1 ]; then
    local lib
    lib=$(grep -o 'nvml=[^ ]*' "$c/agent.log" | head -1 | cut -d= -f2 || true)
    record container-like PASS "registered from the DaemonSet's root; NVML at ${lib:-?}; Allocate names $(grep 'Allocate 1 -> OK' "$c/sim.log" | grep -o 'host_path: "[^"]*"' | cut -d'"' -f2 | sort -u | tr '\n' ' ')"
  else
    record container-like FAIL "$why (see $out/container.*.log)"
  fi
  for m in $(awk -v w="$c" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}
if [ "$(id -u)" -ne 0 ]; then
  record container-like SKIP "needs root (unshare --mount, chroot)"
else
  spec=$bin/daemonset
  if [ ! -f "$spec/mounts" ]; then
    spec=$work/daemonset
    mkdir -p "$spec"
    if command -v kubectl >/dev/null &&
      kubectl kustomize manifests/plugin/host-driver >"$spec/render.yaml" 2>/dev/null; then
      python3 tests/packaging/daemonset_spec.py "$spec/render.yaml" "$spec"
    fi
  fi
  if [ -f "$spec/mounts" ]; then
    container_check "$spec"
  else
    record container-like SKIP "no kubectl to render manifests/plugin/host-driver, and no packed render"
  fi
fi

# 6. Idle footprint and start -> registered, as scripts/bench.sh measures them.
if [ -x "$bin/bench/e2e_bench" ]; then
  GPU_AGENT_BINARY=$agent ours "$bin/bench/e2e_bench" --real-nvml --gpus "$gpus" \
    --idle-seconds "${GPU_CHECK_IDLE_SECONDS:-10}" --runs 1 --allocates 10000 \
    >"$out/footprint.txt" 2>&1 || true
  fig() { grep -F "| $1 |" "$out/footprint.txt" | head -1 | awk -F'|' '{gsub(/^ +| +$/, "", $3); print $3}'; }
  if [ -n "$(fig 'start -> registered, p50')" ]; then
    record footprint PASS "$(nproc) cores: start->registered p50 $(fig 'start -> registered, p50'), idle RssAnon $(fig 'idle RssAnon'), PSS $(fig 'idle PSS'), peak $(fig 'idle peak (VmHWM)'), threads $(fig 'idle threads'), wake-ups $(fig 'idle wake-ups (context switches, all threads) per second')"
  else
    record footprint FAIL "e2e_bench --real-nvml: $(tail -c 200 "$out/footprint.txt")"
  fi
else
  record footprint SKIP "no bench/e2e_bench in $bin"
fi

# 7. Every NVML answer the agent uses, as a stand-in fixture; the stand-in
#    loaded with it must give the same `gpu-agent devices` as the driver.
capture=$out/nvml-capture.yaml
if ours "$bin/nvml-capture" --sysfs-root "$sysfs" "$capture" >"$out/capture.log" 2>&1; then
  # Named as tests/fixtures/nvml keeps a real driver's: GPU, count, driver.
  slug=$(head -1 "$out/smi-query.csv" | awk -F', ' '{print $3}' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9.-')
  cp "$capture" "$out/real-${slug}-x${gpus}-driver-${driver}.yaml"
  if ours "$bin/fake-nvml-tool" check "$capture" >>"$out/capture.log" 2>&1; then
    ours "$bin/fake-nvml-tool" sysfs "$capture" "$work/capture-sys" >/dev/null
    LD_LIBRARY_PATH="${ourlibs}${ourlibs:+:}$bin/fake-nvml" FAKE_NVML_FIXTURE=$capture \
      "$agent" devices --sysfs-root "$work/capture-sys" -o json >"$out/devices-standin.json" 2>&1 || true
    if diff -u "$out/devices.json" "$out/devices-standin.json" >"$out/devices-standin.diff"; then
      record nvml-capture PASS "$(grep -c '^#   nvml' "$capture") answers captured; the stand-in loaded with them gives the same devices"
    else
      record nvml-capture FAIL "the stand-in with the capture differs from the driver: $(grep '^[-+] ' "$out/devices-standin.diff" | head -4 | tr '\n' ' ')"
    fi
    # The health report too: each check's state, and its value but where it
    # moves by the second (temperature, clock events).
    if [ -s "$out/health.json" ]; then
      LD_LIBRARY_PATH="${ourlibs}${ourlibs:+:}$bin/fake-nvml" FAKE_NVML_FIXTURE=$capture \
        "$agent" health --sysfs-root "$work/capture-sys" -o json >"$out/health-standin.json" 2>&1 || true
      verdict=$(python3 - "$out/health.json" "$out/health-standin.json" <<'EOF'
import json, sys
try:
    real, standin = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except ValueError as e:
    print("FAIL\tno health report from the stand-in: %s" % e)
    sys.exit()
moving = {"temperature", "clockEvents"}
diffs, n = [], 0
for g, h in zip(real.get("gpus", []), standin.get("gpus", [])):
    theirs = {c["check"]: c for c in h.get("checks", [])}
    for c in g.get("checks", []):
        n += 1
        o = theirs.get(c["check"], {})
        if o.get("state") != c.get("state") or (
                c["check"] not in moving and o.get("value") != c.get("value")):
            diffs.append("GPU%s %s: driver %s %r, stand-in %s %r" % (
                g.get("index"), c["check"], c.get("state"), c.get("value"), o.get("state"),
                o.get("value")))
print(("FAIL\t" + "; ".join(diffs[:4])) if diffs else
      ("PASS\t%d checks: the stand-in loaded with the capture judges each as the driver did" % n))
EOF
)
      record health-capture "${verdict%%$'\t'*}" "${verdict#*$'\t'}"
    fi
  else
    record nvml-capture FAIL "the capture is not a valid fixture: $(tail -1 "$out/capture.log")"
  fi
else
  record nvml-capture FAIL "nvml-capture: $(tail -c 200 "$out/capture.log")"
fi

# The table as JSON, and the verdict.
python3 - "$results" "$out/results.json" <<'EOF'
import json, sys
rows = [l.rstrip("\n").split("\t", 2) for l in open(sys.argv[1]) if l.strip()]
json.dump([{"check": c, "result": r, "figure": f} for c, r, f in rows], open(sys.argv[2], "w"), indent=1)
EOF
failed=$(awk -F'\t' '$2 == "FAIL"' "$results" | wc -l)
echo "gpu-check: $(wc -l <"$results") checks, $failed failed; table and logs in $out"
[ "$failed" -eq 0 ]
