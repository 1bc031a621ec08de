#!/usr/bin/env bash
# vram run end to end on the simulated GPU: options are checked, a program
# never runs without its budget, the budget is what the program sees and
# cannot pass, budgeted processes share a device, a killed one's memory
# comes back, and the interposer is quiet unless asked.
set -u
build=${1:?usage: test_run.sh BUILD_DIR CHURN}
churn=${2:?usage: test_run.sh BUILD_DIR CHURN}
vram=$build/vram grab=$build/vram-demo-grab
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$(mktemp -d)
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$VRAM_SIM_DIR" "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"

# Options are checked with the library's parser; nothing runs on an error.
"$vram" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "no budget is refused" test $rc = 2
check "no budget says so" contains "$tmp/err" "no budget given"
"$vram" run --limit 4Gb -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "bad size refused" test $rc = 2
check "bad size names value and forms" contains "$tmp/err" '"4Gb".*is bits.*accepted'
"$vram" run --fraction 1.5 -- true 2>"$tmp/err"
check "bad fraction" contains "$tmp/err" "more than 1"
"$vram" run --limit 1GiB --bogus -- true 2>"$tmp/err"
check "unknown option" contains "$tmp/err" 'unknown option "--bogus"'
VRAM_PRELOAD_LIBRARY=/nonexistent/libvram-preload.so "$vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "missing interposer refused" test $rc = 2
check "missing interposer says not started" contains "$tmp/err" "was not started"
check "nothing ran" test ! -e "$tmp/ran"
"$vram" run --help >"$tmp/out"
check "run --help" contains "$tmp/out" "cannot govern"

# The budget is the device the program sees, and all it can take.
"$vram" run --limit 4GiB -- "$grab" A 1 >"$tmp/out" 2>"$tmp/err"
check "sees 4 GiB and takes it" contains "$tmp/out" "RESULT A 4294967296 4294967296 ok"
"$vram" run --limit 3GiB -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "over budget fails" test $rc = 1
check "refusal is one line a person can act on" \
  contains "$tmp/err" "cuMemAlloc refused with CUDA_ERROR_OUT_OF_MEMORY: device 0 budget 3.00 GiB"
"$vram" run --limit 3GiB --log off -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"
check "quiet when asked" sh -c "! grep -q 'vram:' '$tmp/err'"
"$vram" run --limit 4GiB --log off -- "$grab" C 1 >"$tmp/out" 2>"$tmp/err"
check "nothing on stdout but the program's" sh -c "[ \"\$(cat '$tmp/out')\" = 'RESULT C 4294967296 4294967296 ok' ]"

# Two budgeted processes side by side on one device; a third does not fit.
# (They hold for 5 s: long enough for what follows on a busy machine.)
"$vram" run --limit 5GiB -- "$grab" D 50 >"$tmp/d" 2>&1 &
d=$!
"$vram" run --limit 5GiB -- "$grab" E 50 >"$tmp/e" 2>&1 &
e=$!
check "two budgets held at once" wait_for 10 sh -c "'$vram' devices --brief | grep -q '10.00 GiB used of 12.00 GiB'"
"$vram" run --limit 5GiB -- "$grab" F 1 >"$tmp/f" 2>&1
check "third sees only what is left" contains "$tmp/f" "RESULT F 5368709120 0 OOM"
# Killed mid-run: its memory comes back at once. (vram run stays beside its
# command; the program is its child.)
kill -9 "$(command_of $d)"
wait $d 2>/dev/null
check "vram run exits as the shell does for a killed command" test $? = 137
"$vram" devices --brief >"$tmp/occ"
check "killed process's memory is back" contains "$tmp/occ" " 5.00 GiB used of 12.00 GiB"
wait $e
check "the other finished" contains "$tmp/e" "RESULT E 5368709120 5368709120 ok"

# Killed in the middle of allocating and freeing, again and again: nothing
# it held outlives it.
for delay in 0.05 0.13 0.21 0.08 0.17; do
  "$vram" run --limit 2GiB -- "$churn" >"$tmp/churn" 2>&1 &
  c=$!
  for _ in $(seq 500); do grep -q churning "$tmp/churn" 2>/dev/null && break; sleep 0.01; done
  sleep $delay
  kill -9 "$(command_of $c)"
  wait $c 2>/dev/null
done
"$vram" devices --brief >"$tmp/occ"
check "killed mid-allocation: all memory back" contains "$tmp/occ" " 0 B used of 12.00 GiB"

# --growth asks the frameworks to grow instead of grabbing.
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 "$vram" run --limit 1GiB --growth -- \
  sh -c 'echo "$TF_FORCE_GPU_ALLOW_GROWTH $XLA_PYTHON_CLIENT_PREALLOCATE $PYTORCH_CUDA_ALLOC_CONF"' >"$tmp/out"
check "--growth sets the frameworks' variables" \
  contains "$tmp/out" "true false max_split_size_mb:128,expandable_segments:True"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
