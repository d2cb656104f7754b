#!/bin/bash
# One agent that moves the real 1.36 node live between plugin and DRA mode when the node's
# label nvidia.com/device-plugin.config changes (plugin <-> dra), inside the kubelet's mount
# namespace (the device-plugin socket path is fixed there), 8-GPU NVML stand-in. The configs
# are /tmp/modern/agent/configs/{plugin,dra}; every other setting is a flag as in
# run-plugin-agent.sh and run-dra-agent.sh (no --mode: the config names it).
# In that namespace /var/lib/kubelet holds only device-plugins/; the kubelet's root, with
# pod-resources/, is /tmp/modern/kubelet there as on the host.
# Usage: docs/handover-notes/run-live-agent.sh BUILD_DIR [AGENT FLAGS...]
#   (pid /tmp/modern/agent-plugin.pid, so that stop.sh stops it; log /tmp/modern/agent-live.log, appended)
set -euo pipefail
B=$(cd "${1:-build}" && pwd); W=/tmp/modern/agent; R=/tmp/modern
fixture=$(cd "$(dirname "$0")/../.." && pwd)/tests/fixtures/nvml/8-gpu-nvlink.yaml
mkdir -p $W/configs
printf 'version: v1\nmode: plugin\nresourceName: nvidia.com/gpu\n' > $W/configs/plugin
printf 'version: v1\nmode: dra\ndra:\n  driverName: gpu.gpu-agent.github.io\n' > $W/configs/dra
setsid nohup nsenter -t "$(cat $R/mntns.pid)" -m -- env LD_LIBRARY_PATH=$B/fake-nvml FAKE_NVML_FIXTURE=$fixture \
  FAKE_NVML_CONTROL=$W/nvml-live.ctl "$B/gpu-agent" run --node-config-dir $W/configs --node-config-default plugin \
  --node-name gpu-node-1 --kubeconfig "$HOME/peers/modern/kubeconfig" \
  --pod-resources-socket $R/kubelet/pod-resources/kubelet.sock \
  --sysfs-root "$W/sys" --device-list-strategy cdi-cri --cdi-spec-dir $R/cdi --nvidia-cdi-hook-path "" \
  --dev-root "$W/dev" --nvidia-driver-root "$W/driver" \
  --dra-registry-dir $R/kubelet/plugins_registry --dra-plugin-dir $R/kubelet/plugins \
  "${@:2}" >> $R/agent-live.log 2>&1 < /dev/null &
echo $! > $R/agent-plugin.pid
