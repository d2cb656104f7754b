#!/bin/bash
# The live agent started with a PodResources socket that does not exist, two holders running,
# relabelled to dra: what it offers and says; then started again with the right socket.
# Usage: docs/handover-notes/podresources-unreadable.sh BUILD_DIR
set -uo pipefail
B=$1; R=/tmp/modern; H=$(cd "$(dirname "$0")" && pwd)
K() { $HOME/peers/modern/bin/kubectl --kubeconfig $HOME/peers/modern/kubeconfig "$@"; }
slices() { K get resourceslices --field-selector spec.nodeName=gpu-node-1 -o json | python3 -c '
import json,sys
for s in json.load(sys.stdin)["items"]:
  for d in s["spec"].get("devices",[]): print(" ", d["name"], d["attributes"].get("uuid",{}).get("string"))'; }
cond() { K get node gpu-node-1 -o jsonpath='{range .status.conditions[?(@.type=="GpuAgentMode")]}{.status} {.reason}: {.message}{"\n"}{end}'; }
off=$(stat -c %s $R/agent-live.log)
$H/run-live-agent.sh $B --metrics-address 127.0.0.1:19400 --pod-resources-socket $R/kubelet/pod-resources/missing.sock
until [ "$(K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ]; do sleep 0.3; done
for p in holder-a-u holder-b-u; do
  K run $p --image=docker.io/local/busybox:1 --restart=Never --overrides='{"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":"docker.io/local/busybox:1","command":["sleep","3600"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}'
done
K wait --for=condition=Ready pod/holder-a-u pod/holder-b-u --timeout=90s
$B/podresources-list $R/kubelet/pod-resources/kubelet.sock
echo "== $(date -u +%T.%3N) relabel dra"; K label node gpu-node-1 nvidia.com/device-plugin.config=dra --overwrite; sleep 6
echo "== log"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"
echo "== slices:"; slices; cond; echo "== readyz: $(curl -s http://127.0.0.1:19400/readyz)"
curl -s http://127.0.0.1:19400/metrics | grep '^gpu_agent_handover'
echo "== $(date -u +%T.%3N) SIGTERM, start again with the right socket"; p=$(cat $R/agent-plugin.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.1; done
off=$(stat -c %s $R/agent-live.log); $H/run-live-agent.sh $B --metrics-address 127.0.0.1:19400; sleep 4
tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"; echo "== slices:"; slices; cond
K delete pod holder-a-u holder-b-u --wait=false; sleep 6; echo "== after the holders:"; slices; cond
