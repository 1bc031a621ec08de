#!/usr/bin/env bash
# vramd end to end on the simulated GPU and NVML: admission and the queue,
# reclaim when a client dies (also 200 of them killed at random), a daemon
# killed and restarted mid-run, policy reload, users who cannot touch each
# other's grants, bad messages, NVML reconciliation and the metrics file.
set -u
build=${1:?usage: test_daemon.sh BUILD_DIR PEER CHURN}
peer=${2:?} churn=${3:?}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
daemon_test daemon "$build"
# A CUDA context (the simulated H100's, sim/config.h) is inside every grant.
unset VRAM_SIM_CONTEXT_SIZE
C=$((518 << 20))
G=$((1 << 30))

start_daemon() { # POLICY-FILE [extra options]
  local policy=$1; shift
  "$vramd" --socket "$S" --policy "$policy" --state "$tmp/state" --log info \
    --metrics-file "$tmp/metrics.prom" --metrics-every 100ms "$@" >>"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  wait_for 10 test -S "$S"
}

cat >"$tmp/policy" <<EOC
default-budget 2GiB
when-full wait 20s
reconcile-every 100ms
over-margin 64MiB
EOC
"$vramd" --check --policy "$tmp/policy" >"$tmp/check" 2>&1
check "policy check: what the file says" contains "$tmp/check" "$tmp/policy: 4 directives, 0 rules"
check "policy check: line by line" contains "$tmp/check" "line 2: when-full wait 20s"
check "policy check: against NVML's GPUs" contains "$tmp/check" "checked against the 1 GPU NVML lists"
# Item 23 of issue 11: rules that cannot hold on this node are errors with their line.
printf 'cap user root 8GiB on 5\nreserve 100GiB for user root on GPU-ffff\n' >"$tmp/bad-policy"
"$vramd" --check --policy "$tmp/bad-policy" >"$tmp/check" 2>&1; rc=$?
check "policy check: a GPU that is not there" sh -c "[ $rc = 1 ] && grep -q 'bad-policy:1: \"on 5\": this node has 1 GPU' '$tmp/check'"
printf 'reserve 4GiB for user root\nreserve 40GiB for job x\n' >"$tmp/bad-policy"
"$vramd" --check --policy "$tmp/bad-policy" >"$tmp/check" 2>&1; rc=$?
check "policy check: reservations beyond the GPU" sh -c "[ $rc = 1 ] && grep -q 'bad-policy:2: reservations on GPU 0 .* add up to 44.00 GiB, more than its 12.00 GiB' '$tmp/check'"
"$vramd" --socket "$tmp/never.sock" --policy "$tmp/bad-policy" >"$tmp/check" 2>&1; rc=$?
check "and the daemon does not start with them" sh -c "[ $rc = 1 ] && [ ! -e '$tmp/never.sock' ]"
"$vramd" --policy /nonexistent.conf 2>"$tmp/err"; rc=$?
check "a missing policy file stops the daemon" test $rc = 1
check "and says which" contains "$tmp/err" "/nonexistent.conf: cannot open"
"$vramd" --metrics-every soon 2>"$tmp/err"; rc=$?
check "bad option value" sh -c "[ $rc = 2 ] && grep -q '\"soon\".*accepted' '$tmp/err'"
"$vram" status >"$tmp/out" 2>"$tmp/err"; rc=$?
check "status without a daemon says so, and exits with 3 (NVML's view)" \
  sh -c "[ $rc = 3 ] && tr '\\n' ' ' <'$tmp/out' | grep -q 'vramd does not answer: cannot reach vramd'"
check "daemon starts" start_daemon "$tmp/policy"
check "it says what it serves, in words (1 GPU, not 1 GPUs)" \
  wait_for 10 grep -q "serving $S (1 GPU from NVML, policy $tmp/policy)" "$tmp/daemon.out"
uuid=$("$vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)
check "NVML's device is in the ledger" test -n "$uuid"
check "it has the device's total" is total $((12 * G))

# --- admission: a budget is granted, a default is given, a wait ends ------
"$vram" run --limit 4GiB -- "$grab" A 1 >"$tmp/out" 2>&1
check "granted budget is the device seen, the context inside it" contains "$tmp/out" "RESULT A 4294967296 $((4294967296 - C)) ok"
"$vram" run -- "$grab" B 1 >"$tmp/out" 2>&1
check "no budget: the policy's default" contains "$tmp/out" "RESULT B 2147483648 0 OOM"
check "everything back after exit" wait_for 5 is granted 0

"$peer" "$S" hold "$uuid" $((8 * G)) >"$tmp/hold1" &
holder=$!
check "holder granted" wait_for 5 contains "$tmp/hold1" GRANT
"$vram" run --wait=20s --limit 6GiB -- "$grab" W 1 >"$tmp/w.out" 2>"$tmp/w.err" &
waiter=$!
check "a job that does not fit waits" wait_for 5 \
  sh -c "'$vram' status --json | grep -q '\"waiting_for\":$((6 * G))'"
"$vram" run --wait=1s --limit 6GiB -- "$grab" T 1 >"$tmp/t.out" 2>"$tmp/t.err"; rc=$?
check "a wait that times out fails: the program is not started" test $rc = 75
check "and says why" contains "$tmp/t.err" "gave up waiting for 6.00 GiB on GPU 0 .*: waited as long as allowed: .*8.00 GiB granted"
# VRAM_WAIT is a duration, as --wait is: 1 is one second (not "true", which
# would wait the policy's 20 s); a value it cannot read is named.
VRAM_WAIT=1 timeout 15 "$vram" run --limit 6GiB -- "$grab" V 1 >"$tmp/v.out" 2>"$tmp/v.err"; rc=$?
check "VRAM_WAIT=1 waits one second, and the program is not started" sh -c "[ $rc = 75 ] && grep -q 'waited as long as allowed' '$tmp/v.err'"
VRAM_WAIT=soon "$vram" run --limit 1GiB -- "$grab" V 1 >"$tmp/v.out" 2>"$tmp/v.err"
check "a bad VRAM_WAIT is named, with what is accepted" \
  contains "$tmp/v.err" 'VRAM_WAIT="soon": not a number; accepted: the longest wait for memory, as seconds'
"$vram" run --limit 13GiB -- "$grab" X 1 >"$tmp/x.out" 2>"$tmp/x.err"
check "what can never fit is refused at once" contains "$tmp/x.err" "has 12.00 GiB"
kill -9 $holder; wait $holder 2>/dev/null
check "the waiter starts when the holder ends" wait_for 10 contains "$tmp/w.out" "RESULT W 6442450944 $((6442450944 - C)) ok"
wait $waiter 2>/dev/null

# --- reclaim: a SIGKILLed client's grant comes back at once --------------
"$peer" "$S" hold "$uuid" $((5 * G)) >"$tmp/hold2" &
h=$!
wait_for 5 contains "$tmp/hold2" GRANT
check "grant held" is granted $((5 * G))
kill -9 $h; wait $h 2>/dev/null
check "grant back after SIGKILL" wait_for 2 is granted 0

# --- reconcile: NVML's view; use outside any grant; over budget ----------
"$grab" U 600 >/dev/null 2>&1 &   # no interposer: the daemon only sees it through NVML
unmanaged=$!
some_unseen() { [ "$(field unseen)" -gt 0 ] 2>/dev/null; }
check "usage outside any grant is seen" wait_for 5 some_unseen
timeout 10 "$peer" "$S" hold "$uuid" $((9 * G)) >"$tmp/hold3" 2>&1
check "and counts against admission" contains "$tmp/hold3" "used outside any grant"
kill -9 $unmanaged; wait $unmanaged 2>/dev/null
check "unseen usage gone with its process" wait_for 5 is unseen 0
"$peer" "$S" hold "$uuid" $((1 * G)) 0 $((2 * G)) >"$tmp/hold4" &
over=$!
check "a process over its budget by NVML is reported" wait_for 5 contains "$tmp/daemon.out" "over its budget of 1.00 GiB"
check "and flagged in the ledger" wait_for 5 sh -c "'$vram' status --json | grep -q '\"over_budget\":true'"
kill -9 $over; wait $over 2>/dev/null

# --- metrics file -------------------------------------------------------
check "metrics file written" wait_for 5 contains "$tmp/metrics.prom" "^vram_gpu_memory_total_bytes{gpu=\"0\",UUID=\"$uuid\",.*} $((12 * G))"
check "metrics file readable by node_exporter" sh -c "[ \"\$(stat -c %a '$tmp/metrics.prom')\" = 644 ]"
"$vram" status --prometheus >"$tmp/prom"
check "status --prometheus" contains "$tmp/prom" "# TYPE vram_gpu_memory_granted_bytes gauge"
"$vram" top --once >"$tmp/top"
# Columns, not bytes: the trend may be drawn in Unicode blocks (wc -L counts as a terminal does).
check "top fits 80 columns" sh -c "[ \$(LC_ALL=C.UTF-8 wc -L <'$tmp/top') -le 80 ]"
check "top shows the device" contains "$tmp/top" "$uuid"

# --- malformed messages never crash the daemon or change the ledger -------
"$peer" "$S" hold "$uuid" $((3 * G)) >"$tmp/hold5" &
h5=$!
wait_for 5 contains "$tmp/hold5" GRANT
"$peer" "$S" send "VRAM/2 HELLO role=process" "garbage" "" "VRAM/1 HELLO role=process x" \
  "@big:5000" "VRAM/1 REQUEST dev=$uuid bytes=1" "VRAM/1 HELLO role=process cmd=a\\x00b" \
  "VRAM/1 HELLO role=process" "VRAM/1 HELLO role=process" \
  "VRAM/1 REQUEST dev=$uuid bytes=99999999999999999999999" "VRAM/1 REPORT dev=nope used=1" \
  "VRAM/1 GRANT dev=$uuid bytes=1" "VRAM/1 RELEASE dev=GPU-none" >"$tmp/bad"
check "wrong version named" contains "$tmp/bad" 'ERR text=protocol version "2"; this end speaks VRAM/1'
check "garbage named" contains "$tmp/bad" 'ERR text=a message that does not start with VRAM/1'
check "oversized named" contains "$tmp/bad" "ERR text=a message of 5000 bytes; at most 1024"
check "request before hello" contains "$tmp/bad" "ERR text=REQUEST before HELLO"
check "hello twice" contains "$tmp/bad" "ERR text=HELLO twice"
check "huge number" contains "$tmp/bad" "ERR text=REQUEST: bytes="
check "a daemon's verb from a client" contains "$tmp/bad" "ERR text=GRANT is not something a client sends"
"$peer" "$S" send $(for i in $(seq 20); do echo junk; done) >"$tmp/bad2"
check "a client that keeps sending junk is dropped" contains "$tmp/bad2" closed
for i in 1 2 3 4 5; do "$peer" "$S" send "$(head -c 600 /dev/urandom | tr -d '\0')" >/dev/null 2>&1; done
check "daemon alive after bad input" kill -0 $daemon_pid
check "ledger unchanged by bad input" is granted $((3 * G))
kill -9 $h5; wait $h5 2>/dev/null
check "and empty again" wait_for 2 is granted 0

# --- SIGHUP: a bad policy is refused and the good one kept ----------------
printf 'default-budget 2GiB\ncap user root 3GiB\nwhen-full wait 20s\nreconcile-every 100ms\n' >"$tmp/policy"
kill -HUP $daemon_pid
check "reload applied" wait_for 5 contains "$tmp/daemon.out" "policy $tmp/policy reloaded (4 directives, 1 rule)"
printf 'cap user root 3GiB\ncap usr root 1GiB\n' >"$tmp/policy"
kill -HUP $daemon_pid
check "bad reload names file and line" wait_for 5 contains "$tmp/daemon.out" "$tmp/policy:2: \"usr\": expected user or group; keeping the policy in force"
"$vram" run --limit 4GiB -- "$grab" C 1 >"$tmp/out" 2>"$tmp/err"
check "the cap of the good policy holds" contains "$tmp/err" "user root may hold 3.00 GiB"
"$peer" "$S" hold "$uuid" $((2 * G)) >"$tmp/h6" &
h6=$!
check "clients kept across reloads" wait_for 5 contains "$tmp/h6" GRANT
kill -9 $h6; wait $h6 2>/dev/null
printf 'default-budget 2GiB\nwhen-full wait 20s\nreconcile-every 100ms\n' >"$tmp/policy"
kill -HUP $daemon_pid
wait_for 5 sh -c "[ \$(grep -c 'reloaded' '$tmp/daemon.out') -ge 2 ]"

# --- the daemon killed and restarted mid-run --------------------------------
rpids=()
for n in 1 2 3; do
  "$vram" run --limit 3584MiB -- "$grab" R$n 150 3000 >"$tmp/r$n" 2>&1 &
  rpids+=($!)
done
check "three clients registered" wait_for 10 is granted $((21 * G / 2))
check "their grants are in the state file" wait_for 5 sh -c "[ \$(grep -c '^c .* GPU-' '$tmp/state') = 3 ]"
kill -9 $daemon_pid; wait $daemon_pid 2>/dev/null
"$vram" run --limit 1GiB -- "$grab" D 1 >"$tmp/down" 2>&1
check "while the daemon is down, a new client is held to its own budget" \
  contains "$tmp/down" "cuMemAlloc refused with CUDA_ERROR_OUT_OF_MEMORY: device 0 (GPU-[-0-9a-f]*) budget 1.00 GiB"
check "daemon restarts" start_daemon "$tmp/policy"
check "clients re-register" wait_for 10 is granted $((21 * G / 2))
sleep 1.5
check "nothing counted twice" is granted $((21 * G / 2))
check "re-registration vouched by the state" contains "$tmp/daemon.out" "re-registered 3.50 GiB"
timeout 10 "$peer" "$S" hold "$uuid" $((2 * G)) >"$tmp/h7" 2>&1
check "the rebuilt ledger refuses what does not fit" contains "$tmp/h7" "DENY"
wait "${rpids[@]}"
check "the clients finished within their budgets" sh -c "cat '$tmp'/r1 '$tmp'/r2 '$tmp'/r3 | grep -c 'RESULT R. 3758096384 $((3758096384 - C)) ok' | grep -qx 3"
check "all back after the clients end" wait_for 5 is granted 0

# --- SIGKILL storm: 200 clients allocating, killed at random --------------
for wave in $(seq 10); do { # (the shell's "Killed" notices are not news here)
  pids=()
  for i in $(seq 20); do
    "$vram" run --limit 512MiB -- "$churn" >/dev/null 2>&1 &
    pids+=($!)
  done
  sleep 0.$((RANDOM % 5 + 3))
  for p in "${pids[@]}"; do
    sleep 0.0$((RANDOM % 3)); kill -9 "$p" 2>/dev/null
  done
  wait "${pids[@]}"
} 2>/dev/null; done
check "storm: ledger back to zero" wait_for 5 is granted 0
check "storm: nothing in use in the ledger (NVML included)" wait_for 5 is used 0
check "storm: the device's occupancy matches" sh -c "'$vram' devices --brief | grep -q ' 0 B used of 12.00 GiB'"
check "storm: the daemon survived" kill -0 $daemon_pid
check "storm: clients did register" sh -c "[ \$(grep -c 'churn): granted 512.00 MiB' '$tmp/daemon.out') -ge 100 ]"

# --- users: one cannot release, read or exceed another's grant -------------
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v useradd >/dev/null &&
   test_users a b; then
  kit=$tmp/kit
  make_kit "$build" "$peer" "$kit"
  ua=$uid_a ub=$uid_b
  # As another user, with nothing but the kit (setpriv and env exec: $! is the program).
  as_a=(setpriv --reuid="$ua" --regid="$gid_a" --clear-groups env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB)
  as_b=(setpriv --reuid="$ub" --regid="$gid_b" --clear-groups env LD_LIBRARY_PATH="$kit/sim" VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB)
  printf 'cap user %s 4GiB\nwhen-full fail\nreconcile-every 100ms\n' "$user_b" >"$tmp/policy"
  kill -HUP $daemon_pid
  wait_for 5 sh -c "[ \$(grep -c 'reloaded' '$tmp/daemon.out') -ge 3 ]"
  "${as_a[@]}" "$kit/peer" "$S" hold "$uuid" $((5 * G)) >"$tmp/ua" 2>&1 &
  pa=$!
  check "user a granted" wait_for 5 contains "$tmp/ua" GRANT
  "${as_b[@]}" "$kit/vram" status --json >"$tmp/ub-view"
  check "user b sees a's total" grep -q "\"uid\":$ua,\"user\":\"$user_a\"" "$tmp/ub-view"
  check "but not a's process" sh -c "! grep -q '\"pid\":$pa' '$tmp/ub-view' && grep -q '{\"device\":0,\"uid\":$ua,\"user\":\"$user_a\",\"processes\":1,' '$tmp/ub-view'"
  "$vram" status --json >"$tmp/root-view"
  check "root sees a's process" grep -q "\"uid\":$ua,\"user\":\"$user_a\",\"role\":\"process\",\"command\":\"peer\"" "$tmp/root-view"
  "${as_b[@]}" "$kit/peer" "$S" send "VRAM/1 RELEASE dev=$uuid" >"$tmp/ub-release"
  check "b cannot release a's grant" is granted $((5 * G))
  "${as_b[@]}" "$kit/peer" "$S" send "VRAM/1 JOB job=1 uid=0 gid=0 dev=$uuid total=0 bytes=1" >"$tmp/ub-job"
  check "b cannot register a job" contains "$tmp/ub-job" "JOB is only for root"
  "${as_b[@]}" "$kit/peer" "$S" send "VRAM/1 HELLO role=process pid=1 uid=0 cmd=x" >/dev/null
  "${as_b[@]}" "$kit/peer" "$S" hold "$uuid" $((3 * G)) >"$tmp/ub1" &
  pb1=$!
  wait_for 5 contains "$tmp/ub1" GRANT
  check "b is who the kernel says, whatever b claims" grep -q "\"uid\":$ub,\"user\":\"$user_b\"" <("$vram" status --json)
  "${as_b[@]}" "$kit/vram" run --limit 2GiB -- "$kit/vram-demo-grab" B2 1 >"$tmp/ub2" 2>&1
  check "b cannot exceed the cap across processes" contains "$tmp/ub2" "user $user_b may hold 4.00 GiB"
  kill -9 $pa $pb1; wait $pa $pb1 2>/dev/null
  check "users' grants back" wait_for 5 is granted 0
else
  echo "SKIP: the several-users part needs root, setpriv and useradd"
  remove_test_users
fi

kill -TERM $daemon_pid; wait $daemon_pid 2>/dev/null
check "daemon removes its socket on SIGTERM" test ! -e "$S"
daemon_pid=
echo "test_daemon: $passed passed, $failures failed"
[ $failures = 0 ]
