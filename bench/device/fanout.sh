#!/usr/bin/env bash
# On the lent GPU machine's 16 cores, in one device call: the step fan-out of cluster
# mode (steps on the step channel, and through the middleman as the baseline) beside local mode at
# 2x1, 2x2 and 8x1 (bench/cluster_fanout.sh, REPEATS runs of each mode), then
# the profile of one step's pieces (bench/fanout_profile.sh) as kvactor runs and with the
# middleman deserializing on its multiplexer. FANOUT_PROFILE=0 leaves the profile out;
# FANOUT_LAYOUTS picks the layouts (default "2x1 2x2 8x1"); FANOUT_HOT=1 adds a run of each with
# every core kept busy at the lowest priority, FANOUT_SPIN_US=N one with --step-spin-us N (below).
# Every local and channel run keeps its step marks (cluster_fanout.sh's FANOUT_STEP_TIMES), so the
# logs say where each step's time goes; OUT/step_times_LAYOUT[_HEAT].json has the last run's.
# FANOUT_AB=NAME instead sets a second packed build, bin/NAME (e.g. a copy of the kvactor before a
# change), beside kvactor: bench/fanout_ab.sh runs REPEATS pairs of the two on each layout.
#   here:   bash bench/pack_for_device.sh -z build/bin/kvactor build/bin/kvactor_fanout_probe
#   device: bash bench/device.sh "$OUT" fanout[=REPEATS]   (carry: [".devpack.tar.xz"])
# shellcheck source=bench/device/prelude.sh
source "$(dirname "$0")/prelude.sh" "$@"
repeats=${2:-5}
# The packed binaries need their libraries: the scripts call them through run.sh (exec keeps
# the pid, so the scripts can kill what they start).
for bin in kvactor kvactor_fanout_probe; do
  printf '#!/usr/bin/env bash\nexec bash %s/.devpack/run.sh %s "$@"\n' "$PWD" "$bin" >"$out/$bin"
  chmod +x "$out/$bin"
done
# FANOUT_HOT=1 runs every layout a second time with a nice-19 busy loop on each core: the idle
# cores then stay out of deep sleep states, so the difference is what waking a sleeping core costs
# the step path's hand-overs between threads.
hot=()
hot_loops() {
  for _ in $(seq 1 "$(nproc)"); do
    nice -n 19 bash -c 'while :; do :; done' &
    hot+=($!)
  done
}
start=$SECONDS
if [ -n "${FANOUT_AB:-}" ]; then
  printf '#!/usr/bin/env bash\nexec bash %s/.devpack/run.sh %s "$@"\n' "$PWD" "$FANOUT_AB" \
    >"$out/$FANOUT_AB"
  chmod +x "$out/$FANOUT_AB"
  for layout in ${FANOUT_LAYOUTS:-2x2 8x1}; do
    model=kvactor-tiny
    [ "$layout" = 8x1 ] && model=llama-3.1-8b
    timeout 280 bash bench/fanout_ab.sh "$out/$FANOUT_AB" "$out/kvactor" "$repeats" "$layout" \
      "$out/ab_$layout" "$model" 2>&1 | tee "$dest/fanout_ab_$layout.txt"
    echo "---- fanout_ab $layout done at $((SECONDS - start)) s"
  done
  exit 0
fi
# FANOUT_SPIN_US=N adds a run of each with the step channel's threads spinning N us
# (--step-spin-us) on idle cores.
for heat in cold ${FANOUT_HOT:+hot} ${FANOUT_SPIN_US:+spin}; do
  [ "$heat" = hot ] && hot_loops
  for layout in ${FANOUT_LAYOUTS:-2x1 2x2 8x1}; do
    model=kvactor-tiny
    [ "$layout" = 8x1 ] && model=llama-3.1-8b
    name=fanout_$layout
    [ "$heat" != cold ] && name=fanout_${layout}_$heat
    spin=
    [ "$heat" = spin ] && spin=$FANOUT_SPIN_US
    FANOUT_SPIN_US=$spin FANOUT_STEP_TIMES=$out/marks_$name timeout 240 \
      bash bench/cluster_fanout.sh "$out/kvactor" "$repeats" "$dest/$name.json" "$layout" "$model" \
      2>&1 | tee "$out/$name.log"
    for mode in local cluster; do
      cp "$out/marks_$name/${mode}_$repeats.json" "$dest/step_times_${name#fanout_}_$mode.json" 2>/dev/null
    done
    echo "---- $name done at $((SECONDS - start)) s"
  done
  [ "$heat" = hot ] && { kill "${hot[@]}"; wait "${hot[@]}" 2>/dev/null; }
done
if [ "${FANOUT_PROFILE:-1}" = 1 ]; then
  timeout 120 bash bench/fanout_profile.sh "$out/kvactor_fanout_probe" 2000 -- "" "--mm-workers 0" \
    2>&1 | tee "$out/profile.log"
fi
echo "---- fanout device run: $((SECONDS - start)) s"
