#!/usr/bin/env bash
# A process of a `vram run` command that clears LD_PRELOAD and VRAM_COMMAND
# is not held to the budget (no interposer can); under vramd its usage, seen
# by NVML, is the command's: the job is OVER in `vram status`, and vram
# run's end-of-run line says what vramd saw beyond the budget (issue 22
# item 18); also when it left the process tree (issue 26 item 10).
set -u
build=${1:?usage: test_unheld.sh BUILD_DIR MEMBER}
member=${2:?}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
daemon_test unheld "$build"
G=$((1 << 30))
printf 'reconcile-every 100ms\nover-margin 0\n' >"$tmp/policy"
"$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" --log info \
  >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
wait_for 10 "$vram" status >/dev/null 2>&1 || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start"; exit 1; }

# The child holds 8 GiB under a 4 GiB budget until told to stop.
"$vram" run --limit 4GiB --job unheld -- \
  env -u LD_PRELOAD -u VRAM_COMMAND "$member" hold $((8 * G)) 30 "$tmp/stop" \
  >"$tmp/out" 2>"$tmp/err" &
run=$!
check "the process outside the interposer takes 8 GiB" wait_for 10 grep -q HELD "$tmp/out"
check "vram status shows the job over its budget" wait_for 10 sh -c \
  "'$vram' status --json | grep -q '\"role\":\"job\",\"command\":\"[^\"]*\",\"job\":\"unheld\",\"budget\":$((4 * G)),.*\"over_budget\":true'"
# vramd says it in answer to a REPORT, at least once a second.
sleep 2
touch "$tmp/stop"
wait $run
check "vram run's end-of-run line says what vramd saw" contains "$tmp/err" \
  "vram: GPU 0 (GPU-[^)]*): vramd saw the command's processes use 8.[0-9]* GiB by NVML, over its budget of 4.00 GiB"
check "and says why the peak does not show it" contains "$tmp/err" "cleared LD_PRELOAD or VRAM_COMMAND"
# Issue 26 item 10: one that also leaves its parents (a new session, a
# double fork) is still the command's. vram run is its command's subreaper
# (issue 26 item 1), so the orphan comes to it rather than to init; vramd
# also finds it by what it inherited from vram run (test_ledger's unit test
# of that match holds it where no parent leads back).
"$vram" run --limit 4GiB --job escaped -- sh -c "
  env -u LD_PRELOAD -u VRAM_COMMAND setsid sh -c '\"$member\" hold $((8 * G)) 30 \"$tmp/stop2\" >\"$tmp/out2\" &'
  while [ ! -e '$tmp/stop2' ]; do sleep 0.1; done" >"$tmp/run2" 2>"$tmp/err2" &
run2=$!
check "the escaped process takes 8 GiB" wait_for 10 grep -q HELD "$tmp/out2"
escaped=$(pgrep -f "hold $((8 * G)) 30 $tmp/stop2" | head -1)
check "found" sh -c "[ -n '$escaped' ]"
check "  re-parented to vram run, its subreaper, not to init" \
  sh -c "[ \"\$(ps -o ppid= -p '$escaped' | tr -d ' ')\" = '$run2' ]"
check "vram status: its memory is the job's, over its budget, not its user's unseen" wait_for 10 sh -c \
  "'$vram' status --json | grep -q '\"role\":\"job\",\"command\":\"[^\"]*\",\"job\":\"escaped\",\"budget\":$((4 * G)),.*\"over_budget\":true'"
check "and not unseen" sh -c "! '$vram' status --json | grep -q '\"unseen\":\\[{.*\"pid\":$escaped,'"
touch "$tmp/stop2"
wait $run2
kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
daemon_pid=
echo "test_unheld: $passed passed, $failures failed"
[ $failures = 0 ]
