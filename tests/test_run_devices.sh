#!/usr/bin/env bash
# vram run on a node with several GPUs, as a scheduler runs it: the GPUs a
# program may use are always within those the environment allows (an
# inherited CUDA_VISIBLE_DEVICES), --devices and VRAM_VISIBLE_DEVICES number
# them within it, and a choice outside it is an error that names the
# setting, its value and what is accepted.
set -u
build=${1:?usage: test_run_devices.sh BUILD_DIR}
vram=$build/vram grab=$build/vram-demo-grab
tmp=$(mktemp -d)
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB,12GiB VRAM_SIM_DIR=$tmp/sim VRAM_DAEMON=off
mkdir "$VRAM_SIM_DIR"
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG CUDA_VISIBLE_DEVICES VRAM_VISIBLE_DEVICES
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
gpu0=GPU-5a1d0e5a-a000-4000-8000-000000000000 gpu1=GPU-5a1d0e5a-a100-4000-8000-000000000001
show='echo "cvd=${CUDA_VISIBLE_DEVICES-unset} vvd=${VRAM_VISIBLE_DEVICES-unset}"'

# --devices 0 under an inherited CUDA_VISIBLE_DEVICES=1 is that GPU 1, the
# only one the scheduler allowed, never physical GPU 0.
CUDA_VISIBLE_DEVICES=1 "$vram" run --limit 1GiB --devices 0 -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "--devices 0 within CUDA_VISIBLE_DEVICES=1 is GPU 1" contains "$tmp/out" "^cvd=1 "
CUDA_VISIBLE_DEVICES=1 "$vram" run --limit 5GiB --devices 0 -- "$grab" A 200 >"$tmp/a" 2>&1 &
a=$!
on_gpu1() { "$vram" devices --brief >"$tmp/occ"; grep -q "GPU 1 .* 5.00 GiB used" "$tmp/occ"; }
check "the program runs on physical GPU 1" wait_for 30 on_gpu1
check "and nothing on GPU 0" grep -q "GPU 0 .* 0 B used" "$tmp/occ"
kill "$a" 2>/dev/null; wait "$a" 2>/dev/null
# An ordinal or UUID outside the inherited set is refused, saying which the
# environment allows.
rm -f "$tmp/ran"
CUDA_VISIBLE_DEVICES=1 "$vram" run --limit 1GiB --devices 1 -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--devices 1 under CUDA_VISIBLE_DEVICES=1: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "--devices 1: names the setting and what the environment allows" contains "$tmp/err" \
  "--devices \"1\": there is no GPU 1; CUDA_VISIBLE_DEVICES=\"1\" lets this process use 1 GPU (0: $gpu1"
CUDA_VISIBLE_DEVICES=1 "$vram" run --limit 1GiB --devices GPU-5a1d0e5a-a000 -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "an excluded GPU's UUID: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "an excluded GPU's UUID: says so" contains "$tmp/err" "no GPU has the UUID GPU-5a1d0e5a-a000; CUDA_VISIBLE_DEVICES"
# Inherited UUIDs are passed on as written, in the order --devices gives.
CUDA_VISIBLE_DEVICES=$gpu1,0 "$vram" run --limit 1GiB --devices 1,0 -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "UUIDs in the inherited variable: chosen by position, passed on as written" \
  contains "$tmp/out" "^cvd=0,$gpu1 "
CUDA_VISIBLE_DEVICES=$gpu1,0 "$vram" run --limit 1GiB --devices GPU-5a1d0e5a-a0 -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "a UUID prefix within the inherited set" contains "$tmp/out" "^cvd=0 "

# VRAM_VISIBLE_DEVICES chooses as --devices does (vram --help says vram reads
# it), within the inherited set; it is used up: a libvram program inside
# does not choose again.
VRAM_VISIBLE_DEVICES=1 "$vram" run --limit 1GiB -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "VRAM_VISIBLE_DEVICES=1 is GPU 1" contains "$tmp/out" "^cvd=1 vvd=unset\$"
VRAM_VISIBLE_DEVICES=1,0 "$vram" run --limit 0=1GiB,1=2GiB -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"
check "VRAM_VISIBLE_DEVICES=1,0: budgets number the GPUs in its order" contains "$tmp/out" "RESULT B 1073741824 "
VRAM_VISIBLE_DEVICES=0 "$vram" run --limit 1GiB --devices 1 -- sh -c "$show" >"$tmp/out" 2>"$tmp/err"
check "--devices wins over VRAM_VISIBLE_DEVICES" contains "$tmp/out" "^cvd=1 vvd=unset\$"
CUDA_VISIBLE_DEVICES=1 VRAM_VISIBLE_DEVICES=1 "$vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "VRAM_VISIBLE_DEVICES outside CUDA_VISIBLE_DEVICES: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "VRAM_VISIBLE_DEVICES outside: names it" contains "$tmp/err" 'VRAM_VISIBLE_DEVICES="1": there is no GPU 1'
VRAM_SIM_DEVICES=12GiB VRAM_VISIBLE_DEVICES=7 "$vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "VRAM_VISIBLE_DEVICES=7 on one GPU: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "VRAM_VISIBLE_DEVICES=7: names the variable, the value and what is accepted" contains "$tmp/err" \
  "VRAM_VISIBLE_DEVICES=\"7\": there is no GPU 7; this machine has 1 GPU (0: $gpu0.*accepted: "

# A GPU the program will see with no budget: without vramd an error before
# the program starts (it would take that GPU whole, and the summary would
# not show it); under vramd it gets the policy's default, and the end-of-run
# lines and --summary show every GPU.
rm -f "$tmp/ran"
"$vram" run --limit 1=4GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--limit 1=4GiB on two GPUs: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "--limit 1=4GiB: says GPU 0 has no budget and what to write" contains "$tmp/err" \
  "--limit 1=4GiB gives device 0 ($gpu0, 12.00 GiB) no budget, and the program will see 2 GPUs: give each a budget"
VRAM_MEMORY_FRACTION=1=50% "$vram" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "VRAM_MEMORY_FRACTION=1=50%: refused, named" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ] && grep -q 'VRAM_MEMORY_FRACTION=\"1=50%\" gives device 0' '$tmp/err'"
"$vram" run --limit 1=4GiB --devices 1 -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--limit 1=4GiB --devices 1: device 1 is not there" sh -c "[ $rc = 2 ] && grep -q 'names device 1, but the program will see 1 GPU' '$tmp/err'"
"$vram" run --limit 0=1GiB,1=4GiB --summary "$tmp/s.json" -- "$grab" C 1 >"$tmp/out" 2>"$tmp/err"
check "a budget on each GPU: runs" contains "$tmp/out" "RESULT C 1073741824 "

S=$tmp/vramd.sock
printf 'default-budget 2GiB\n' >"$tmp/policy"
"$build/vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >"$tmp/daemon.out" 2>&1 &
daemon=$!
if wait_for 10 env VRAM_DAEMON="$S" "$vram" status >/dev/null 2>&1; then
  VRAM_DAEMON=$S "$vram" run --limit 1=5GiB --summary "$tmp/s.json" -- "$grab" D 1 100 >"$tmp/out" 2>"$tmp/err"; rc=$?
  check "under vramd, --limit 1=5GiB: GPU 0 gets the policy's default" sh -c "[ $rc = 0 ] && grep -q 'RESULT D 2147483648 ' '$tmp/out'"
  check "the end-of-run lines show the GPU used" contains "$tmp/err" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak .* of 2.00 GiB budget"
  check "and the other" contains "$tmp/err" "^vram: GPU 1 (GPU-[-0-9a-f]*): peak 0 B of 5.00 GiB budget"
  check "--summary lists both" sh -c "grep -q '\"index\": 0, \"uuid\": \"$gpu0\", \"budget\": 2147483648' '$tmp/s.json' && grep -q '\"index\": 1, .*\"budget\": 5368709120' '$tmp/s.json'"
else
  check "vramd started" false
  cat "$tmp/daemon.out"
fi
kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null

# Refusals suggest --wait only where waiting can help: not for no default
# budget, nor for a cap smaller than the request.
printf 'cap user %s 1GiB\n' "$(id -un)" >"$tmp/policy"
"$build/vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >>"$tmp/daemon.out" 2>&1 &
daemon=$!
if wait_for 10 env VRAM_DAEMON="$S" "$vram" status >/dev/null 2>&1; then
  VRAM_DAEMON=$S "$vram" run -- true 2>"$tmp/err"; rc=$?
  check "no default budget: refused" sh -c "[ $rc = 75 ] && grep -q 'sets no default-budget' '$tmp/err'"
  check "no default budget: --wait is not suggested" sh -c "! grep -q -- '--wait' '$tmp/err'"
  VRAM_DAEMON=$S "$vram" run --limit 2GiB -- true 2>"$tmp/err"; rc=$?
  check "a cap below the request: refused" sh -c "[ $rc = 75 ] && grep -q 'may hold 1.00 GiB' '$tmp/err'"
  check "a cap below the request: says waiting cannot help" sh -c "! grep -q -- '--wait' '$tmp/err' && grep -q 'waiting cannot help' '$tmp/err'"
else
  check "vramd started again" false
  cat "$tmp/daemon.out"
fi
kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
