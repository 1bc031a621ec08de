#!/usr/bin/env bash
# The seeds' scenario on one simulated 12 GiB GPU: three training jobs that,
# like TensorFlow by default, reserve all the memory they may at start.
# First without limits, then with a third of the GPU each.
set -u
build=${1:?usage: demo.sh BUILD_DIR}
export LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VRAM_SIM_DEVICES=12GiB
export VRAM_SIM_DIR=$(mktemp -d /tmp/vram-demo.XXXXXX)
export VRAM_ALLOW_GROWTH=false   # reserve everything at start, as TensorFlow does
trap 'rm -rf "$VRAM_SIM_DIR"' EXIT
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION VRAM_VIRTUAL_DEVICES VRAM_VISIBLE_DEVICES

gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

run_scenario() {
  local title=$1 out
  out=$(mktemp -d)
  echo
  echo "== $title"
  for job in A B C; do
    "$build/vram-demo-job" "$job" 25 >"$out/$job" 2>"$out/$job.err" &
    sleep 0.3
  done
  echo "device occupancy while the jobs run:"
  for i in 1 2 3 4 5; do
    printf '  t=%.1fs  ' "$(awk -v i="$i" 'BEGIN { print 0.6 + i * 0.5 }')"
    "$build/vram" devices --brief
    sleep 0.5
  done
  wait
  printf '\n  %-4s %-12s %-12s %s\n' job budget peak result
  for job in A B C; do
    read -r _ name budget peak result <"$out/$job" || { name=$job budget=0 peak=0 result="crashed"; }
    printf '  %-4s %-12s %-12s %s\n' "$name" "$(gib "$budget")" "$(gib "$peak")" "$result"
  done
  for job in A B C; do
    if [ -s "$out/$job.err" ]; then
      echo "  job $job said:"
      fold -s -w 74 "$out/$job.err" | sed 's/^/    /'

    fi
  done
  rm -rf "$out"
}

echo "One simulated GPU of 12 GiB; three jobs, each needing about 3.5 GiB at its peak."
run_scenario "without vram limits: the first job takes the whole GPU"
VRAM_MEMORY_FRACTION=0.33 run_scenario "with VRAM_MEMORY_FRACTION=0.33: a third of the GPU each"
