#!/bin/bash
# DRA-mode agent on the real 1.36 node (host process, 8-GPU NVML stand-in).
# Usage: [FIXTURE=2-gpu-mig.yaml] [AGENT_WORK=DIR] docs/handover-notes/run-dra-agent.sh BUILD_DIR [AGENT FLAGS...]
# (pid /tmp/modern/agent-dra.pid, log /tmp/modern/agent-dra.log)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); W=${AGENT_WORK:-/tmp/modern/agent}; R=/tmp/modern
fixture=$(cd "$(dirname "$0")/../.." && pwd)/tests/fixtures/nvml/${FIXTURE:-8-gpu-nvlink.yaml}
rm -f $R/agent-dra.log  # a wait on the log never reads an earlier agent's lines
LD_LIBRARY_PATH=$B/fake-nvml FAKE_NVML_FIXTURE=$fixture FAKE_NVML_CONTROL=$W/nvml-dra.ctl \
  setsid nohup "$B/gpu-agent" run --mode dra --node-name gpu-node-1 --kubeconfig "$HOME/peers/modern/kubeconfig" \
  --sysfs-root "$W/sys" --dra-registry-dir $R/kubelet/plugins_registry --dra-plugin-dir $R/kubelet/plugins \
  --cdi-spec-dir $R/cdi --nvidia-cdi-hook-path "" --dev-root "$W/dev" --nvidia-driver-root "$W/driver" \
  "${@:2}" > $R/agent-dra.log 2>&1 < /dev/null &
echo $! > $R/agent-dra.pid
