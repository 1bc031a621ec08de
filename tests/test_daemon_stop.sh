#!/usr/bin/env bash
# A user tries vramd as the README says (`vramd &`, then `vram run -- ...`)
# and stops it again (issue 22, item 7): without a policy file the daemon
# gives the sample policy's default budget (25%) and says so; stopped
# cleanly it leaves nothing that holds programs back (no socket, no
# fallback file), so vram run --limit and the interposer under
# VRAM_MEMORY_LIMIT work at once, alone. A crashed daemon keeps its
# fallback file, and every message about it names the file and says how
# to go on without it (VRAM_DAEMON=off). Runs as a test user (a user's own
# daemon; root's would be the system's /run/vram). Exit 77 without root,
# useradd or setpriv.
#   test_daemon_stop.sh BUILD_DIR PEER
set -u
build=${1:?usage: test_daemon_stop.sh BUILD_DIR PEER} peer=${2:?}
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to make a test user"
for c in useradd userdel setpriv pkill; do
  command -v $c >/dev/null || missing "$c is not installed"
done
[ -e /etc/vram/policy.conf ] && skip "/etc/vram/policy.conf exists (vramd would read it)"
daemon_test daemon-stop "$build"
unset VRAM_DAEMON
G=$((1 << 30))
test_users a || { echo "FAIL: cannot make a test user"; exit 1; }
kit=$tmp/kit
make_kit "$build" "$peer" "$kit"
cp "$build/vramd" "$kit/"
xdg=$tmp/xdg
mkdir -m 700 "$xdg" && chown "$uid_a:$gid_a" "$xdg"
as_a=(setpriv --reuid="$uid_a" --regid="$gid_a" --clear-groups env -u VRAM_DAEMON
      XDG_RUNTIME_DIR="$xdg" LD_LIBRARY_PATH="$kit/sim" VRAM_SIM_DIR="$VRAM_SIM_DIR"
      VRAM_SIM_DEVICES=12GiB VRAM_SIM_CONTEXT_SIZE=0)
sock=$xdg/vram/vramd.sock fallback=$xdg/vram/vramd.fallback
up() { "${as_a[@]}" "$kit/vram" status --json >/dev/null 2>&1; }

# The README's sequence on a fresh install: no policy file.
"${as_a[@]}" "$kit/vramd" >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "vramd & starts (a user's own daemon)" wait_for 10 up
check "it says it runs the built-in policy, default-budget 25%" contains "$tmp/daemon.out" \
  "no policy file .*default-budget 25% of each GPU"
"${as_a[@]}" "$kit/vram" run -- "$kit/vram-demo-grab" A 1 100 >"$tmp/a" 2>"$tmp/a.err"; rc=$?
check "vram run -- PROGRAM is granted 25% of the GPU" sh -c "[ $rc = 0 ] && grep -q 'RESULT A $((3 * G)) ' '$tmp/a'"

# Stopped cleanly: nothing left that holds programs back.
kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=
check "a clean stop removes the socket" test ! -e "$sock"
check "and the fallback file" test ! -e "$fallback"
start=$(date +%s%N)
"${as_a[@]}" "$kit/vram" run --limit 2GiB -- "$kit/vram-demo-grab" B 1 100 >"$tmp/b" 2>"$tmp/b.err"; rc=$?
check "vram run --limit 2GiB then runs alone" sh -c "[ $rc = 0 ] && grep -q 'RESULT B $((2 * G)) .* ok' '$tmp/b'"
check "without waiting for a daemon" sh -c "! grep -q 'does not answer' '$tmp/b.err'"
"${as_a[@]}" VRAM_MEMORY_LIMIT=2GiB LD_PRELOAD="$kit/libvram-preload.so" "$kit/vram-demo-grab" C 1 100 \
  >"$tmp/c" 2>"$tmp/c.err"; rc=$?
check "a program under VRAM_MEMORY_LIMIT gets its memory" sh -c "[ $rc = 0 ] && grep -q 'RESULT C $((2 * G)) .* ok' '$tmp/c'"

# Crashed, with a policy that gives nothing by default: the fallback file
# stays, and says so; the messages name it and the way on without vramd.
printf 'when-full fail\n' >"$tmp/policy"
chmod 644 "$tmp/policy"
"${as_a[@]}" "$kit/vramd" --policy "$tmp/policy" >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "vramd with a policy file starts" wait_for 10 up
kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=
check "a crash keeps the fallback file" test -f "$fallback"
"${as_a[@]}" "$kit/vram" run --limit 1GiB -- "$kit/vram-demo-grab" D 1 100 >"$tmp/d" 2>"$tmp/d.err"; rc=$?
check "vram run: refused while vramd is down (75)" test $rc = 75
check "vram run: the wait says how to go on without it" contains "$tmp/d.err" "waiting up to 5 s for it (VRAM_DAEMON=off runs without vramd)"
check "vram run: the refusal names the fallback file and VRAM_DAEMON=off" contains "$tmp/d.err" \
  "as its fallback file $fallback says; the program was not started; VRAM_DAEMON=off runs without vramd"
"${as_a[@]}" VRAM_DAEMON=off "$kit/vram" run --limit 1GiB -- "$kit/vram-demo-grab" E 1 100 >"$tmp/e" 2>&1; rc=$?
check "VRAM_DAEMON=off, as it says: runs" sh -c "[ $rc = 0 ] && grep -q 'RESULT E $G .* ok' '$tmp/e'"
"${as_a[@]}" VRAM_LOG=error VRAM_MEMORY_LIMIT=1GiB LD_PRELOAD="$kit/libvram-preload.so" "$kit/vram-demo-grab" F 1 100 \
  >"$tmp/f" 2>"$tmp/f.err"
check "the interposer's wait says how to go on without it" contains "$tmp/f.err" \
  "waiting up to 5 s for it (VRAM_DAEMON=off runs without vramd)"
check "the interposer's refusal names the file and VRAM_DAEMON=off" contains "$tmp/f.err" \
  "as its fallback file $fallback says; VRAM_DAEMON=off runs without vramd"

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
