#!/usr/bin/env bash
# vram run --gpus N on a shared machine: the program gets the GPUs with the
# most free memory that can hold its budget, only among those the
# environment allows (an inherited CUDA_VISIBLE_DEVICES), is told which on
# stderr, and is refused, with what each GPU has free, when none can; with
# vramd, free is what vramd would grant now, and --wait waits for it.
set -u
build=${1:?usage: test_run_gpus.sh BUILD_DIR}
vram=$build/vram grab=$build/vram-demo-grab
tmp=$(mktemp -d)
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB,12GiB VRAM_SIM_DIR=$tmp/sim VRAM_DAEMON=off
mkdir "$VRAM_SIM_DIR"
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG CUDA_VISIBLE_DEVICES VRAM_VISIBLE_DEVICES VRAM_WAIT
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
gpu0=GPU-5a1d0e5a-a000-4000-8000-000000000000 gpu1=GPU-5a1d0e5a-a100-4000-8000-000000000001
show='echo "cvd=$CUDA_VISIBLE_DEVICES"'

# GPU 0 half full: a program holds 6 GiB of it.
"$vram" run --limit 6GiB --devices 0 -- "$grab" H 100000 >"$tmp/h" 2>&1 &
holder=$!
half_full() { "$vram" devices --brief >"$tmp/occ"; grep -q "GPU 0 .* 6.00 GiB used" "$tmp/occ"; }
check "GPU 0 is half full" wait_for 30 half_full

"$vram" run --gpus 1 --limit 4GiB -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "--gpus 1: runs" [ "$rc" = 0 ]
check "--gpus 1 with GPU 0 half full: GPU 1" contains "$tmp/out" "^cvd=1\$"
check "--gpus 1: says which on stderr, with what is free" contains "$tmp/err" \
  "^vram run: --gpus 1: GPU 1 ($gpu1, 12.00 GiB free of 12.00 GiB); CUDA_VISIBLE_DEVICES=1\$"
"$vram" run --gpus 1 --limit 4GiB --log off -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "--log off: nothing said" sh -c "[ ! -s '$tmp/err' ] && grep -q '^cvd=1\$' '$tmp/out'"
# Both: in the order programs number them, so budgets number the GPUs picked.
"$vram" run --gpus 2 --limit 0=1GiB,1=2GiB -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"
check "--gpus 2: both, budgets numbered among them" contains "$tmp/out" "RESULT B 1073741824 "
"$vram" run --gpus 1 --limit 1=1GiB -- true 2>"$tmp/err"; rc=$?
check "--gpus 1 --limit 1=...: device 1 is not among those picked" sh -c \
  "[ $rc = 2 ] && grep -q 'names device 1, but the program will see 1 GPU .*numbered among those --gpus picked' '$tmp/err'"
# A share of each GPU: each must hold its own.
"$vram" run --gpus 2 --fraction 60% -- true 2>"$tmp/err"; rc=$?
check "--gpus 2 --fraction 60%: refused, GPU 0 has 6 GiB free" sh -c "[ $rc = 2 ] && grep -q \
  'has its budget free (GPU 0: 6.00 GiB for 7.20 GiB; GPU 1: 12.00 GiB for 7.20 GiB); the program was not started' '$tmp/err'"

# Within an inherited CUDA_VISIBLE_DEVICES only.
CUDA_VISIBLE_DEVICES=1 "$vram" run --gpus 1 --limit 4GiB -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "CUDA_VISIBLE_DEVICES=1: GPU 1, named as inherited" contains "$tmp/out" "^cvd=1\$"
check "CUDA_VISIBLE_DEVICES=1: says it picked within it" contains "$tmp/err" \
  "^vram run: --gpus 1 of the 1 GPU CUDA_VISIBLE_DEVICES=\"1\" allows: GPU 0 ($gpu1, "
rm -f "$tmp/ran"
CUDA_VISIBLE_DEVICES=0 "$vram" run --gpus 1 --limit 8GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "CUDA_VISIBLE_DEVICES=0, 8 GiB: refused, not started" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "CUDA_VISIBLE_DEVICES=0, 8 GiB: says what is free there" contains "$tmp/err" \
  "^vram run: --gpus 1: 0 of the 1 GPU the command may use (CUDA_VISIBLE_DEVICES=\"0\" as inherited) have 8.00 GiB free (GPU 0: 6.00 GiB); the program was not started"
CUDA_VISIBLE_DEVICES=1 "$vram" run --gpus 2 --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--gpus 2 of 1 allowed: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ] && grep -q \
  -- '--gpus 2: the command may use 1 GPU (CUDA_VISIBLE_DEVICES=\"1\" as inherited); accepted: 1 to 1' '$tmp/err'"

# Bad values and the flag it cannot go with.
"$vram" run --gpus 0 --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--gpus 0: refused, named" sh -c "[ $rc = 2 ] && grep -q -- '--gpus 0: no GPU at all; accepted: how many GPUs' '$tmp/err'"
"$vram" run --gpus two --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--gpus two: refused, named" sh -c "[ $rc = 2 ] && grep -q -- '--gpus two: .*accepted: how many GPUs' '$tmp/err'"
"$vram" run --gpus 1 --devices 1 --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--gpus with --devices: refused, naming both" sh -c "[ $rc = 2 ] && grep -q -- '--gpus 1 and --devices \"1\": give one of them' '$tmp/err'"
VRAM_VISIBLE_DEVICES=0 "$vram" run --gpus 1 --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--gpus with VRAM_VISIBLE_DEVICES: refused, naming both" sh -c "[ $rc = 2 ] && grep -q -- '--gpus 1 and VRAM_VISIBLE_DEVICES=\"0\": give one of them' '$tmp/err'"
check "nothing was started by a refusal" [ ! -e "$tmp/ran" ]
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# With vramd: free is what vramd would grant now. A command holds a grant of
# 10 GiB on GPU 0 and uses none of it: NVML sees both GPUs empty, vramd only
# GPU 1.
S=$tmp/vramd.sock
printf 'default-budget 2GiB\n' >"$tmp/policy"
"$build/vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >"$tmp/daemon.out" 2>&1 &
daemon=$!
if wait_for 10 env VRAM_DAEMON="$S" "$vram" status >/dev/null 2>&1; then
  export VRAM_DAEMON=$S
  "$vram" run --limit 10GiB --devices 0 -- sleep 300 >"$tmp/g" 2>&1 &
  granted=$!
  held() { "$vram" status >"$tmp/st" 2>&1; grep -q "10.00 GiB" "$tmp/st"; }
  check "vramd: a grant of 10 GiB on GPU 0" wait_for 20 held
  "$vram" run --gpus 1 --limit 4GiB -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "vramd: GPU 1, where the grant fits" sh -c "[ $rc = 0 ] && grep -q '^cvd=1\$' '$tmp/out'"
  check "vramd: says what vramd would grant" contains "$tmp/err" \
    "^vram run: --gpus 1: GPU 1 ($gpu1, 12.00 GiB free of 12.00 GiB)"
  "$vram" run --gpus 2 --limit 4GiB -- true 2>"$tmp/err"; rc=$?
  check "vramd: two do not fit now: refused (75)" sh -c "[ $rc = 75 ] && grep -q \
    'GPU 0: 2.00 GiB; GPU 1: 12.00 GiB); the program was not started' '$tmp/err'"
  # --wait: the first moment both can.
  "$vram" run --gpus 2 --limit 4GiB --wait=60s -- sh -c "$show" >"$tmp/wout" 2>"$tmp/werr" &
  waiter=$!
  check "vramd --wait: waits, saying so" wait_for 20 contains "$tmp/werr" "waiting for vramd's grants and the memory in use to leave room"
  kill "$granted"; wait "$granted" 2>/dev/null
  wait "$waiter"; rc=$?
  check "vramd --wait: both once the grant is gone" sh -c "[ $rc = 0 ] && grep -q '^cvd=0,1\$' '$tmp/wout'"
  # A job that holds memory, not only a grant (issue 27, item 6): 8 GiB of
  # GPU 0 in use, what NVML shows free there is too little for 8 GiB more
  # until it ends; then both GPUs have room, and the waiter is granted, as
  # --devices 0,1 --wait is.
  "$vram" run --limit 8GiB --devices 0 -- "$grab" H 100000 >"$tmp/h" 2>&1 &
  holding=$!
  in_use() { "$vram" devices --brief >"$tmp/occ"; grep -q "GPU 0 .* 8.00 GiB used" "$tmp/occ"; }
  check "vramd: a job holds 8 GiB of GPU 0" wait_for 30 in_use
  rm -f "$tmp/wout" "$tmp/werr" # the last waiter's: read below before the redirection is made
  "$vram" run --gpus 2 --limit 8GiB --wait=60s -- sh -c "$show" >"$tmp/wout" 2>"$tmp/werr" &
  waiter=$!
  check "vramd --wait, 8 GiB on both: waits, saying what GPU 0 has free" wait_for 20 contains "$tmp/werr" \
    "GPU 0: [0-9.]* GiB; GPU 1: 12.00 GiB); waiting for vramd's grants and the memory in use to leave room"
  kill "$holding"; wait "$holding" 2>/dev/null
  wait "$waiter"; rc=$?
  check "vramd --wait: both once the job holding memory has ended" sh -c "[ $rc = 0 ] && grep -q '^cvd=0,1\$' '$tmp/wout'"
  check "vramd --wait: said what it picked, with all of GPU 0 free" contains "$tmp/werr" \
    "^vram run: --gpus 2: GPU 0 ($gpu0, 12.00 GiB free of 12.00 GiB); GPU 1 ($gpu1, 12.00 GiB free of 12.00 GiB)"
else
  check "vramd started" false
  cat "$tmp/daemon.out"
fi
kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
