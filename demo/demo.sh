#!/usr/bin/env bash
# The seeds' scenario on one simulated 12 GiB GPU: three training jobs that,
# like TensorFlow by default, take all the memory they may at start. Each
# job's CUDA context takes 518 MiB of the GPU, as on an H100 (sim/config.h).
#   1. jobs written with libvram: without limits, then with 28% each (libvram
#      limits its heap; the context comes beside it);
#   2. unmodified CUDA programs: alone, then under `vram run --fraction 0.33`,
#      whose budget covers the context: what NVML shows for each job (as
#      nvidia-smi would) stays within it, and each says its peak;
#   3. the same programs under one vramd whose policy gives each a third, with
#      a fourth job that waits for memory; ends with the `vram top` screen.
set -u
build=${1:?usage: demo.sh BUILD_DIR}
export LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VRAM_SIM_DEVICES=12GiB
unset VRAM_SIM_CONTEXT_SIZE      # the profile's: 518 MiB per context
export VRAM_SIM_DIR=$(mktemp -d /tmp/vram-demo.XXXXXX)
export VRAM_ALLOW_GROWTH=false   # reserve everything at start, as TensorFlow does
daemon=
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; rm -rf "$VRAM_SIM_DIR"' EXIT
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION VRAM_VIRTUAL_DEVICES VRAM_VISIBLE_DEVICES LD_PRELOAD

gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }

# run_scenario TITLE BUDGET-HEADER PEAK-HEADER COMMAND...   (the job's name and steps are appended)
# With SHOW_PROCESSES=1, also NVML's figure for each job while they run.
run_scenario() {
  local title=$1 h1=$2 h2=$3 out
  shift 3
  out=$(mktemp -d)
  echo
  echo "== $title"
  for job in A B C; do
    "$@" "$job" 25 >"$out/$job" 2>"$out/$job.err" &
    sleep 0.3
  done
  echo "device occupancy while the jobs run:"
  for i in 1 2 3 4 5; do
    printf '  t=%.1fs  ' "$(awk -v i="$i" 'BEGIN { print 0.6 + i * 0.5 }')"
    "$build/vram" devices --brief
    [ "$i" = 1 ] && "$build/vram" devices >"$out/processes"
    sleep 0.5
  done
  if [ -n "${SHOW_PROCESSES:-}" ]; then
    echo "what NVML shows each job holds at t=1.1s (vram devices, as nvidia-smi shows it per process):"
    awk '/^GPU +PID/ { p = 1; next } p && NF >= 7 { printf "  job %s (pid %s): %s %s\n", $(NF - 1), $2, $4, $5 }' \
      "$out/processes" | sort
  fi
  wait
  printf '\n  %-4s %-16s %-16s %s\n' job "$h1" "$h2" result
  for job in A B C; do
    read -r _ name budget peak result <"$out/$job" || { name=$job budget=0 peak=0 result="crashed"; }
    printf '  %-4s %-16s %-16s %s\n' "$name" "$(gib "$budget")" "$(gib "$peak")" "$result"
  done
  for job in A B C; do
    if [ -s "$out/$job.err" ]; then
      echo "  job $job said:"
      fold -s -w 74 "$out/$job.err" | sed 's/^/    /'
    fi
  done
  rm -rf "$out"
}

echo "One simulated GPU of 12 GiB; three jobs, each needing about 3.3 GiB at its peak,"
echo "and 518 MiB more for its CUDA context, as on an H100."
echo
echo "## 1. Jobs written with libvram"
run_scenario "without vram limits: the first job takes the whole GPU" budget peak \
  "$build/vram-demo-job"
# libvram's limit is its heap's: each job's context comes beside it, so a
# third each plus three contexts would pass 12 GiB; 28% each leaves room.
VRAM_MEMORY_FRACTION=0.28 run_scenario "with VRAM_MEMORY_FRACTION=0.28: 28% of the GPU each, its context beside it" \
  budget peak "$build/vram-demo-job"

echo
echo "## 2. Unmodified CUDA programs that take all the memory the driver reports free"
run_scenario "alone: the first program takes the whole GPU" "device it saw" "it took" \
  "$build/vram-demo-grab"
SHOW_PROCESSES=1 run_scenario \
  "under vram run --fraction 0.33: each sees a third as its device, its context inside it" \
  "device it saw" "it took" "$build/vram" run --fraction 0.33 -- "$build/vram-demo-grab"

echo
echo "## 3. One vramd for the node: the policy gives each job a third; a fourth job waits"
policy=$VRAM_SIM_DIR/policy.conf
printf 'default-budget 33%%\nwhen-full wait 2m\nreconcile-every 200ms\n' >"$policy"
echo "policy: $(tr '\n' ';' <"$policy" | sed 's/;$//; s/;/; /g')"
export VRAM_DAEMON=$VRAM_SIM_DIR/vramd.sock
"$build/vramd" --socket "$VRAM_DAEMON" --policy "$policy" --log error &
daemon=$!
for i in $(seq 50); do [ -S "$VRAM_DAEMON" ] && break; sleep 0.1; done
out=$(mktemp -d)
for job in A B C; do
  "$build/vram" run --wait -- "$build/vram-demo-grab" "$job" 25 >"$out/$job" 2>"$out/$job.err" &
  sleep 0.3
done
"$build/vram" run --wait -- "$build/vram-demo-grab" D 5 >"$out/D" 2>"$out/D.err" &
# Until D is in the queue (a moment; longer on a busy or sanitized build).
for i in $(seq 200); do
  "$build/vram" status --json 2>/dev/null | grep -q '"waiting_for":[1-9]' && break
  sleep 0.1
done
COLUMNS=80 "$build/vram" top --once >"$out/top"
wait $(jobs -p | grep -v "^$daemon\$")
printf '\n  %-4s %-16s %-16s %s\n' job "device it saw" "it took" result
for job in A B C D; do
  read -r _ name budget peak result <"$out/$job" || { name=$job budget=0 peak=0 result="crashed"; }
  printf '  %-4s %-16s %-16s %s\n' "$name" "$(gib "$budget")" "$(gib "$peak")" "$result"
done
echo "  (D asked for memory while A, B and C held the GPU, waited, and ran when A ended)"
for job in A B C D; do
  echo "  job $job said:"
  sed 's/^/    /' "$out/$job.err"
done
echo
echo "vram top, while A, B and C ran and D waited:"
echo
sed 's/^/  /' "$out/top"
rm -rf "$out"
