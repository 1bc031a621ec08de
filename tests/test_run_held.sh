#!/usr/bin/env bash
# Under vramd, a vram run command whose GPUs nothing chose (no --devices, no
# CUDA_VISIBLE_DEVICES) holds a grant on every GPU for its whole life: vram
# run says so at the start, with the remedy (issue 22 item 8).
set -u
build=${1:?usage: test_run_held.sh BUILD_DIR}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
daemon_test run-gpus "$build"
export VRAM_SIM_DEVICES=12GiB,12GiB
unset CUDA_VISIBLE_DEVICES
printf 'default-budget 2GiB\nwhen-full fail\n' >"$tmp/policy"
"$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
wait_for 10 "$vram" status >/dev/null 2>&1 || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start"; exit 1; }

"$vram" run --limit 4GiB -- "$grab" A 1 1 >"$tmp/out" 2>"$tmp/err"
check "every GPU held: said, with the remedy" contains "$tmp/err" \
  "vram run: holding 4.00 GiB on each of the 2 GPUs for the command's whole life, used or not; name --devices to hold only those it uses"
"$vram" run -- "$grab" B 1 1 >"$tmp/out" 2>"$tmp/err"
check "the policy's default too" contains "$tmp/err" "holding 2.00 GiB on each of the 2 GPUs"
"$vram" run --limit 4GiB --devices 1 -- "$grab" C 1 1 >"$tmp/out" 2>"$tmp/err"
check "--devices: not said" sh -c "! grep -q 'holding' '$tmp/err'"
CUDA_VISIBLE_DEVICES=0 "$vram" run --limit 4GiB -- "$grab" D 1 1 >"$tmp/out" 2>"$tmp/err"
check "GPUs a scheduler chose: not said" sh -c "! grep -q 'holding' '$tmp/err'"
"$vram" run --log off --limit 4GiB -- "$grab" E 1 1 >"$tmp/out" 2>"$tmp/err"
check "--log off: not said" sh -c "! grep -q 'holding' '$tmp/err'"
kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
daemon_pid=
echo "test_run_held: $passed passed, $failures failed"
[ $failures = 0 ]
