#!/usr/bin/env bash
# Installs what is missing, builds, and runs gpu-agent on this machine with
# the test doubles standing in for the GPUs (the libnvidia-ml stand-in), the
# kubelet (the kubelet simulator, and its DRA side) and the API server (the
# API server stand-in): plugin, static and DRA mode. Leaves nothing behind,
# also on Ctrl-C.
#
# Several runs at once do not meet: each has its own folder, sockets and
# ports. A run killed with SIGKILL cannot clean up; the next run does: it
# stops the processes that run started and removes its folder.
#   DEMO_SKIP_SETUP=1   use the binaries already built (for the tests)
#   DEMO_BUILD_DIR=DIR  where they are (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${DEMO_SKIP_SETUP:-0}" != 1 ]; then
  ./scripts/install-deps.sh
  cmake -S . -B "${DEMO_BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "${DEMO_BUILD_DIR:-build}" -j "$(nproc)" --target gpu-agent fake_nvml fake-nvml-tool kubelet-sim apiserver-stub
fi

build=$(cd "${DEMO_BUILD_DIR:-build}" && pwd)
tmp_root=${TMPDIR:-/tmp}
# Leftovers of killed runs: a folder whose demo.pid names no live demo.
for old in "$tmp_root"/gpu-agent-demo.*; do
  [ -d "$old" ] || continue
  owner=$(cat "$old/demo.pid" 2>/dev/null || true)
  if [ -n "$owner" ] && tr '\0' ' ' <"/proc/$owner/cmdline" 2>/dev/null | grep -q "demo.sh"; then
    continue  # a run in progress
  fi
  while read -r child; do
    # Only a process that run started: it carries the run's marker.
    if tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "GPU_AGENT_DEMO_RUN=$old"; then
      kill -TERM "$child" 2>/dev/null || true
    fi
  done < <(cat "$old/children" 2>/dev/null || true)
  rm -rf "$old"
  echo "demo: cleaned up after an earlier run that was killed ($old)"
done

# The folder appears under its scanned name only once it names its owner, so a
# run starting beside this one never takes it for a killed run's leftovers.
starting=$(mktemp -d "$tmp_root/.gpu-agent-demo-starting.XXXXXX")
echo $$ >"$starting/demo.pid"
work="$tmp_root/gpu-agent-demo.${starting##*.}"
mv -T "$starting" "$work"
export GPU_AGENT_DEMO_RUN="$work"
pids=()
started() {  # started PID: stopped on exit, or by the next run if this one is killed
  pids+=("$1")
  echo "$1" >>"$work/children"
}
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fixture=tests/fixtures/nvml/8-gpu-nvlink.yaml
"$build"/fake-nvml-tool sysfs "$fixture" "$work/sys"
export LD_LIBRARY_PATH="$build/fake-nvml" FAKE_NVML_FIXTURE="$PWD/$fixture"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
wait_for() {  # wait_for FILE PATTERN: until the pattern shows in the file (20 s at most)
  for _ in $(seq 1 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "demo: timed out waiting for '$2' in $1" >&2
  return 1
}

step "1. The GPUs NVML reports (the stand-in, loaded through dlopen; fixture $fixture)"
"$build"/gpu-agent devices --sysfs-root "$work/sys"

step "2. The effective config of config/time-slicing.yaml, and where each value came from"
# sed, not head: sed reads to the end, while head's early exit would leave
# the agent writing into a closed pipe (SIGPIPE, and pipefail ends the demo).
MIG_STRATEGY=none "$build"/gpu-agent config --config config/time-slicing.yaml --device-id-strategy index | sed -n 1,24p

step "3. A config mistake is reported with file:line:column"
printf 'version: v1\nflags:\n  migStrategy: singel\n' >"$work/bad.yaml"
"$build"/gpu-agent config --config "$work/bad.yaml" || echo "(exit code $?)"

step "4. Plugin mode: a kubelet simulator, then the agent; it registers and streams 8 GPUs"
mkdir -p "$work/kubelet"
"$build"/kubelet-sim "$work/kubelet" --allocate 2 >"$work/sim.log" 2>&1 &
started $!
wait_for "$work/sim.log" "serving"
FAKE_NVML_CONTROL="$work/nvml.ctl" "$build"/gpu-agent run --kubelet-socket "$work/kubelet/kubelet.sock" \
  --sysfs-root "$work/sys" --health-recovery-period 2s >"$work/agent.log" 2>&1 &
agent=$!
started $agent
wait_for "$work/sim.log" "Allocate 2"
sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g' "$work/sim.log"

step "5. XID 79 (GPU fell off the bus) injected on GPU 3: the kubelet sees it Unhealthy"
echo "xid 3 79" >"$work/nvml.ctl"
wait_for "$work/sim.log" "update 2"
grep "update 2" "$work/sim.log" | sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g'

step "6. Off the bus needs a reset: once GPU 3 is reset, and after the 2 s quiet period, it is Healthy again"
echo "reset 3" >"$work/nvml.ctl"
wait_for "$work/sim.log" "update 3"
grep "update 3" "$work/sim.log" | sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g'

step "7. SIGTERM: streams finished, socket removed, exit code 0"
kill -TERM "$agent"
rc=0
wait "$agent" || rc=$?
echo "agent exit code $rc; sockets left in the kubelet folder: $(find "$work/kubelet" -name 'nvidia-gpu.sock' | wc -l)"
echo "--- agent log"
cat "$work/agent.log"

step "8. Static mode: the agent keeps nvidia.com/gpu in a Node's capacity (API server stand-in via a proxy URL)"
"$build"/apiserver-stub demo-node >"$work/api.log" 2>&1 &
api=$!
started $api
wait_for "$work/api.log" "serving"
url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$work/api.log")
"$build"/gpu-agent run --mode static --node-name demo-node --proxy="$url" --sysfs-root "$work/sys" \
  >"$work/static.log" 2>&1 &
static=$!
started $static
wait_for "$work/static.log" "node capacity set"
"$build"/gpu-agent capacity get --proxy="$url" --node demo-node

step "9. The kubelet re-registers the node and zeroes the value; the agent repairs it from the watch"
kill -USR1 "$api"
wait_for "$work/static.log" "repairing"
wait_for "$work/static.log" "was=.\?nvidia.com/gpu=0"
grep -E "drifted|was=.?nvidia.com/gpu=0" "$work/static.log" | cut -c1-160
"$build"/gpu-agent capacity get --proxy="$url" --node demo-node
kill -TERM "$static"
wait "$static" || true

step "10. By hand: gpu-agent capacity set through the proxy (first --dry-run, then for real)"
"$build"/gpu-agent capacity set --proxy="$url" --node demo-node --count 4 --dry-run
"$build"/gpu-agent capacity set --proxy="$url" --node demo-node --count 4
"$build"/gpu-agent capacity get --proxy="$url" --node demo-node -o json

step "11. DRA mode: a ResourceClaim allocated GPU 0 (gpu-0000-06-00-0, its PCI address); the kubelet stand-in prepares it, then unprepares it"
driver=gpu.gpu-agent.github.io
claim=default/demo-claim/3f1c0e2a-demo
mkdir -p "$work/dra-registry" "$work/dra-plugins" "$work/cdi" "$work/dev/dev" \
  "$work/driver/usr/lib/x86_64-linux-gnu"
# The CDI spec names device nodes and driver libraries: empty stand-ins of
# the ones it must find (the GPUs' nodes, libnvidia-ml and libcuda).
for i in $(seq 0 7); do : >"$work/dev/dev/nvidia$i"; done
: >"$work/dev/dev/nvidiactl"
version=$(sed -n 's/^driverVersion: "\(.*\)"/\1/p' "$fixture")
for lib in libnvidia-ml.so libcuda.so; do : >"$work/driver/usr/lib/x86_64-linux-gnu/$lib.$version"; done
"$build"/apiserver-stub demo-node --claim "$claim" "$driver" gpu-0000-06-00-0 >"$work/dra-api.log" 2>&1 &
dra_api=$!
started $dra_api
wait_for "$work/dra-api.log" "serving"
url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$work/dra-api.log")
grep "ResourceClaim" "$work/dra-api.log"
"$build"/gpu-agent run --mode dra --node-name demo-node --proxy="$url" --sysfs-root "$work/sys" \
  --dra-registry-dir "$work/dra-registry" --dra-plugin-dir "$work/dra-plugins" \
  --cdi-spec-dir "$work/cdi" --nvidia-cdi-hook-path "" --dev-root "$work/dev" \
  --nvidia-driver-root "$work/driver" >"$work/dra.log" 2>&1 &
dra=$!
started $dra
"$build"/kubelet-sim dra "$work/dra-registry" "$driver" prepare "$claim"
spec=$(find "$work/cdi" -name '*-claim_*.json')
echo "CDI spec written: ${spec#"$work/"}"
grep -E '"(kind|name|path)"' "$spec"
"$build"/kubelet-sim dra "$work/dra-registry" "$driver" unprepare "$claim"
echo "claim specs left in the CDI folder: $(find "$work/cdi" -name '*-claim_*.json' | wc -l)"
kill -TERM "$dra"
wait "$dra" || true

step "Summary"
echo "Plugin mode: gpu-agent found 8 GPUs and their NVLink topology through the NVML stand-in,"
echo "registered with the kubelet simulator, answered Allocate, reported an XID as Unhealthy, brought"
echo "the GPU back, and shut down cleanly. Static mode: it wrote nvidia.com/gpu=8 into the Node and"
echo "repaired a kubelet zeroing from the watch. By hand: capacity set sent the documented PATCH."
echo "DRA mode: it registered with the DRA kubelet stand-in, prepared a claim of gpu-0000-06-00-0 as a CDI"
echo "device with its own spec file, and removed that spec when the claim was unprepared."
echo "The temp folder and every process are cleaned up on exit."
