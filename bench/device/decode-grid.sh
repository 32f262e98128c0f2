#!/usr/bin/env bash
# The decode kernel's grid for small batches, measured in one device call. kvactor_attention_bench runs the decode cases (1x4096, 1x512: the 8B step's
# attention, 32x4096, 128x4096) with each grid in turn, REPEATS rounds in alternating order:
# the planned splits and fixed ones (DECODE_SPLITS, default "16 22 28"). DECODE_AB=NAME adds a
# second packed build of the benchmark (bin/NAME, e.g. the one before a change; it must take
# --cases KEY$, as current builds do) as "before". Then kvactor_graph_bench
# --quick (the 8B decode step) when it is packed, and the same with DECODE_AB's graph bench
# (bin/NAME_graph) beside it. The rounds stop after DECODE_BUDGET_S seconds (420), so that the
# call ends within the device's 600 s.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor_attention_bench \
#             build/bin/kvactor_graph_bench [before builds]
#   device: bash bench/device.sh "$OUT" decode-grid[=REPEATS]   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
repeats=${2:-2}
# Not their FP8 cases unless DECODE_CASES names them (e.g. decode128x4096_fp8$).
cases=${DECODE_CASES:-'decode1x4096$,decode1x512$,decode32x4096$,decode128x4096$'}
start=$SECONDS
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/gpu.txt"
grids=("planned")
for s in ${DECODE_SPLITS:-16 22 28}; do grids+=("splits:$s"); done
[ -n "${DECODE_AB:-}" ] && grids=("before" "${grids[@]}")
# One run of the benchmark with grid $1 (before | planned | splits:N) into $2.
bench_grid() {
  local bin=kvactor_attention_bench args=()
  [ "$1" = before ] && bin=$DECODE_AB
  [[ $1 == splits:* ]] && args+=(--decode-splits "${1#*:}")
  timeout 60 bash .devpack/run.sh "$bin" --cases "$cases" --replays 300 "${args[@]}" \
    --out "$2.json" >"$2.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || echo "exit $rc"
  # "[ 1/4] decode 1x4096 32/8   20.96 us (p10 ...": the case and its median
  sed -nE 's/^\[[ 0-9\/]+\] (.{38}) *([0-9.]+) us \(p10.*/\1 \2/p' "$2.log" | sed -E 's/ +/ /g'
}
for ((r = 1; r <= repeats; ++r)); do
  order=("${grids[@]}")
  ((r % 2 == 0)) && mapfile -t order < <(printf '%s\n' "${grids[@]}" | tac)
  for g in "${order[@]}"; do
    ((SECONDS - start > ${DECODE_BUDGET_S:-420})) && break 2 # leave the graph bench its time
    echo "round $r, $g: $(bench_grid "$g" "$out/${g/:/_s}.$r" | tr '\n' ';')"
  done
done
for bin in "${DECODE_AB:+${DECODE_AB}_graph}" kvactor_graph_bench; do
  if [ -z "$bin" ] || [ ! -x ".devpack/bin/$bin" ]; then continue; fi
  timeout 60 bash .devpack/run.sh "$bin" --quick >"$out/$bin.log" 2>&1
  echo "$bin:"
  tail -n 12 "$out/$bin.log"
done
echo "---- decode grid device run: $((SECONDS - start)) s"
