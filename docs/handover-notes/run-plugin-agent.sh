#!/bin/bash
# Plugin-mode agent on the real 1.36 node, inside the kubelet's mount namespace
# (the device-plugin socket path is fixed), 8-GPU NVML stand-in, devices passed
# as CDI devices in the CRI (cdi-cri).
# Usage: docs/handover-notes/run-plugin-agent.sh BUILD_DIR   (pid /tmp/modern/agent-plugin.pid, log /tmp/modern/agent-plugin.log)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); W=/tmp/modern/agent; R=/tmp/modern
fixture=$(cd "$(dirname "$0")/../.." && pwd)/tests/fixtures/nvml/8-gpu-nvlink.yaml
rm -f $R/agent-plugin.log
setsid nohup nsenter -t "$(cat $R/mntns.pid)" -m -- env LD_LIBRARY_PATH=$B/fake-nvml FAKE_NVML_FIXTURE=$fixture \
  FAKE_NVML_CONTROL=$W/nvml-plugin.ctl "$B/gpu-agent" run --mode plugin --sysfs-root "$W/sys" \
  --device-list-strategy cdi-cri --cdi-spec-dir $R/cdi --nvidia-cdi-hook-path "" --dev-root "$W/dev" \
  --nvidia-driver-root "$W/driver" "${@:2}" > $R/agent-plugin.log 2>&1 < /dev/null &
echo $! > $R/agent-plugin.pid
