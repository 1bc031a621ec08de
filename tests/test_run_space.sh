#!/usr/bin/env bash
# vram installed, or checked out, under a folder with a space ("/home/Jane
# Doe/vram"): LD_PRELOAD cannot carry such a path, and vram run still holds
# the command to its budget, in processes that start after vram run has
# ended too; vram top shows the program's name, not a piece of its folder.
set -u
build=${1:?usage: test_run_space.sh BUILD_DIR HOLDER}
holder=${2:?}
tmp=$(mktemp -d)
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$tmp/sim VRAM_DAEMON=off
export VRAM_SIM_CONTEXT_SIZE=0
mkdir "$VRAM_SIM_DIR"
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG CUDA_VISIBLE_DEVICES VRAM_VISIBLE_DEVICES VRAM_PRELOAD_LIBRARY
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib.sh"
kit="$tmp/Jane Doe/vram"
mkdir -p "$kit"
cp "$build/vram" "$build/libvram-preload.so" "$build/vram-demo-grab" "$holder" "$kit/"

# The budget holds: the program sees it as its device.
"$kit/vram" run --limit 1GiB -- "$kit/vram-demo-grab" A 1 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
check "a folder with a space: the program runs" [ "$rc" = 0 ]
check "held to its budget" contains "$tmp/out" "^RESULT A 1073741824 "
check "no word from the loader" sh -c "! grep -q 'cannot be preloaded' '$tmp/err'"

# A process that starts after vram run has ended still loads the interposer.
"$kit/vram" run --limit 1GiB -- sh -c "(sleep 0.5; exec grep -c 'Jane Doe/vram/libvram-preload.so' /proc/self/maps >'$tmp/late' 2>'$tmp/late.err') &" 2>"$tmp/err"
late() { [ -s "$tmp/late" ]; }
check "a process started after vram run ended: ran" wait_for 20 late
check "with the interposer loaded" sh -c "[ \"\$(cat '$tmp/late')\" -ge 1 ] && ! grep -q 'cannot be preloaded' '$tmp/late.err'"

# A library of the same name found first through LD_LIBRARY_PATH would be
# loaded instead: refused, naming it.
rm -f "$tmp/ran"
LD_LIBRARY_PATH="$build/sim:$build" "$kit/vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "another libvram-preload.so first in LD_LIBRARY_PATH: refused" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ]"
check "and named" contains "$tmp/err" "has another $build/libvram-preload.so first; the program was not started"
# A colon cannot be carried at all.
mkdir "$tmp/a:b"
cp "$build/libvram-preload.so" "$tmp/a:b/"
VRAM_PRELOAD_LIBRARY="$tmp/a:b/libvram-preload.so" "$kit/vram" run --limit 1GiB -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
check "a colon: refused, named" sh -c "[ $rc = 2 ] && [ ! -e '$tmp/ran' ] && grep -q 'contains a colon, which LD_PRELOAD cannot carry' '$tmp/err'"

# vram top (without vramd) names the program, not "Doe/vram/holder".
# (It holds until its standard input closes: a pipe this shell keeps open.)
mkfifo "$tmp/in"
"$kit/vram" run --limit 1GiB -- "$kit/holder" 300MiB <"$tmp/in" >"$tmp/h" 2>&1 &
held=$!
exec 4>"$tmp/in"
holds() { "$build/vram" top --once >"$tmp/top" 2>&1; grep -q "300.00 MiB" "$tmp/top"; }
check "the holder holds its memory" wait_for 30 holds
check "vram top: the program's name and its arguments" grep -q " holder 300MiB" "$tmp/top"
check "vram top: no piece of its folder" sh -c "! grep -q 'Doe' '$tmp/top'"
check "vram top: the command's row names its program" grep -qE "^ +job root +0 run-[0-9]+ .* holder 300MiB\$" "$tmp/top"
exec 4>&-
wait "$held"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
