#!/bin/bash
# A holder's container that restarts AFTER the live switch to dra: the live agent
# (run-live-agent.sh, plugin mode, allocatable 8) serves pod `restarter` (restartPolicy
# OnFailure, exits 1 after 12 s); the node is relabelled `dra`; the container exits and the
# kubelet starts it again with the CDI names cached from Allocate, which the plugin mode's spec
# (kept at the switch) must still define. Nothing is copied back by hand.
# Usage: docs/handover-notes/live2-cdi-restart.sh   (then relabel to plugin)
set -uo pipefail
R=/tmp/modern
K() { $HOME/peers/modern/bin/kubectl --kubeconfig $HOME/peers/modern/kubeconfig "$@"; }
until [ "$(K get node gpu-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 8 ]; do sleep 0.2; done
K apply -f - <<'EOP'
apiVersion: v1
kind: Pod
metadata: {name: restarter}
spec:
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: docker.io/local/busybox:1
    command: ["sh", "-c", "date; ls /dev/nvidia*; sleep 12; exit 1"]
    resources: {limits: {nvidia.com/gpu: 1}}
EOP
K wait --for=condition=Ready pod/restarter --timeout=60s
echo "== CDI specs in plugin mode: $(ls $R/cdi)"
off=$(stat -c %s $R/agent-live.log)
echo "== $(date -u +%T.%3N) relabel dra"
K label node gpu-node-1 nvidia.com/device-plugin.config=dra --overwrite
sleep 2; echo "== $(date -u +%T.%3N) CDI specs after the switch: $(ls $R/cdi)"
for i in $(seq 1 150); do
  [ "$(K get pod restarter -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] 2>/dev/null &&
    [ "$(K get pod restarter -o jsonpath='{.status.containerStatuses[0].ready}')" = true ] && break
  sleep 0.2
done
echo "== $(date -u +%T.%3N) pod"
K get pod restarter -o wide
K get pod restarter -o jsonpath='{range .status.containerStatuses[*]}{.restartCount} {.state}{" last="}{.lastState}{"\n"}{end}'
echo "== the restarted container's output"; K logs restarter
echo "== events"; K get events --field-selector involvedObject.name=restarter -o custom-columns=TIME:.lastTimestamp,REASON:.reason,MSG:.message | tail -8
echo "== agent log from the relabel"; tail -c +$((off+1)) $R/agent-live.log | grep -v "health check"
echo "== CDI specs now: $(ls $R/cdi)"
K delete pod restarter --wait=true
