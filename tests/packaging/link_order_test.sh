#!/usr/bin/env bash
# gpu-agent is laid out by src/agent/link_order.txt (CMakeLists.txt,
# GPU_AGENT_LINK_ORDER), and the file still names the code:
# - most of the functions it names are in the binary: when the code has moved
#   on so far that a tenth of them are gone, scripts/link-order.sh must write
#   it again;
# - read in the file's order, the names keep landing past all the ones before
#   them (each function the project compiled has a section of its own, each
#   Debian archive object one for all its functions): in a link that ignored
#   the file that happens a few dozen times at most, here for more than a
#   quarter of them.
#   link_order_test.sh GPU_AGENT ORDER_FILE
set -euo pipefail
binary=$1
order=$2
# Addresses are compared as text: nm writes them as hex of one width.
nm --defined-only "$binary" | awk -v order="$order" '
  FNR == NR { if (NF == 3) addr[$3] = $1; next }
  /^#/ || NF == 0 { next }
  {
    listed++
    if ($1 in addr) {
      found++
      if (addr[$1] "" > highest "") { highest = addr[$1] ""; beyond++ }
    }
  }
  END {
    printf "link_order_test: %d of %d names in the binary, %d laid out past the ones before\n",
           found, listed, beyond
    if (listed == 0 || found < 0.9 * listed) {
      print "link_order_test: the code has moved on from " order "; run scripts/link-order.sh"
      exit 1
    }
    if (beyond < 0.25 * found) {
      print "link_order_test: the binary is not laid out by " order
      exit 1
    }
  }' - "$order"
