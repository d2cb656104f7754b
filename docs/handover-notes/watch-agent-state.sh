#!/bin/bash
# Every 0.5 s: the live agent's /readyz text, its handover metric and the Node's GpuAgentMode
# condition, each line stamped, printed only when something changed.
# Usage: docs/handover-notes/watch-agent-state.sh ADDRESS (e.g. 127.0.0.1:19400)
K() { $HOME/peers/modern/bin/kubectl --kubeconfig $HOME/peers/modern/kubeconfig "$@"; }
last=
while true; do
  now="readyz: $(curl -s -m 2 -w ' [%{http_code}]' http://$1/readyz | tr '\n' ' ')
metric: $(curl -s -m 2 http://$1/metrics | grep '^gpu_agent_handover_gpus_held' | tr '\n' ' ')
condition: $(K get node gpu-node-1 -o jsonpath='{range .status.conditions[?(@.type=="GpuAgentMode")]}{.status} {.reason}: {.message}{end}')"
  [ "$now" != "$last" ] && { echo "== $(date -u +%T.%3N)"; echo "$now"; last=$now; }
  sleep 0.5
done
