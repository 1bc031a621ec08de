#!/usr/bin/env bash
# What vram costs while nothing happens (issue 22, item 1): over 10 s, an
# idle vramd with a GPU and no client, an idle `vram run` supervisor
# without vramd, and one that holds its command's grant with vramd (the
# holder thread of src/ledger/job.c, as the Slurm plugin's is, which
# test_slurm measures in slurmstepd) each use under 0.1 s of CPU and wake a
# bounded number of times. vramd's timer ticks 20 times a second and its
# NVML thread reads once a second; the holder reports 5 times a second; a
# supervisor alone reads NVML's figure for its command 5 times a second
# (what the driver holds for processes that escaped the interposer). A thread that spins (a timed wait
# whose deadline is always past) takes a whole core and is preempted
# hundreds of times a second.
set -u
build=${1:?usage: test_idle.sh BUILD_DIR}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
# ThreadSanitizer's runtime has a thread of its own that wakes ten times a
# second in every process: its cost, not vram's.
grep -q '^VRAM_SANITIZE:STRING=.*thread' "$build/CMakeCache.txt" 2>/dev/null &&
  skip "a ThreadSanitizer build (its runtime's own thread wakes every 100 ms)"
daemon_test idle "$build"

"$vramd" --socket "$S" --state "$tmp/state" --log info >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "vramd starts" wait_for 10 test -S "$S"
VRAM_DAEMON=off "$vram" run --limit 1GiB -- sleep 14 >"$tmp/alone.out" 2>&1 &
alone=$!
check "vram run (no vramd) started its command" eval "command_of $alone >/dev/null"
sleep 1   # past the start-up of both
idle_cost "idle vramd" "/proc/$daemon_pid" 10 500 >"$tmp/vramd.cost" &
idle_cost "idle vram run, no vramd" "/proc/$alone" 10 100 >"$tmp/alone.cost"
wait $!
cat "$tmp/vramd.cost" "$tmp/alone.cost"
# The checks ran in subshells: count them here.
for f in "$tmp/vramd.cost" "$tmp/alone.cost"; do
  n=$(grep -c '^FAIL' "$f"); failures=$((failures + n))
  passed=$((passed + 2 - n))
done
wait $alone
check "the command ran to its end" test $? = 0

"$vram" run --limit 1GiB -- sleep 14 >"$tmp/job.out" 2>&1 &
job=$!
check "vram run (with vramd) started its command" eval "command_of $job >/dev/null"
check "and holds its grant" wait_for 5 sh -c "'$vram' status --json | grep -q '\"role\":\"job\"'"
sleep 1
idle_cost "idle vram run holding a grant" "/proc/$job" 10 100
wait $job
check "the command ran to its end" test $? = 0
check "vramd never said NVML stalled" sh -c "! grep -q 'NVML has not answered' '$tmp/daemon.out'"

echo "test_idle: $passed passed, $failures failed"
[ $failures = 0 ]
