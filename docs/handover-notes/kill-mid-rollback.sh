#!/bin/bash
# SIGKILL the live agent DELAY s after the node is relabelled dra -> plugin while pod `dpod` holds
# a DRA claim (nvidia.com/gpu: 1 through the extended-resource class); restart it (label still
# plugin): the claim's GPU must stay out of the device plugin (streamed unhealthy) until the claim
# is unprepared. Usage: docs/handover-notes/kill-mid-rollback.sh BUILD_DIR DELAY
set -uo pipefail
B=$1; D=$2; R=/tmp/modern; H=$(cd "$(dirname "$0")" && pwd)
K() { $HOME/peers/modern/bin/kubectl --kubeconfig $HOME/peers/modern/kubeconfig "$@"; }
alloc() { K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
cond() { K get node gpu-node-1 -o jsonpath='{range .status.conditions[?(@.type=="GpuAgentMode")]}{.status} {.reason}: {.message}{"\n"}{end}'; }
nslices() { K get resourceslices --field-selector spec.nodeName=gpu-node-1 -o json | python3 -c 'import json,sys; print(sum(len(s["spec"].get("devices",[])) for s in json.load(sys.stdin)["items"]))'; }
K label node gpu-node-1 nvidia.com/device-plugin.config=dra --overwrite
until [ "$(nslices)" = 8 ]; do sleep 0.2; done; sleep 1
K run dpod --image=docker.io/local/busybox:1 --restart=Never --overrides='{"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":"docker.io/local/busybox:1","command":["sleep","3600"],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}'
K wait --for=condition=Ready pod/dpod --timeout=90s
echo "== PodResources"; $B/podresources-list $R/kubelet/pod-resources/kubelet.sock
off=$(stat -c %s $R/agent-live.log); pid=$(cat $R/agent-plugin.pid)
echo "== $(date -u +%T.%3N) relabel plugin; SIGKILL in $D s"
K label node gpu-node-1 nvidia.com/device-plugin.config=plugin --overwrite; sleep $D; kill -9 $pid
echo "== $(date -u +%T.%3N) killed $pid; log until the kill:"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"
echo "== checkpoint claims"; python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d)[:600])' $R/kubelet/plugins/gpu.gpu-agent.github.io/checkpoint.json 2>&1
echo "== slices $(nslices); allocatable $(alloc)"; cond
off=$(stat -c %s $R/agent-live.log)
echo "== $(date -u +%T.%3N) restart"; $H/run-live-agent.sh $B --metrics-address 127.0.0.1:19400
sleep 3; echo "== log after the restart"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off"
echo "== readyz: $(curl -s http://127.0.0.1:19400/readyz)"; cond
for i in $(seq 1 60); do a=$(alloc); [ "$a" = 7 ] && break; sleep 0.5; done; echo "== $(date -u +%T.%3N) allocatable $a"
echo "== $(date -u +%T.%3N) dpod deleted"; K delete pod dpod --wait=false
for i in $(seq 1 100); do a=$(alloc); [ "$a" = 8 ] && break; sleep 0.2; done; echo "== $(date -u +%T.%3N) allocatable $a"
tail -c +$((off+1)) $R/agent-live.log | grep -v "health check off" | tail -4; cond
