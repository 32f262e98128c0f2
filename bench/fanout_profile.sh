#!/usr/bin/env bash
# The profile of a cluster step: kvactor_fanout_probe's round trips (raw TCP, local
# actor hops, the middleman to another process behind the guarded transport) under each setting
# given, both processes alike. See bench/fanout_probe.cpp for what each line times.
#   usage: bench/fanout_profile.sh PROBE_BINARY [ROUNDS] [-- SETTINGS ...]
#   e.g.   bench/fanout_profile.sh build/bin/kvactor_fanout_probe 2000 -- "" "--mm-workers 0"
# Each SETTINGS word is one variant (an empty word: as kvactor runs).
set -euo pipefail
probe=${1:?usage: fanout_profile.sh PROBE_BINARY [ROUNDS] [-- SETTINGS ...]}
shift
rounds=2000
if [[ $# -gt 0 && $1 != -- ]]; then
  rounds=$1
  shift
fi
[[ ${1:-} == -- ]] && shift
variants=("$@")
[[ ${#variants[@]} -eq 0 ]] && variants=("")
dir=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; rm -rf "$dir"' EXIT
for v in "${variants[@]}"; do
  # shellcheck disable=SC2086 # each variant is a list of flags
  exec 3> >("$probe" serve $v >"$dir/serve.txt" 2>&1)
  for _ in $(seq 1 200); do
    grep -q '^probe: caf' "$dir/serve.txt" 2>/dev/null && break
    sleep 0.05
  done
  read -r _ _ caf_port _ tcp_port <"$dir/serve.txt"
  echo "== settings: ${v:-as kvactor runs}"
  # shellcheck disable=SC2086
  "$probe" ping 127.0.0.1 "$caf_port" "$tcp_port" --rounds "$rounds" $v
  exec 3>&- # the server ends when its stdin closes
  sleep 0.2
done
