#!/usr/bin/env bash
# vramd under attack (issue 11): what one local user can try against the
# daemon and against other users, end to end, with real users (made for
# this run and deleted after it) on the simulated GPU and NVML. Each part
# names the item of the issue it holds to. Exit 77 (skipped) without root,
# useradd or setpriv: every part needs a second user.
#   test_attack.sh BUILD_DIR PEER HOLDER STALLING_NVML
set -u
build=${1:?usage: test_attack.sh BUILD_DIR PEER HOLDER STALLING_NVML} peer=${2:?} holder=${3:?}
stalling_nvml=${4:?}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to make test users"
for c in useradd userdel groupadd setpriv pkill; do
  command -v $c >/dev/null || missing "$c is not installed"
done
daemon_test attack "$build"
G=$((1 << 30))
# Up: answering, not only its socket there (a killed daemon leaves its socket).
daemon_up() { wait_for 10 sh -c "'$vram' status --json >/dev/null 2>&1"; }
start_daemon() { # POLICY-TEXT [extra options]
  printf '%b' "$1" >"$tmp/policy"; shift
  "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" --log info "$@" \
    >>"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  daemon_up
}
stop_daemon() { # (bounded: a daemon stuck in a trap is killed)
  kill -TERM "$daemon_pid" 2>/dev/null
  wait_for 5 sh -c "! kill -0 $daemon_pid 2>/dev/null" || kill -9 "$daemon_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null; daemon_pid=
}

test_users a b || { echo "FAIL: cannot make test users"; exit 1; }
test_group g "$user_a" || { echo "FAIL: cannot make a test group"; exit 1; }
kit=$tmp/kit
make_kit "$build" "$peer" "$kit"
env_kit=(env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB)
as_a=(setpriv --reuid="$uid_a" --regid="$gid_a" --groups="$gid_group_g" "${env_kit[@]}")
as_b=(setpriv --reuid="$uid_b" --regid="$gid_b" --clear-groups "${env_kit[@]}")

check "daemon starts" start_daemon "cap group $group_g 2GiB\nwhen-full fail\nreconcile-every 100ms\n"
uuid=$("$vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)

# --- item 10: groups are the kernel's, taken when the connection is made ------
timeout 10 "${as_a[@]}" "$kit/peer" "$S" hold "$uuid" $((3 * G)) >"$tmp/g1" 2>&1
check "item 10: a supplementary group's cap holds" contains "$tmp/g1" "DENY.*group $group_g may hold 2.00 GiB"
"${as_a[@]}" "$kit/peer" "$S" forkhello "$uuid" $((3 * G)) >"$tmp/g2" 2>&1
check "item 10: also for a child that speaks after the connecting parent exited" \
  wait_for 10 contains "$tmp/g2" "DENY.*group $group_g may hold 2.00 GiB"
check "item 10: and nothing was granted" is granted 0
pkill -9 -u "$user_a"

# --- item 8: a reservation for jobs is for the jobs root registered ----------
stop_daemon
start_daemon "reserve 8GiB for job critical-*\nwhen-full fail\n"
"${as_b[@]}" "$kit/vram" run --job critical-x --limit 10GiB -- "$kit/vram-demo-grab" J 1 >"$tmp/j8" 2>&1
check "item 8: a job name a user gives itself does not open a reservation" \
  contains "$tmp/j8" "vramd refused 10.00 GiB on GPU 0 .*8.00 GiB reserved for others"
"$peer" "$S" job critical-1 "$uid_b" "$gid_b" "$uuid" $((10 * G)) >"$tmp/j8b" 2>&1 &
j8=$!
check "item 8: a job root registered may use it" wait_for 5 contains "$tmp/j8b" GRANT
kill -9 $j8; wait $j8 2>/dev/null
# Issue 27 items 8 and 9: such a line is said at --check to be for Slurm
# steps only, and a refusal it causes says that waiting cannot help.
"$vramd" --check --policy "$tmp/policy" >"$tmp/check8" 2>&1
check "27.9: vramd --check warns the line matches only jobs root registers" contains "$tmp/check8" \
  "^warning: $tmp/policy:1: \"reserve ... for job critical-\*\" matches only jobs root registers (Slurm steps)"
"${as_b[@]}" "$kit/vram" run --job critical-x --limit 6GiB --wait=5s -- "$kit/vram-demo-grab" J 1 >"$tmp/w8" 2>&1
check "27.8: --wait, refused by a reservation: waiting cannot help, the reservation named" contains "$tmp/w8" \
  "vramd refused 6.00 GiB on GPU 0 .*8.00 GiB reserved for others (policy line 1: job critical-\*).*: waiting cannot help"
check "27.9: and a user's job of that name is told the line is for Slurm steps" contains "$tmp/w8" \
  "policy line 1, \"for job critical-\*\", is for jobs root registers (Slurm steps), not a user's own vram run --job"
# "for job NAME of user U": U's own commands and processes of that name may
# use it, no one else's.
stop_daemon
start_daemon "reserve 8GiB for job critical-* of user $user_a\nwhen-full fail\n"
"$vramd" --check --policy "$tmp/policy" >"$tmp/check8" 2>&1
check "27.9: no warning for a reservation that says whose jobs" sh -c "! grep -q warning '$tmp/check8'"
"${as_a[@]}" "$kit/vram" run --job critical-1 --limit 10GiB -- "$kit/vram-demo-grab" J 1 >"$tmp/a8" 2>&1
check "27.9: its user's vram run --job critical-1 may use it" contains "$tmp/a8" "^RESULT J 10737418240 .* ok"
# critical-1's memory gone from the ledger first: what NVML last said of its
# process stays until vramd's next reading, and this policy fails rather
# than waits.
check "27.9: critical-1's memory back" wait_for 10 sh -c "'$vram' status --json | grep -q '\"granted\":0,\"used\":0,'"
"${as_a[@]}" VRAM_JOB=critical-2 VRAM_MEMORY_LIMIT=10GiB LD_PRELOAD="$kit/libvram-preload.so" \
  "$kit/vram-demo-grab" K 1 >"$tmp/a8k" 2>&1
check "27.9: and a process of hers with VRAM_JOB=critical-2" contains "$tmp/a8k" "^RESULT K 10737418240 .* ok"
"${as_b[@]}" VRAM_JOB=critical-2 VRAM_MEMORY_LIMIT=10GiB LD_PRELOAD="$kit/libvram-preload.so" \
  "$kit/vram-demo-grab" K 1 >"$tmp/b8k" 2>&1
check "27.9: not a stranger's" contains "$tmp/b8k" "no GPU memory granted by vramd: .*waiting cannot help"
"${as_b[@]}" "$kit/vram" run --job critical-1 --limit 10GiB -- "$kit/vram-demo-grab" J 1 >"$tmp/b8" 2>&1
check "27.9: a stranger naming the same job cannot" contains "$tmp/b8" \
  "vramd refused 10.00 GiB on GPU 0 .*8.00 GiB reserved for others (policy line 1: job critical-\* of user $user_a).*waiting cannot help"

# --- item 7: many waiters with a job name cost the daemon little ----------------
stop_daemon
start_daemon "when-full wait 1m\n"
"$peer" "$S" hold "$uuid" $((12 * G)) >"$tmp/full" 2>&1 &
full=$!
wait_for 5 contains "$tmp/full" GRANT
"${as_a[@]}" "$kit/peer" "$S" waiters 1200 "$uuid" $G 42.0 60000 >"$tmp/w7" 2>&1 &
w7=$!
check "item 7: 1,200 requests with a job name wait" wait_for 60 contains "$tmp/w7" "^1200 waiting"
check "item 7: root's status still answers" sh -c "timeout 10 '$vram' status --json >'$tmp/s7'"
check "item 7: and shows them" sh -c "[ \$(grep -o '\"queue_position\":[0-9]*' '$tmp/s7' | wc -l) = 1200 ]"
kill -9 $full; wait $full 2>/dev/null
check "item 7: a freed GPU goes to the first waiters at once" wait_for 10 is granted $((12 * G))
kill -9 $w7; wait $w7 2>/dev/null

# --- item 3: one user cannot take the daemon's descriptors ------------------------
# The daemon may have 400 descriptors; user a opens 600 connections that say
# nothing, user b the same. Each is held to its share, root keeps a reserve,
# the silent ones are closed after a while, and user b's program is still
# governed.
stop_daemon
printf 'default-budget 2GiB\nwhen-full fail\nconnections-per-user 150\nfirst-message-within 2s\n' >"$tmp/policy"
prlimit --nofile=400:400 "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" \
  --log info >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
daemon_up
"${as_a[@]}" "$kit/peer" "$S" idle 600 >"$tmp/i3a" 2>&1 &
i3a=$!
wait_for 10 contains "$tmp/i3a" connected
check "item 3: a user's connections beyond their share are refused" \
  wait_for 5 contains "$tmp/daemon.out" "uid $uid_a has 150 connections, the most a user may have"
check "item 3: root's status answers" sh -c "timeout 10 '$vram' status --json >/dev/null"
"${as_b[@]}" "$kit/vram" run -- "$kit/vram-demo-grab" B3 1 >"$tmp/b3" 2>&1
check "item 3: another user's program is governed (it sees the policy's 2 GiB)" contains "$tmp/b3" "RESULT B3 2147483648 "
check "item 3: connections that say nothing are closed" \
  wait_for 10 sh -c "[ \$(ss -x -p 2>/dev/null | grep -c 'pid=$daemon_pid,') -lt 20 ]"
kill -9 $i3a; wait $i3a 2>/dev/null
# Several users together reach the daemon's limit: root keeps its reserve,
# and the daemon backs off instead of spinning on accept and flooding its log.
printf 'default-budget 2GiB\nwhen-full fail\nconnections-per-user 1000\n' >"$tmp/policy"
kill -HUP $daemon_pid
wait_for 5 sh -c "[ \$(grep -c 'reloaded' '$tmp/daemon.out') -ge 1 ]"
rm -f "$tmp/i3a" # the last one's: read below before the redirection is made
"${as_a[@]}" "$kit/peer" "$S" idle 600 >"$tmp/i3a" 2>&1 &
i3a=$!
"${as_b[@]}" "$kit/peer" "$S" idle 600 >"$tmp/i3b" 2>&1 &
i3b=$!
wait_for 20 sh -c "grep -q connected '$tmp/i3a' && grep -q connected '$tmp/i3b'"
for i in 1 2 3; do "$vram" status --json >/dev/null 2>&1; done
check "item 3: at the daemon's limit, root's status still answers" sh -c "timeout 10 '$vram' status --json >/dev/null"
sleep 3
check "item 3: and its log says so a few times, not thousands" \
  sh -c "[ \$(grep -c 'connection limit\|accept:' '$tmp/daemon.out') -le 5 ]"
kill -9 $i3a $i3b; wait $i3a $i3b 2>/dev/null

# --- item 4: a daemon that is down is not a node without budgets ------------------
stop_daemon
start_daemon "default-budget 4GiB\nwhen-full fail\nreconcile-every 100ms\n"
check "item 4: the daemon says what a process gets while it is down" \
  wait_for 5 grep -q "^$uuid $((4 * G))\$" "$tmp/vramd.fallback"
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
"${as_b[@]}" "$kit/vram" run -- "$kit/vram-demo-grab" D4 80 >"$tmp/d4" 2>"$tmp/d4.err" &
d4=$!
check "item 4: a program started meanwhile waits a while for the daemon, and says so" \
  wait_for 5 contains "$tmp/d4.err" "does not answer .*waiting up to 5 s"
check "item 4: then it is held to the policy's default budget" \
  wait_for 10 contains "$tmp/d4.err" "the command is held to 4.00 GiB on GPU 0 until it is back"
start_daemon "default-budget 4GiB\nwhen-full fail\nreconcile-every 100ms\n"
check "item 4: and registers when the daemon is back" wait_for 10 sh -c "'$vram' status --json | grep -q '\"role\":\"job\",\"command\":\"vram-demo-grab\",\"job\":\"run-$d4\",\"budget\":$((4 * G))'"
wait $d4
check "item 4: it ran within that budget" contains "$tmp/d4" "RESULT D4 $((4 * G)) "
# Registered also when the daemon is back to a busy GPU (a process's own
# standing, the agent's: --per-process). R4 holds its 4 GiB
# while the daemon is down and is stopped meanwhile; then root holds 5 GiB
# and another process of user b 3 GiB of b's 6 GiB cap. R4's budget does not
# fit b's cap yet: it is offered again until it does, and its memory, in use
# already, is counted once (5 + 4 of 12 GiB, not 5 + 4 + 4).
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
"${as_b[@]}" "$kit/vram" run --per-process -- "$kit/vram-demo-grab" R4 600 >"$tmp/r4" 2>"$tmp/r4.err" &
r4=$!
wait_for 15 contains "$tmp/r4.err" "held to 4.00 GiB"
r4p=$(command_of $r4)
kill -STOP $r4p
start_daemon "default-budget 4GiB\ncap user $user_b 6GiB\nwhen-full fail\nreconcile-every 100ms\n"
"$peer" "$S" hold "$uuid" $((5 * G)) >"$tmp/r4root" 2>&1 &
r4root=$!
"${as_b[@]}" "$kit/peer" "$S" hold "$uuid" $((3 * G)) >"$tmp/r4b" 2>&1 &
r4b=$!
wait_for 5 sh -c "grep -q GRANT '$tmp/r4root' && grep -q GRANT '$tmp/r4b'"
wait_for 5 is unseen $((4 * G))
kill -CONT $r4p
check "item 4: a budget the daemon cannot take yet stays held to it" \
  wait_for 5 contains "$tmp/daemon.out" "pid $r4p ($user_b, vram-demo-grab): refused .*may hold 6.00 GiB"
kill -9 $r4b; wait $r4b 2>/dev/null
check "item 4: and is registered once it fits, its memory counted once" \
  wait_for 10 sh -c "'$vram' status --json | grep -q '\"pid\":$r4p,\"uid\":$uid_b,\"user\":\"$user_b\",\"role\":\"process\",\"command\":\"vram-demo-grab\",\"job\":\"-\",\"budget\":$((4 * G))'"
check "item 4: no more granted than the GPU has" is granted $((9 * G))
kill $r4 $r4root; wait $r4 $r4root 2>/dev/null
stop_daemon   # a clean stop removes the socket and the fallback (test_daemon_stop.sh)
check "item 4: a clean stop leaves no fallback file" test ! -e "$tmp/vramd.fallback"
printf 'cap user %s 4GiB\n' "$user_b" >"$tmp/policy.nodefault"
"$vramd" --socket "$S" --policy "$tmp/policy.nodefault" --state "$tmp/state" >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
daemon_up
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null; daemon_pid=
"${as_b[@]}" "$kit/vram" run --limit 1GiB -- "$kit/vram-demo-grab" F4 1 >"$tmp/f4" 2>&1
check "item 4: and with no default budget, nothing is taken while it is down" \
  contains "$tmp/f4" "vramd at .* does not answer .*its policy (no default-budget) lets no command take memory of GPU 0 .* while it is down, as its fallback file .* says; the program was not started"
rm -f "$S" "$tmp/vramd.fallback" # as a clean stop leaves it

# --- item 11: a socket someone else put where a daemon's would be --------------------
# User b makes the directory of user a's own daemon and a "daemon" in it.
bare_a=(setpriv --reuid="$uid_a" --regid="$gid_a" --clear-groups env -u VRAM_DAEMON -u XDG_RUNTIME_DIR LD_LIBRARY_PATH="$kit/sim" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB)
hij=/tmp/vram-$uid_a
if [ ! -e /run/vram/vramd.sock ] && [ ! -e /run/vram/vramd.fallback ] && [ ! -e "$hij" ]; then
  "${as_b[@]}" mkdir -m 777 "$hij"
  "${as_b[@]}" "$kit/peer" "$hij/vramd.sock" serve "$hij/seen" &
  fake=$!
  wait_for 5 test -S "$hij/vramd.sock"
  timeout 40 "${bare_a[@]}" "$kit/vram" run --limit 1GiB -- "$kit/vram-demo-grab" H11 1 >"$tmp/h11" 2>&1; rc=$?
  check "item 11: a program does not wait on a socket another user put in its daemon's place" test $rc != 124
  check "item 11: it says it ignored it" contains "$tmp/h11" "ignored $hij/vramd.sock: .* belongs to uid $uid_b"
  check "item 11: and runs with its own budget" contains "$tmp/h11" "RESULT H11 $G "
  check "item 11: the other user learnt nothing of it" sh -c "! grep -qs HELLO '$hij/seen'"
  kill -9 $fake; wait $fake 2>/dev/null
  rm -rf "$hij"
else
  echo "SKIP: item 11's hijack part: a system vramd, or $hij, is on this machine"
fi
# A "daemon" of user a's own that answers HELLO and then never a request,
# or WAIT again and again past the time it said: every wait is bounded, and
# the program runs with its own budget. The two at once (each is a wait of
# 10 s): a daemon and a folder each.
declare -A fake run
for mode in silent wait; do
  mkdir "$tmp/own-$mode"; chown "$uid_a" "$tmp/own-$mode"
  "${bare_a[@]}" "$kit/peer" "$tmp/own-$mode/vramd.sock" serve "$tmp/own-$mode/seen" ${mode#silent} &
  fake[$mode]=$!
done
for mode in silent wait; do
  wait_for 5 test -S "$tmp/own-$mode/vramd.sock"
  timeout 40 "${bare_a[@]}" VRAM_DAEMON="$tmp/own-$mode/vramd.sock" "$kit/vram" run --limit 1GiB -- \
    "$kit/vram-demo-grab" M11 1 >"$tmp/m11.$mode" 2>&1 &
  run[$mode]=$!
done
for mode in silent wait; do
  wait ${run[$mode]}; rc=$?
  case $mode in
    silent) what="never answers" ;;
    wait) what="keeps a request waiting for ever" ;;
  esac
  check "item 11: a daemon that $what does not hold a program for ever" test $rc != 124
  check "item 11: it runs with its own budget ($mode)" contains "$tmp/m11.$mode" "RESULT M11 $G "
  kill -9 ${fake[$mode]}; wait ${fake[$mode]} 2>/dev/null
done

# --- item 14 (the daemon's part): NVML is never waited for on the loop ------------
stop_daemon
printf 'when-full fail\nreconcile-every 100ms\n' >"$tmp/policy"
touch "$tmp/stall"
NVML_STALL_FILE=$tmp/stall "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" \
  --nvml "$stalling_nvml" --log info >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
check "item 14: the daemon starts while NVML's process list stalls" daemon_up
sleep 1
check "item 14: status answers while NVML stalls" sh -c "for i in 1 2 3 4 5; do timeout 4 '$vram' status --json >/dev/null || exit 1; done"
timeout 5 "$peer" "$S" hold GPU-57a11000-0000-4000-8000-000000000000 $G >"$tmp/h14" 2>&1
check "item 14: and requests are admitted" contains "$tmp/h14" GRANT
check "item 14: the stall is said in the log" wait_for 15 contains "$tmp/daemon.out" "NVML has not answered for"
rm -f "$tmp/stall"
check "item 14: and its end" wait_for 5 contains "$tmp/daemon.out" "NVML answers again"

# --- item 2: a status is paged; a reader that never reads pins nothing extra ----
# --- item 13: other users' processes stay private, in status and the metrics file
stop_daemon
start_daemon "when-full fail\n" --metrics-file "$tmp/m13.prom" --metrics-every 100ms
"${as_a[@]}" "$kit/peer" "$S" waiters 300 "$uuid" $((1 << 20)) 13.0 0 >"$tmp/a13" 2>&1 &
a13=$!
check "item 2: 300 clients of user a" wait_for 30 is granted $((300 << 20))
"$vram" status --json >"$tmp/root13"
check "item 2: root's status has them all, page after page" sh -c "[ \$(grep -o '\"role\":\"process\"' '$tmp/root13' | wc -l) = 300 ]"
stallers=()
for i in $(seq 30); do
  "${as_b[@]}" "$kit/peer" "$S" stall "VRAM/1 STATUS" >/dev/null 2>&1 &
  stallers+=($!)
done
sleep 1
check "item 2: 30 readers that never read leave the daemon's buffers as they are" \
  sh -c "ss -x -m -p | grep 'pid=$daemon_pid,' | grep -o 'tb[0-9]*' | sort -u | awk -F tb '\$2 > 1048576 { bad = 1 } END { exit bad }'"
check "item 2: and the daemon serves others meanwhile" sh -c "timeout 10 '$vram' status --json >/dev/null"
kill -9 "${stallers[@]}"; wait "${stallers[@]}" 2>/dev/null
"${as_b[@]}" "$kit/vram" status --json >"$tmp/b13"
check "item 13: user b sees a's total" grep -q "{\"device\":0,\"uid\":$uid_a,\"user\":\"$user_a\",\"processes\":300,\"budget\":$((300 << 20))," "$tmp/b13"
check "item 13: and none of a's processes" sh -c "! grep -q '\"role\":\"process\"' '$tmp/b13'"
"${as_b[@]}" "$kit/vram" top --once >"$tmp/b13top"
check "item 13: nor in vram top" sh -c "! sed 1d '$tmp/b13top' | grep -qF ' 13.0 ' && grep -q '$user_a' '$tmp/b13top'"
check "item 13: the metrics file (anyone may read it) has a's total" \
  wait_for 5 grep -q "vram_user_budget_bytes{.*user=\"$user_a\".*} $((300 << 20))" "$tmp/m13.prom"
check "item 13: and no process, pid or job" sh -c "! grep -E 'pid=\"[1-9]|job=\"13|role=\"process' '$tmp/m13.prom'"
kill -9 $a13; wait $a13 2>/dev/null

# --- item 15: a policy caught half-written is not loaded ----------------------
stop_daemon
start_daemon "cap user $user_b 1GiB\nwhen-full fail\n"
: >"$tmp/policy"   # as an in-place rewrite leaves it for a moment
kill -HUP $daemon_pid
check "item 15: an empty policy is refused on reload" wait_for 5 contains "$tmp/daemon.out" "$tmp/policy: the file is empty.*keeping the policy in force"
printf 'cap user %s 1GiB\nwhen-full f' "$user_b" >"$tmp/policy"
kill -HUP $daemon_pid
check "item 15: so is one cut short" wait_for 5 contains "$tmp/daemon.out" "$tmp/policy:2: when-full takes.*keeping the policy in force"
timeout 10 "${as_b[@]}" "$kit/peer" "$S" hold "$uuid" $((2 * G)) >"$tmp/p15" 2>&1
check "item 15: and the cap in force still holds" contains "$tmp/p15" "DENY.*may hold 1.00 GiB"
printf 'when-full fail\n' >"$tmp/policy"
# Issue 22, item 17: a policy replaced by a FIFO (opening one waits for a
# writer, forever) or a link is refused, and the daemon goes on answering.
rm "$tmp/policy" && mkfifo "$tmp/policy"
kill -HUP $daemon_pid
check "a FIFO for a policy is refused on reload, by name" \
  wait_for 5 contains "$tmp/daemon.out" "$tmp/policy: not a regular file but a FIFO.*keeping the policy in force"
check "and the daemon still answers" sh -c "timeout 10 '$vram' status --json >/dev/null"
# Issue 26 item 10: a link is followed (Kubernetes ConfigMaps are links),
# and what it leads to is checked: a file another user may write is not.
rm "$tmp/policy" && printf 'when-full fail\nreconcile-every 2s\n' >"$tmp/policy.real" &&
  chmod 644 "$tmp/policy.real" && ln -s policy.real "$tmp/policy"
kill -HUP $daemon_pid
check "a symbolic link to the policy is read on reload" \
  wait_for 5 contains "$tmp/daemon.out" "policy $tmp/policy reloaded (2 directives"
check "and at start (vramd --check)" "$vramd" --check --policy "$tmp/policy"
chmod 666 "$tmp/policy.real"
kill -HUP $daemon_pid
check "but not one to a file anyone may write, named" wait_for 5 contains "$tmp/daemon.out" \
  "$tmp/policy (a link to $tmp/policy.real): writable by every user (mode 0666).*keeping the policy in force"
rm "$tmp/policy" "$tmp/policy.real" && printf 'when-full fail\n' >"$tmp/policy"

# --- item 5: a restart never overcommits ------------------------------------------
# Holders with grants and (almost) no memory in use are stopped across the
# restart, so they cannot re-register at once; a new request comes first.
stop_daemon
start_daemon "when-full fail\nreconcile-every 100ms\n"
# Holders read their stdin until it closes: a FIFO this shell keeps open, so
# they hold until killed and leave nothing behind.
mkfifo "$tmp/hold.fifo"
exec 9<>"$tmp/hold.fifo"
hold() { # NAME SIZE: a libvram process granted SIZE, using 2 MiB of it, until killed
  VRAM_MEMORY_LIMIT=$2 VRAM_ALLOW_GROWTH=true "$holder" 1MiB >"$tmp/$1" 2>&1 <&9 &
}
hold h5a 8GiB; h5a=$!
check "item 5: a holder is granted 8 GiB" wait_for 10 contains "$tmp/h5a" held
hold h5b 2GiB; h5b=$!
wait_for 10 contains "$tmp/h5b" held
check "item 5: and its grant is in the state file" wait_for 5 grep -q "^p $h5a .* $((8 * G)) -" "$tmp/state"
kill -STOP $h5a $h5b
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
kill -9 $h5b; wait $h5b 2>/dev/null   # one holder dies while the daemon is down
start_daemon "when-full fail\nreconcile-every 100ms\n"
timeout 10 "$peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/n5" 2>&1
check "item 5: after the restart, a new request cannot take a held grant" contains "$tmp/n5" "DENY.*GiB granted.*requested 8.00 GiB"
check "item 5: a held grant whose process is gone is free at once" wait_for 3 is granted $((8 * G))
kill -CONT $h5a
check "item 5: the holder takes its grant back" wait_for 10 contains "$tmp/daemon.out" "pid $h5a (root): re-registered 8.00 GiB"
check "item 5: never more granted than the GPU" is granted $((8 * G))
kill -9 $h5a; wait $h5a 2>/dev/null
check "item 5: and it comes back when the holder ends" wait_for 5 is granted 0
# The same across a SIGTERM restart, and a held grant whose owner does not
# come back within the grace period is free after it.
hold h5c 6GiB; h5c=$!
wait_for 10 contains "$tmp/h5c" held
kill -STOP $h5c
stop_daemon
start_daemon "when-full fail\nreconcile-every 100ms\n"
timeout 10 "$peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/n5b" 2>&1
check "item 5: also after SIGTERM" contains "$tmp/n5b" "DENY"
check "item 5: an owner that does not come back loses it after the grace period" wait_for 15 is granted 0
kill -9 $h5c; wait $h5c 2>/dev/null

# --- item 12: the daemon's files in a shared directory stay its own ----------
# Started after a pause, so that user b knows its pid, and with it the names
# a daemon once used for its temporary files, and lays traps there first.
stop_daemon
shared=$tmp/shared
mkdir -m 1777 "$shared"
sh -c 'sleep 1; exec "$@"' sh "$vramd" --socket "$S" --policy "$tmp/policy" \
  --state "$shared/state" --metrics-file "$shared/m.prom" --metrics-every 100ms \
  >>"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
"${as_b[@]}" sh -c "mkfifo '$shared/m.prom.tmp.$daemon_pid' && echo x >'$shared/state.tmp.$daemon_pid' && chmod 666 '$shared/state.tmp.$daemon_pid'"
daemon_up
check "item 12: a FIFO where the metrics go does not stop the daemon" sh -c "timeout 5 '$vram' status --json >/dev/null"
check "item 12: the metrics file is the daemon's" wait_for 5 sh -c "[ \"\$(stat -c %U:%a '$shared/m.prom' 2>/dev/null)\" = root:644 ]"
"$peer" "$S" hold "$uuid" $G >"$tmp/h12" 2>&1 &
h12=$!
wait_for 5 contains "$tmp/h12" GRANT
check "item 12: the state file is the daemon's alone" wait_for 5 sh -c "[ \"\$(stat -c %U:%a '$shared/state' 2>/dev/null)\" = root:600 ] && grep -q '^p .* GPU-' '$shared/state'"
kill -9 $h12; wait $h12 2>/dev/null

# --- item 17: a state file that could not be written is written when it can --
stop_daemon
start_daemon "when-full fail\n" --state "$tmp/later/state"
"$peer" "$S" hold "$uuid" $G >"$tmp/h17" 2>&1 &
h17=$!
wait_for 5 contains "$tmp/h17" GRANT
sleep 0.3
mkdir "$tmp/later"
check "item 17: the state file is written once its directory exists" wait_for 3 grep -qs '^p .* GPU-' "$tmp/later/state"
kill -9 $h17; wait $h17 2>/dev/null

stop_daemon
echo "test_attack: $passed passed, $failures failed"
[ $failures = 0 ]
