#!/bin/bash
# SIGKILL the live agent (run-live-agent.sh) DELAY seconds after the node is relabelled
# plugin -> dra while two device-plugin pods hold GPUs; restart it (the label still says dra);
# show the handover record, the slices' devices against the held UUIDs, the GpuAgentMode
# condition and the agent's log; then the holders end and the slices grow to 8.
# Usage: docs/handover-notes/kill-mid-switch.sh BUILD_DIR DELAY TAG
set -uo pipefail
B=$1; D=$2; T=$3; R=/tmp/modern; H=$(cd "$(dirname "$0")" && pwd)
K() { $HOME/peers/modern/bin/kubectl --kubeconfig $HOME/peers/modern/kubeconfig "$@"; }
slices() { K get resourceslices --field-selector spec.nodeName=gpu-node-1 -o json | python3 -c '
import json,sys
for s in json.load(sys.stdin)["items"]:
  for d in s["spec"].get("devices",[]): print(" ", d["name"], d["attributes"].get("uuid",{}).get("string"))'; }
cond() { K get node gpu-node-1 -o jsonpath='{range .status.conditions[?(@.type=="GpuAgentMode")]}{.status} {.reason}: {.message}{"\n"}{end}'; }
until [ "$(K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ]; do sleep 0.2; done
for p in holder-a-$T holder-b-$T; do
  K run $p --image=docker.io/local/busybox:1 --restart=Never --overrides='{"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":"docker.io/local/busybox:1","command":["sleep","3600"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}'
done
K wait --for=condition=Ready pod/holder-a-$T pod/holder-b-$T --timeout=90s
echo "== PodResources before"; $B/podresources-list $R/kubelet/pod-resources/kubelet.sock
off=$(stat -c %s $R/agent-live.log); pid=$(cat $R/agent-plugin.pid)
echo "== $(date -u +%T.%3N) relabel dra; SIGKILL in $D s"
K label node gpu-node-1 nvidia.com/device-plugin.config=dra --overwrite; sleep $D; kill -9 $pid
echo "== $(date -u +%T.%3N) killed $pid; log until the kill:"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"
echo "== record"; ls -l $R/kubelet/plugins/gpu.gpu-agent.github.io/; cat $R/kubelet/plugins/gpu.gpu-agent.github.io/handover 2>&1; echo
echo "== slices after the kill"; slices; echo "== condition"; cond
echo "== allocatable: $(K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')"
off=$(stat -c %s $R/agent-live.log)
echo "== $(date -u +%T.%3N) restart"; $H/run-live-agent.sh $B
for i in $(seq 1 50); do grep -q "publishing ResourceSlices" <(tail -c +$((off+1)) $R/agent-live.log) && break; sleep 0.2; done; sleep 2
echo "== log after the restart"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"
echo "== slices after the restart"; slices; echo "== condition"; cond
echo "== PodResources"; $B/podresources-list $R/kubelet/pod-resources/kubelet.sock
K get pods -o wide
echo "== $(date -u +%T.%3N) holders deleted"; K delete pod holder-a-$T holder-b-$T --wait=false
for i in $(seq 1 100); do [ "$(slices | wc -l)" = 8 ] && break; sleep 0.2; done
echo "== $(date -u +%T.%3N) slices:"; slices; cond
echo "== record"; ls $R/kubelet/plugins/gpu.gpu-agent.github.io/
