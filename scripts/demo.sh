#!/usr/bin/env bash
# Installs what is missing, builds, and runs gpu-agent on this machine with
# the test doubles standing in for the GPUs (the libnvidia-ml stand-in) and
# the kubelet (the kubelet simulator). Leaves nothing behind, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target gpu-agent fake_nvml fake-nvml-tool kubelet-sim

work=$(mktemp -d /tmp/gpu-agent-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fixture=tests/fixtures/nvml/8-gpu-nvlink.yaml
./build/fake-nvml-tool sysfs "$fixture" "$work/sys"
export LD_LIBRARY_PATH="$PWD/build/fake-nvml" FAKE_NVML_FIXTURE="$PWD/$fixture"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
wait_for() {  # wait_for FILE PATTERN: until the pattern shows in the file (20 s at most)
  for _ in $(seq 1 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "demo: timed out waiting for '$2' in $1" >&2
  return 1
}

step "1. The GPUs NVML reports (the stand-in, loaded through dlopen; fixture $fixture)"
./build/gpu-agent devices --sysfs-root "$work/sys"

step "2. The effective config of config/time-slicing.yaml, and where each value came from"
MIG_STRATEGY=none ./build/gpu-agent config --config config/time-slicing.yaml --device-id-strategy index | head -n 24

step "3. A config mistake is reported with file:line:column"
printf 'version: v1\nflags:\n  migStrategy: singel\n' >"$work/bad.yaml"
./build/gpu-agent config --config "$work/bad.yaml" || echo "(exit code $?)"

step "4. Plugin mode: a kubelet simulator, then the agent; it registers and streams 8 GPUs"
mkdir -p "$work/kubelet"
./build/kubelet-sim "$work/kubelet" --allocate 2 >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for "$work/sim.log" "serving"
FAKE_NVML_CONTROL="$work/nvml.ctl" ./build/gpu-agent run --kubelet-socket "$work/kubelet/kubelet.sock" \
  --sysfs-root "$work/sys" --health-recovery-period 2s >"$work/agent.log" 2>&1 &
agent=$!
pids+=($agent)
wait_for "$work/sim.log" "Allocate 2"
sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g' "$work/sim.log"

step "5. XID 79 (GPU fell off the bus) injected on GPU 3: the kubelet sees it Unhealthy"
echo "xid 3 79" >"$work/nvml.ctl"
wait_for "$work/sim.log" "update 2"
grep "update 2" "$work/sim.log" | sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g'

step "6. After the 2 s quiet period, with NVML answering for it, GPU 3 is Healthy again"
wait_for "$work/sim.log" "update 3"
grep "update 3" "$work/sim.log" | sed -e 's/GPU-\([0-9a-f]\{8\}\)[0-9a-f-]*/GPU-\1…/g'

step "7. SIGTERM: streams finished, socket removed, exit code 0"
kill -TERM "$agent"
rc=0
wait "$agent" || rc=$?
echo "agent exit code $rc; sockets left in the kubelet folder: $(find "$work/kubelet" -name 'nvidia-gpu.sock' | wc -l)"
echo "--- agent log"
cat "$work/agent.log"

step "Summary"
echo "gpu-agent found 8 GPUs and their NVLink topology through the NVML stand-in, registered with"
echo "the kubelet simulator, answered Allocate, reported an XID as Unhealthy and brought the GPU"
echo "back, and shut down cleanly. The temp folder and every process are cleaned up on exit."
