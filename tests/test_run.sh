#!/usr/bin/env bash
# vram run end to end on the simulated GPU: options are checked, a program
# never runs without its budget, nor with one too small for its CUDA
# context, the budget is what the program sees (its context inside it) and
# cannot pass, budgeted processes share a device, a killed one's memory
# comes back, and the interposer is quiet unless asked.
set -u
build=${1:?usage: test_run.sh BUILD_DIR CHURN HOLDER}
churn=${2:?usage: test_run.sh BUILD_DIR CHURN HOLDER}
holder=${3:?usage: test_run.sh BUILD_DIR CHURN HOLDER}
vram=$build/vram grab=$build/vram-demo-grab
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$(mktemp -d)
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG VRAM_SIM_CONTEXT_SIZE
# What a program can take of a budget: the budget less its CUDA context
# (518 MiB on the simulated H100, sim/config.h).
context=$((518 << 20))
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$VRAM_SIM_DIR" "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
# The interposer without vram run, named as vram run names it, so that a
# checkout under a folder with a space (which LD_PRELOAD cannot carry) runs
# these too.
preloaded() { LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build" LD_PRELOAD=libvram-preload.so "$@"; }

# Options are checked with the library's parser; nothing runs on an error.
"$vram" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "no budget is refused" test $rc = 2
check "no budget says so" contains "$tmp/err" "no budget given"
"$vram" run --limit 4Gx -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "bad size refused" test $rc = 2
# Named as the user wrote it (not as VRAM_MEMORY_LIMIT, which they did not
# set), the value once.
check "bad size names the flag, the value once, and the forms" \
  contains "$tmp/err" '^vram run: --limit "4Gx": unknown unit "Gx"; accepted: '
check "bad size: the value is said once" test "$(grep -o 4Gx "$tmp/err" | wc -l)" = 1
check "bad size: VRAM_MEMORY_LIMIT is not named" sh -c "! grep -q VRAM_MEMORY_LIMIT '$tmp/err'"
# Sizes as people write them: 4gb is 4GB (bytes, powers of 1000), 4g is 4 GiB.
"$vram" run --limit 4gb -- "$grab" A 1 >"$tmp/out" 2>"$tmp/err"
check "--limit 4gb is 4,000,000,000 bytes" contains "$tmp/out" "RESULT A 4000000000 "
"$vram" run --fraction 1.5 -- true 2>"$tmp/err"
check "bad fraction" contains "$tmp/err" "more than 1"
"$vram" run --fraction 33 -- true 2>"$tmp/err"
check "--fraction 33 suggests 33%" contains "$tmp/err" '^vram run: --fraction "33": .*write 33% or 0.33'
# A vram run inside another is refused before it makes a CUDA context,
# which would take the outer command's memory.
rm -f "$tmp/ran"
"$vram" run --limit 1GiB -- sh -c "'$vram' run --limit 1GiB -- touch '$tmp/ran'; echo inner=\$?" >"$tmp/out" 2>"$tmp/err"
check "nested vram run: refused" contains "$tmp/out" "inner=2"
check "nested vram run: says why" contains "$tmp/err" "already inside a vram run command"
check "nested vram run: not started" test ! -e "$tmp/ran"
check "nested vram run: made no context in the outer command" sh -c "! grep -q 'peak' '$tmp/err'"
"$vram" run --limit 1GiB --bogus -- true 2>"$tmp/err"
check "unknown option" contains "$tmp/err" 'unknown option "--bogus"'
VRAM_PRELOAD_LIBRARY=/nonexistent/libvram-preload.so "$vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "missing interposer refused" test $rc = 2
check "missing interposer says not started" contains "$tmp/err" "was not started"
check "nothing ran" test ! -e "$tmp/ran"
# A number without a unit is bytes: below 1 MiB it is a forgotten unit, and
# refused with the forms that were meant, from the flag or the environment.
"$vram" run --limit 4 -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--limit 4 refused" test $rc = 2
check "--limit 4 says why and what was meant" contains "$tmp/err" 'without a unit is bytes.*4MiB, 4GiB'
VRAM_MEMORY_LIMIT=25 "$vram" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "VRAM_MEMORY_LIMIT=25 refused" test $rc = 2
check "VRAM_MEMORY_LIMIT=25 named" contains "$tmp/err" 'VRAM_MEMORY_LIMIT="25".*without a unit is bytes'
check "nothing ran on a unitless size" test ! -e "$tmp/ran"
# Kubernetes' 4Gi is 4GiB.
"$vram" run --limit 4Gi -- "$grab" A 1 >"$tmp/out" 2>"$tmp/err"
check "--limit 4Gi is 4 GiB" contains "$tmp/out" "RESULT A 4294967296 $((4294967296 - context)) ok"
# Durations in bare seconds, as nvidia-smi -l and gpustat -i take them.
"$vram" top --interval 1 --once --socket "$tmp/no-daemon.sock" 2>"$tmp/err"; rc=$?
check "top --interval 1 accepted (fails only for want of a daemon)" test $rc = 1
"$vram" top --interval 0 --socket "$tmp/no-daemon.sock" 2>"$tmp/err"; rc=$?
check "top --interval 0 refused" test $rc = 2
check "top --interval 0 points to --once" contains "$tmp/err" 'more than 0 (for one screen, use --once)'
VRAM_DAEMON=$tmp/no-daemon.sock "$vram" run --limit 1GiB --wait 1 -- sh -c 'echo "wait=$VRAM_WAIT"' >"$tmp/out" 2>&1
check "--wait 1 is one second" contains "$tmp/out" "wait=1000ms"
VRAM_DAEMON=$tmp/no-daemon.sock "$vram" run --limit 1GiB --wait=2.5 -- sh -c 'echo "wait=$VRAM_WAIT"' >"$tmp/out" 2>&1
check "--wait=2.5 is 2.5 seconds" contains "$tmp/out" "wait=2500ms"
# Every option is --opt value or --opt=value; an option that needs a value
# never takes "--" for one.
"$vram" run --limit=4GiB -- "$grab" A 1 >"$tmp/out" 2>"$tmp/err"
check "--limit=4GiB is --limit 4GiB" contains "$tmp/out" "RESULT A 4294967296 $((4294967296 - context)) ok"
"$vram" run --limit 1GiB --job -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "--job -- is refused" sh -c "[ $rc = 2 ] && grep -q -- '--job needs a value' '$tmp/err' && [ ! -e '$tmp/ran' ]"
VRAM_DAEMON=$tmp/no-daemon.sock "$vram" run --limit 1GiB --wait 10m -- sh -c 'echo "wait=$VRAM_WAIT"' >"$tmp/out" 2>&1
check "--wait 10m waits 10 minutes (10m is not the program)" contains "$tmp/out" "wait=600000ms"
"$vram" devices --brief=yes 2>"$tmp/err"; rc=$?
check "a flag takes no value" sh -c "[ $rc = 2 ] && grep -q -- '--brief takes no value' '$tmp/err'"
"$vram" top --once --interval=2 --socket="$tmp/no-daemon.sock" 2>"$tmp/err"; rc=$?
check "top --interval=2 --socket=PATH" sh -c "[ $rc = 1 ] && grep -q 'no-daemon.sock' '$tmp/err'"
"$vram" run --help >"$tmp/out"
check "run --help" contains "$tmp/out" "cannot govern"

# A budget for a device the program will not have, a --devices entry that
# names no GPU, and a fraction that leaves a GPU nothing are errors before
# the program starts (the machine has one GPU), never "no budget".
for args in "--limit 5=1GiB" "--limit 2=4GiB" "--limit 0=1GiB,1=1GiB" "--fraction 0=0.5,3=25%" \
            "--limit 1GiB --devices 5" "--limit 1GiB --devices GPU-ffff" "--limit 1GiB --devices 0,0" \
            "--limit 1=1GiB --devices 0" "--fraction 0.0000000000000000001" "--fraction 0.00000001"; do
  rm -f "$tmp/ran"
  "$vram" run $args -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
  check "$args: refused" test $rc = 2
  check "$args: not started" test ! -e "$tmp/ran"
  check "$args: says which GPUs there are" contains "$tmp/err" "GPU-5a1d0e5a-a000-4000-8000-000000000000"
done
check "a missing device is named" sh -c "'$vram' run --limit 5=1GiB -- true 2>&1 | grep -q 'names device 5, but the program will see 1 GPU'"
check "a budget of nothing is named" sh -c "'$vram' run --fraction 0.0000000000000000001 -- true 2>&1 | grep -q 'a budget of 0 B'"
VRAM_MEMORY_LIMIT=3=1GiB "$vram" run -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "the environment's budget is checked too" test $rc = 2
check "the environment's budget is named" contains "$tmp/err" 'VRAM_MEMORY_LIMIT="3=1GiB" names device 3'
# Reached without vram run, the interposer refuses such a configuration
# loudly rather than running without a budget.
# (The program gets no GPU memory at all, not even for its CUDA context.)
VRAM_MEMORY_LIMIT=5=1GiB preloaded "$grab" A 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "interposer: no budget for a missing device is an error" sh -c "[ $rc = 1 ] && ! grep -q 'ok\$' '$tmp/out'"
check "interposer: says so" contains "$tmp/err" 'VRAM_MEMORY_LIMIT="5=1GiB" names device 5'
VRAM_MEMORY_FRACTION=0.0000000000000000001 preloaded "$grab" A 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "interposer: a budget of nothing is an error" sh -c "[ $rc = 1 ] && ! grep -q 'ok\$' '$tmp/out'"
check "interposer: says so" contains "$tmp/err" 'a budget of 0 B'

# A budget smaller than a CUDA context: no program can run in it. vram run
# measures a context on each GPU first and refuses it, saying what one takes.
"$vram" run --limit 300MiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "a budget below a context: refused" test $rc = 2
check "a budget below a context: not started" test ! -e "$tmp/ran"
check "a budget below a context: says what a context takes there" contains "$tmp/err" \
  "gives device 0 (NVIDIA H100 80GB HBM3, GPU-5a1d0e5a-a000-4000-8000-000000000000) a budget of 300.00 MiB, and a CUDA context alone takes 518.00 MiB there: no program can run in it; a budget there needs at least 519.00 MiB; the program was not started"
"$vram" run --limit 519MiB -- true 2>"$tmp/err"
check "a budget of a context and 1 MiB: started" test $? = 0
"$vram" run --fraction 3% -- true 2>"$tmp/err"
check "a fraction below a context: refused" contains "$tmp/err" "a budget of 368.64 MiB, and a CUDA context alone takes 518.00 MiB there"
# Reached without vram run (VRAM_LOG unset: quiet otherwise), the interposer
# refuses the context and says why, once.
VRAM_MEMORY_LIMIT=300MiB preloaded "$grab" A 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "interposer: a budget below a context fails the program" test $rc = 1
check "interposer: says what a context takes" contains "$tmp/err" \
  "^vram: error: a CUDA context takes 518.00 MiB on device 0 (NVIDIA H100 80GB HBM3) and its budget is 300.00 MiB, which leaves no room beside it: cuDevicePrimaryCtxRetain fails with CUDA_ERROR_OUT_OF_MEMORY; a budget there needs at least 519.00 MiB\$"
check "interposer: says it once" test "$(grep -c 'vram:' "$tmp/err")" = 1

# The budget is the device the program sees, and all it can take beside its
# context; the peak says so.
"$vram" run --limit 4GiB -- "$grab" A 1 >"$tmp/out" 2>"$tmp/err"
check "sees 4 GiB and takes all its context leaves" contains "$tmp/out" "RESULT A 4294967296 $((4294967296 - context)) ok"
check "the peak is the budget, the context inside it" contains "$tmp/err" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget (context 518.00 MiB)\$"
"$vram" run --limit 3GiB -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "over budget fails" test $rc = 1
check "refusal is one line a person can act on" \
  contains "$tmp/err" "cuMemAlloc refused with CUDA_ERROR_OUT_OF_MEMORY: device 0 (GPU-[-0-9a-f]*) budget 3.00 GiB"
"$vram" run --limit 3GiB --log off -- "$grab" B 1 >"$tmp/out" 2>"$tmp/err"
check "quiet when asked" sh -c "! grep -q 'vram:' '$tmp/err'"
"$vram" run --limit 4GiB --log off -- "$grab" C 1 >"$tmp/out" 2>"$tmp/err"
check "nothing on stdout but the program's" sh -c "[ \"\$(cat '$tmp/out')\" = 'RESULT C 4294967296 $((4294967296 - context)) ok' ]"

# Two budgeted processes side by side on one device; a third does not fit.
# (They hold their memory for 15 s, and the check waits for both to have
# taken it: on a loaded machine, sanitized processes take seconds to start.)
"$vram" run --limit 5GiB -- "$grab" D 150 >"$tmp/d" 2>&1 &
d=$!
"$vram" run --limit 5GiB -- "$grab" E 150 >"$tmp/e" 2>&1 &
e=$!
held_both() { "$vram" devices --brief >"$tmp/occ"; contains "$tmp/occ" "10.00 GiB used of 12.00 GiB"; }
check "two budgets held at once" wait_for 30 held_both
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
check "the other finished" contains "$tmp/e" "RESULT E 5368709120 $((5368709120 - context)) ok"

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

# --growth asks the frameworks to grow instead of grabbing, under their
# current and their old names, and never touches a setting of the user's.
show='echo "tf=$TF_FORCE_GPU_ALLOW_GROWTH xla=$XLA_PYTHON_CLIENT_PREALLOCATE vram=$VRAM_ALLOW_GROWTH new=${PYTORCH_ALLOC_CONF-unset} old=${PYTORCH_CUDA_ALLOC_CONF-unset} ."'
env -u PYTORCH_ALLOC_CONF -u PYTORCH_CUDA_ALLOC_CONF -u TF_FORCE_GPU_ALLOW_GROWTH -u XLA_PYTHON_CLIENT_PREALLOCATE \
  "$vram" run --limit 1GiB --growth -- sh -c "$show" >"$tmp/out"
check "--growth sets the frameworks' variables, current and old names" contains "$tmp/out" \
  "tf=true xla=false vram=true new=expandable_segments:True old=expandable_segments:True ."
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$vram" run --limit 1GiB --growth -- sh -c "$show" >"$tmp/out"
check "--growth leaves the user's PYTORCH_CUDA_ALLOC_CONF alone, adds no new name over it" \
  contains "$tmp/out" "new=unset old=backend:cudaMallocAsync ."
PYTORCH_ALLOC_CONF=max_split_size_mb:128 "$vram" run --limit 1GiB --growth -- sh -c "$show" >"$tmp/out"
check "--growth leaves the user's PYTORCH_ALLOC_CONF alone" \
  contains "$tmp/out" "new=max_split_size_mb:128 old=unset ."
TF_FORCE_GPU_ALLOW_GROWTH=false XLA_PYTHON_CLIENT_PREALLOCATE=true \
  "$vram" run --limit 1GiB --growth -- sh -c "$show" >"$tmp/out"
check "--growth leaves the user's TensorFlow and JAX settings alone" \
  contains "$tmp/out" "tf=false xla=true"

# What the environment says that the command's budget leaves out, and a
# variable no part of vram reads, are said once (issue 27, item 14): by vram
# run for its command, by the interposer outside one (when VRAM_LOG lets
# it), by libvram where neither did; never twice.
said_once() { [ "$(grep -c "$1" "$2")" = 1 ]; }
echo | VRAM_BOGUS=1 "$vram" run --limit 1GiB -- "$holder" 100MiB >/dev/null 2>"$tmp/err"
check "vram run with a libvram program: the unknown variable said once" said_once "unknown variable VRAM_BOGUS" "$tmp/err"
echo | VRAM_BOGUS=1 VRAM_LOG=warn VRAM_MEMORY_LIMIT=1GiB preloaded "$holder" 100MiB >/dev/null 2>"$tmp/err"
check "the interposer and libvram in one process: once" said_once "unknown variable VRAM_BOGUS" "$tmp/err"
echo | VRAM_BOGUS=1 VRAM_MEMORY_LIMIT=1GiB preloaded "$holder" 100MiB >/dev/null 2>"$tmp/err"
check "a quiet interposer: libvram says it, once" said_once "unknown variable VRAM_BOGUS" "$tmp/err"
echo | VRAM_BOGUS=1 VRAM_MEMORY_LIMIT=1GiB "$holder" 100MiB >/dev/null 2>"$tmp/err"
check "libvram alone: once" said_once "unknown variable VRAM_BOGUS" "$tmp/err"
VRAM_BOGUS=1 VRAM_MEMORY_LIMIT=4GiB preloaded "$grab" G 1 >/dev/null 2>"$tmp/err"
check "the interposer alone is quiet unless asked" sh -c "! grep -q 'vram:' '$tmp/err'"
echo | VRAM_MEMORY_LIMIT=1GiB VRAM_VIRTUAL_DEVICES="0:512MiB,512MiB" "$vram" run --limit 2GiB -- "$holder" 100MiB \
  >/dev/null 2>"$tmp/err"
check "--limit over VRAM_MEMORY_LIMIT: said once" said_once \
  '^vram run: --limit 2GiB is the command.s budget; VRAM_MEMORY_LIMIT="1GiB" from the environment is not used$' "$tmp/err"
check "VRAM_VIRTUAL_DEVICES not applied by the interposer: said once" said_once \
  '^vram run: VRAM_VIRTUAL_DEVICES="0:512MiB,512MiB" is not applied to the command' "$tmp/err"
VRAM_MEMORY_LIMIT=2GiB "$vram" run --limit 2GiB -- true 2>"$tmp/err"
check "the same budget in both: nothing to say" sh -c "! grep -q 'not used' '$tmp/err'"
VRAM_MEMORY_FRACTION=50% VRAM_VIRTUAL_DEVICES="0:1GiB" "$vram" run --log off --limit 2GiB -- true 2>"$tmp/err"
check "--log off: nothing said" test ! -s "$tmp/err"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
