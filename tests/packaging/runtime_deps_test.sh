#!/usr/bin/env bash
# Checks that the Dockerfile's runtime stage installs a package for every
# shared library `ldd gpu-agent` needs (no Docker engine runs here).
# Packages every debian:12-slim image already has are allowed without listing.
set -euo pipefail
binary=$1
dockerfile=$2
base="libc6 libgcc-s1 libstdc++6 zlib1g"
listed=$(sed -n '/runtime-packages-begin/,/runtime-packages-end/p' "$dockerfile" |
  tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(RUN|apt-get|update|install|rm|y|no|rf|runtime-packages-begin|runtime-packages-end)$' || true)
missing=()
needed=" ca-certificates "
for lib in $(ldd "$binary" | awk '/=>/ {print $3}'); do
  pkg=""
  for path in "$lib" "/usr$lib" "$(readlink -f "$lib")" "/usr$(readlink -f "$lib")"; do
    if out=$(dpkg -S "$path" 2>/dev/null); then pkg=${out%%:*}; break; fi
  done
  if [ -z "$pkg" ]; then echo "no Debian package owns $lib"; exit 1; fi
  needed+="$pkg "
  case " $base $(echo $listed) " in
    *" $pkg "*) ;;
    *) missing+=("$pkg ($lib)") ;;
  esac
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "the Dockerfile runtime stage lacks: ${missing[*]}"
  exit 1
fi
# Nothing more either: gRPC, Protobuf, Abseil and yaml-cpp are linked in.
extra=()
for pkg in $listed; do
  case "$needed" in *" $pkg "*) ;; *) extra+=("$pkg") ;; esac
done
if [ ${#extra[@]} -gt 0 ]; then
  echo "the Dockerfile runtime stage installs packages the binary does not need: ${extra[*]}"
  exit 1
fi
echo "runtime stage covers every library of $binary, and nothing more"
