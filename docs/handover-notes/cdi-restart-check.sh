#!/bin/bash
# Does a device-plugin pod's container that restarts AFTER the plugin agent
# stopped still start? With cdi-cri the kubelet hands the runtime the CDI
# names from its checkpointed Allocate answer; the runtime must find them in a
# spec file, which the plugin agent removes when it stops.
# Usage: docs/handover-notes/cdi-restart-check.sh BUILD_DIR   (real node up, no agent running)
set -euo pipefail
B=${1:-build}; HERE=$(cd "$(dirname "$0")" && pwd)
export KUBECONFIG=$HOME/peers/modern/kubeconfig; K=$HOME/peers/modern/bin/kubectl
"$HERE/run-plugin-agent.sh" "$B"
for i in $(seq 100); do [ "$($K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ] && break; sleep 0.3; done
$K apply -f - <<'EOP'
apiVersion: v1
kind: Pod
metadata: {name: restarter}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: docker.io/local/busybox:1
    command: ["sh", "-c", "date; ls /dev/nvidia*; sleep 8; exit 1"]
    resources: {limits: {nvidia.com/gpu: 1}}
EOP
$K wait --for=condition=Ready pod/restarter --timeout=60s
echo "CDI specs before: $(ls /tmp/modern/cdi)"
kill -TERM "$(cat /tmp/modern/agent-plugin.pid)"; sleep 1
echo "CDI specs after the plugin agent stopped: $(ls /tmp/modern/cdi)"
sleep 30
$K get pod restarter -o wide
$K get pod restarter -o jsonpath='{range .status.containerStatuses[*]}{.restartCount} {.state}{" last="}{.lastState}{"\n"}{end}'
$K get events --field-selector involvedObject.name=restarter -o custom-columns=TIME:.lastTimestamp,REASON:.reason,MSG:.message | tail -8
$K delete pod restarter --wait=true
