#!/usr/bin/env bash
# vram run under vramd (issues 10 and 15): the command is one job of the
# ledger, one grant per GPU for all its processes, held by vram run for the
# command's life and back at once when vram run is killed; a program vramd
# refuses is not started (exit 75) and vram run says why, unless
# --start-anyway; --wait says that it waits, for how much, on which GPU,
# behind whom, and how long it waited; --limit above the card means the
# card, as without vramd; a restarted vramd gets the command's grant back.
set -u
build=${1:?usage: test_run_vramd.sh BUILD_DIR PEER MEMBER}
peer=${2:?} member=${3:?}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
daemon_test run-vramd "$build"
G=$((1 << 30))

start_daemon() {
  "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" --log info \
    >>"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  wait_for 10 "$vram" status >/dev/null 2>&1
}
printf 'default-budget 2GiB\nwhen-full wait 30s\nreconcile-every 100ms\n' >"$tmp/policy"
start_daemon || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start"; exit 1; }
uuid=$("$vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)
status() { "$vram" status --json; }
members_reported() { status | grep -q "\"command\":\"member\",\"job\":\"$1\""; }

# --- one job: a grant for the whole command, its processes inside it --------
"$vram" run --limit 4GiB --job train -- bash -c "
  '$member' hold $((3 * G)) 30 >'$tmp/a' &
  for i in \$(seq 100); do grep -qs HELD '$tmp/a' && '$vram' status --json | grep -q '\"command\":\"member\",\"job\":\"train\",\"budget\":0,\"used\":$((3 * G))' && break; sleep 0.05; done
  '$vram' status --json >'$tmp/ledger'
  '$member' hold $((2 * G)) 0 >'$tmp/b'
  '$member' hold $((1 * G)) 0 >'$tmp/c'
  kill %1; wait" 2>"$tmp/err"
check "the command is one job: its grant" grep -q "\"role\":\"job\",\"command\":\"bash\",\"job\":\"train\",\"budget\":$((4 * G)),\"used\":$((3 * G))" "$tmp/ledger"
check "its process under it, with no grant of its own" grep -q "\"role\":\"process\",\"command\":\"member\",\"job\":\"train\",\"budget\":0,\"used\":$((3 * G))" "$tmp/ledger"
check "the GPU counts the grant once" grep -q "\"granted\":$((4 * G))," "$tmp/ledger"
check "two processes holding more than the grant: the second is refused at it" contains "$tmp/b" "^REFUSED"
check "what is left of the grant is there" contains "$tmp/c" "^HELD"
check "the refusal names the command's use" contains "$tmp/err" "device 0 (GPU-[-0-9a-f]*) budget 4.00 GiB, in use 3.00 GiB by the command (this process 0 B, 1 other process 3.00 GiB), requested 2.00 GiB"
check "the peak of the command against its grant" contains "$tmp/err" "^vram: GPU 0 (GPU-[-0-9a-f]*): peak 4.00 GiB of 4.00 GiB budget; 1 allocation refused$"
check "one grant for the command, asked by vram run" sh -c "[ \$(grep -c 'granted 4.00 GiB' '$tmp/daemon.out') = 1 ] && grep -q '(root, bash): granted 4.00 GiB' '$tmp/daemon.out'"
check "its processes never asked vramd themselves" sh -c "! grep -q '(root, member): granted' '$tmp/daemon.out'"
check "the grant is back when the command ends" wait_for 5 is granted 0

# --- vram run killed: the grant is back at once --------------------------
"$vram" run --limit 4GiB -- "$member" hold $G 60 >"$tmp/k" 2>&1 &
r=$!
check "a command holds its grant" wait_for 10 is granted $((4 * G))
kill -9 $r; wait $r 2>/dev/null
check "kill -9 of vram run: its grant is back at once" wait_for 2 is granted 0
check "and its program went with it" wait_for 5 is used 0

# --- --limit above the card: refused, with vramd as without it (issue 22) -----
VRAM_DAEMON=off "$vram" run --limit 100GiB -- "$grab" A 1 >"$tmp/alone" 2>&1; rc_alone=$?
# The daemon's last NVML reading may still show the program that just ended
# (or the one killed above), outside any grant, until its next reconcile:
# the next run wants the whole card.
wait_for 10 is unseen 0
"$vram" run --limit 100GiB -- "$grab" A 1 >"$tmp/under" 2>&1; rc_under=$?
refused_big="^vram run: --limit 100GiB gives device 0 ($uuid) a budget of 100.00 GiB, and the GPU has 12.00 GiB: a budget there is at most that"
check "without vramd, 100 GiB on a 12 GiB card is refused, saying the card's size" \
  sh -c "[ $rc_alone = 2 ] && grep -q '$refused_big' '$tmp/alone' && ! grep -q RESULT '$tmp/alone'"
check "with vramd the same" sh -c "[ $rc_under = 2 ] && grep -q '$refused_big' '$tmp/under' && ! grep -q RESULT '$tmp/under'"
VRAM_MEMORY_LIMIT=100GiB LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$build" LD_PRELOAD=libvram-preload.so "$grab" A 1 >"$tmp/direct" 2>&1
check "the interposer reached by hand refuses it too" contains "$tmp/direct" \
  "VRAM_MEMORY_LIMIT=\"100GiB\" gives device 0 (12.00 GiB) a budget of 100.00 GiB, more than it has"

# --- refused: the program does not start, and vram run says why -------------
"$peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/hold" &
holder=$!
wait_for 5 contains "$tmp/hold" GRANT
"$vram" run --limit 6GiB -- sh -c "touch '$tmp/started'" 2>"$tmp/r.err"; rc=$?
check "refused: exit status 75" test $rc = 75
check "refused: the program was not started" test ! -e "$tmp/started"
check "refused: the reason, how much was asked and what is grantable" contains "$tmp/r.err" "^vram run: vramd refused 6.00 GiB on GPU 0 ($uuid): $uuid has 12.00 GiB: 8.00 GiB granted (root 8.00 GiB), 0 B reserved for others, 0 B used outside any grant, 4.00 GiB grantable; requested 6.00 GiB; the program was not started"
# Waiting is suggested only where it can help: the GPU is full for now.
check "a full GPU: --wait is suggested" contains "$tmp/r.err" "not started (--wait waits for the memory"
"$vram" run --limit 6GiB --start-anyway -- sh -c "touch '$tmp/started'; '$member' hold $G 0; exit 7" \
  >"$tmp/s.out" 2>"$tmp/s.err"; rc=$?
check "--start-anyway: the program starts" test -e "$tmp/started"
check "--start-anyway: with vram run's word for it" contains "$tmp/s.err" "; starting the program anyway (--start-anyway): it has no GPU memory there"
check "--start-anyway: and no memory on that GPU" sh -c "grep -q REFUSED '$tmp/s.out' && grep -q 'no GPU memory granted by vramd: vramd refused the command this GPU' '$tmp/s.err'"
check "--start-anyway: the program's exit status" test $rc = 7
rm -f "$tmp/started"

# --- --wait: says that it waits, for what, behind whom, and how long -------------
"$vram" run --limit 6GiB --wait=20s -- "$member" hold $G 0 >"$tmp/w1" 2>"$tmp/w1.err" &
w1=$!
check "--wait: says it waits, for how much, where, how long at most, behind whom" wait_for 5 \
  contains "$tmp/w1.err" "^vram run: waiting for 6.00 GiB on GPU 0 ($uuid), for up to 20.0 s: $uuid has 12.00 GiB: 8.00 GiB granted (root 8.00 GiB), .* 4.00 GiB grantable; requested 6.00 GiB$"
"$vram" run --limit 2GiB --wait=1s -- sh -c "touch '$tmp/started'" 2>"$tmp/w2.err"; rc=$?
check "--wait behind another: says whose request is ahead" contains "$tmp/w2.err" "^vram run: waiting for 2.00 GiB on GPU 0 ($uuid), for up to 1.0 s: 1 earlier request for $uuid waits for this memory (root 6.00 GiB)"
check "--wait that ends: how long it waited, and why" contains "$tmp/w2.err" "^vram run: gave up waiting for 2.00 GiB on GPU 0 ($uuid) after 1\.[0-9] s: waited as long as allowed: .*; the program was not started$"
check "--wait that ends: not started, exit 75" sh -c "[ $rc = 75 ] && [ ! -e '$tmp/started' ]"
kill -9 $holder; wait $holder 2>/dev/null
wait $w1
check "--wait: granted when memory comes back, and after how long" contains "$tmp/w1.err" "^vram run: granted 6.00 GiB on GPU 0 ($uuid) after waiting [0-9.]* s$"
check "--wait: then the program runs" contains "$tmp/w1" "^HELD"

# --- vramd restarted under a running command: its grant is held, then taken back ------
# The user's peak is counted once across the restart (issue 27 item 7): the
# new vramd sees the command's process outside any grant until vram run
# reports it again, and must not count it twice meanwhile.
user_peak() { "$vram" status --prometheus | sed -n 's/^vram_user_peak_bytes{.*} //p' | head -1; }
"$vram" run --limit 3GiB -- "$member" hold $G 8 >"$tmp/re" 2>&1 &
r=$!
check "a command's grant is in vramd's state file" wait_for 10 grep -q "^c .* run-$r $uuid $((3 * G)) -" "$tmp/state"
check "its process holds 1 GiB" wait_for 5 grep -q HELD "$tmp/re"
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
: >"$tmp/peaks"
check "vramd restarts" start_daemon
# The peak, read while vram run comes back, until after it has (a few of NVML's looks).
(for _ in $(seq 30); do user_peak >>"$tmp/peaks"; sleep 0.1; done) &
peaks=$!
check "vram run registers the command's grant again" wait_for 10 grep -q "pid $r (root): re-registered 3.00 GiB" "$tmp/daemon.out"
check "counted once" is granted $((3 * G))
check "and reports its process again" wait_for 5 members_reported "run-$r"
wait $peaks
check "the user's peak is the 1 GiB its process holds, never twice that" \
  sh -c "[ \"\$(sort -u '$tmp/peaks' | grep -v '^\$')\" = $G ] || { sort -u '$tmp/peaks'; false; }"
kill -9 $r; wait $r 2>/dev/null
check "all back" wait_for 5 is granted 0

# --- --per-process: each process its own grant, as before -----------------------
"$vram" run --limit 2GiB --per-process -- bash -c "'$member' hold $G 0 & '$member' hold $G 0; wait" \
  >"$tmp/pp" 2>&1
check "--per-process: each process asks its own grant" sh -c "[ \$(grep -c '(root, member): granted 2.00 GiB' '$tmp/daemon.out') = 2 ]"

# --- another user: their names only, as vram status shows them ---------------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null &&
   test_users a b; then
  kit=$tmp/kit
  make_kit "$build" "$peer" "$kit"
  as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB VRAM_SIM_CONTEXT_SIZE=0 "$@"; }
  as "$uid_a" "$kit/peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/ua" 2>&1 &
  pa=$!
  wait_for 5 contains "$tmp/ua" GRANT
  as "$uid_b" "$kit/vram" run --limit 6GiB --wait=1s -- true 2>"$tmp/ub.err"
  check "another user's wait names who holds the GPU" contains "$tmp/ub.err" "8.00 GiB granted ($user_a 8.00 GiB)"
  check "but not their process" sh -c "! grep -q 'peer\|pid $pa' '$tmp/ub.err'"
  kill -9 $pa; wait $pa 2>/dev/null
else
  echo "SKIP: the other-user part needs root, setpriv and useradd"
fi

echo "test_run_vramd: $passed passed, $failures failed"
[ $failures = 0 ]
