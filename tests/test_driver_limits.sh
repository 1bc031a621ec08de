#!/usr/bin/env bash
# vramd's driver backend (issue 21 item 2) on the simulated driver R615
# (VRAM_SIM_DRIVER=615): a vram run job runs in a cgroup of its own under
# vramd's --cgroup-root, with the command's processes in it; NVML says the
# cgroup's hard limit is the grant; inside the job a program without the
# interposer (env -u LD_PRELOAD) gets memory below the grant and is refused
# past it by the driver; vram status (--json and the screen) says "driver";
# when the job ends its limits are cleared and its cgroup is gone. A job
# whose vramd was killed keeps its cgroup and gets its limit back from the
# next vramd; that vramd removes a job cgroup whose holder is gone; a vramd
# stopped with SIGTERM leaves nothing. With the default profile (driver
# 580, no such function), status says "interposer" and no cgroup is made.
#
# The cgroups: a folder of this test's own in the host's cgroup2 hierarchy
# (this machine mounts it at /sys/fs/cgroup/unified, beside cgroup v1),
# removed at exit however the test ends, its processes moved back first.
# Needs root and a writable cgroup2 hierarchy: else skipped (77).
#   test_driver_limits.sh BUILD_DIR MEMBER NVML_LIMITS PEER
set -u
build=${1:?usage: test_driver_limits.sh BUILD_DIR MEMBER NVML_LIMITS PEER}
member=${2:?} limits=${3:?} peer=${4:?}
vram=$build/vram vramd=$build/vramd
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "moving processes between cgroups and setting the driver's limits need root"
mnt=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
  /proc/self/mountinfo)
[ -n "$mnt" ] || skip "no cgroup2 hierarchy is mounted"
here=$(sed -n 's/^0:://p' /proc/self/cgroup)
[ -n "$here" ] || skip "this process is in no cgroup2 cgroup (/proc/self/cgroup has no 0:: line)"
here=$mnt${here%/}
root=$mnt/vram-test-$$-$RANDOM
mkdir "$root" 2>/dev/null && rmdir "$root" || skip "cannot make a cgroup under $mnt"

. "$(dirname "$0")/lib.sh"
daemon_test driver-limits "$build"
# Whatever is left under the test's root: its processes back here, then
# the cgroups, deepest first.
remove_root() {
  [ -d "$root" ] || return 0
  local d p
  for d in $(find "$root" -depth -type d); do
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do echo "$p" >"$here/cgroup.procs" 2>/dev/null; done
    rmdir "$d" 2>/dev/null
  done
}
trap 'remove_root; _daemon_test_end' EXIT
G=$((1 << 30))
unset VRAM_SIM_DRIVER

start_daemon() {
  "$vramd" --socket "$S" --state "$tmp/state" --cgroup-root "$root" --log info "$@" \
    >>"$tmp/daemon.out" 2>&1 &
  daemon_pid=$!
  wait_for 10 "$vram" status >/dev/null 2>&1
}
stop_daemon() {
  kill -TERM "$daemon_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null
  daemon_pid=
}
job_cgroups() { ls -d "$root"/job-* 2>/dev/null; }
no_job_cgroup() { [ -z "$(job_cgroups)" ]; }
# A job's command: writes its pid, then what it was asked to, then waits
# for $tmp/go.
run_job() { # NAME SCRIPT
  rm -f "$tmp/go" "$tmp/ran"
  "$vram" run --limit 4GiB --job "$1" -- bash -c "echo \$\$ >'$tmp/pid'; $2; touch '$tmp/ran'
    for i in \$(seq 600); do [ -e '$tmp/go' ] && break; sleep 0.05; done" >"$tmp/$1.out" 2>&1 &
  job_pid=$!
  wait_for 20 test -e "$tmp/ran"
}
end_job() { touch "$tmp/go"; wait "$job_pid"; }

# --- driver 580 (the default profile): the interposer holds every grant ------------
start_daemon || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start"; exit 1; }
check "580: vramd says the interposer holds grants, and why" \
  contains "$tmp/daemon.out" "grants are held by the interposer: NVML has no per-cgroup memory limits"
run_job plain "'$vram' status --json >'$tmp/plain.json'"
check "580: the job's grant is the interposer's" \
  grep -q '"job":"plain","budget":4294967296,.*"backend":"interposer"' "$tmp/plain.json"
check "580: no cgroup is made" test ! -e "$root"
end_job
stop_daemon

# --- driver 615: the job in a cgroup of its own, held by the driver -----------------
export VRAM_SIM_DRIVER=615
start_daemon || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start with driver 615"; exit 1; }
check "615: vramd says the driver holds grants, under the root given" \
  contains "$tmp/daemon.out" "grants of jobs are held by the driver .* under $root"
run_job lim "
  '$member' view >'$tmp/view'
  env -u LD_PRELOAD '$member' hold $((3 * G)) 0 >'$tmp/below'
  env -u LD_PRELOAD '$member' hold $((4 * G)) 0 >'$tmp/past'
  '$vram' status --json >'$tmp/lim.json'
  COLUMNS=200 '$vram' status >'$tmp/lim.txt'"
cg=$(job_cgroups)
check "the job has one cgroup under the root" test "$(echo "$cg" | wc -l)" = 1 -a -n "$cg"
check "named by its holder, vram run" sh -c "case '$cg' in '$root'/job-$job_pid-[0-9]*) ;; *) exit 1;; esac"
check "the command runs in it" grep -qx "$(cat "$tmp/pid")" "$cg/cgroup.procs"
check "and vram run, which started it there" grep -qx "$job_pid" "$cg/cgroup.procs"
"$limits" "$cg" >"$tmp/get"
check "NVML: the cgroup's hard limit is the grant, no soft limit (no reservation)" \
  grep -q "^soft=0 hard=$((4 * G)) " "$tmp/get"
check "without the interposer, below the grant: allocated" contains "$tmp/below" "^HELD"
check "without the interposer, past the grant (its context and 4 GiB): the driver refuses" \
  contains "$tmp/past" "^REFUSED"
check "the interposer runs inside all the same: the program sees its budget as the device" \
  grep -q "^VIEW cuda [0-9]* $((4 * G)) nvml [0-9]* $((4 * G))$" "$tmp/view"
check "vram status --json: the driver holds the job's grant" \
  grep -q '"role":"job","command":"bash","job":"lim","budget":4294967296,.*"backend":"driver"' "$tmp/lim.json"
check "vram status: the LIMIT column says driver" \
  sh -c "grep -q ' LIMIT ' '$tmp/lim.txt' && grep -q ' lim .* driver ' '$tmp/lim.txt'"
end_job
check "the job ended: its cgroup is gone" wait_for 5 no_job_cgroup
check "and its limits with it" sh -c "! grep -qs '$cg' '$VRAM_SIM_DIR/limits'"
check "vramd said what it did" contains "$tmp/daemon.out" "job lim (root): the driver holds it to 4.00 GiB on GPU-"
stop_daemon
check "vramd stopped: its root is gone too (it made it)" test ! -e "$root"

# --- a job root registers (Slurm's): its holder stays, a process of root's joins ------
start_daemon || { cat "$tmp/daemon.out"; echo "FAIL: vramd did not start again"; exit 1; }
uuid=$("$vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)
"$peer" "$S" job step.0 0 0 "$uuid" $((2 * G)) >"$tmp/step" 2>&1 &
holder=$!
check "a job root registered: its grant is the driver's" \
  wait_for 10 sh -c "'$vram' status --json | grep -q '\"job\":\"step.0\",\"budget\":$((2 * G)),.*\"backend\":\"driver\"'"
cg=$(job_cgroups)
check "its cgroup is there, its holder not in it (it stays where it was)" \
  sh -c "[ -n '$cg' ] && ! grep -qx '$holder' '$cg/cgroup.procs'"
"$peer" "$S" send "VRAM/1 PLACE job=step.0" >"$tmp/place"
check "PLACE, as root: answered that the driver holds it" contains "$tmp/place" "OK backend=driver"
check "and the sender was put in the cgroup" contains "$tmp/daemon.out" "job step.0 (root): pid [0-9]* joined its cgroup"
"$peer" "$S" send "VRAM/1 PLACE job=nosuch" >"$tmp/place2"
check "PLACE for a job root did not register: refused, named" contains "$tmp/place2" "ERR .*no job nosuch registered by root"
if command -v setpriv >/dev/null && command -v useradd >/dev/null && test_users a; then
  kit=$tmp/kit
  make_kit "$build" "$peer" "$kit"
  as_a=(setpriv --reuid="$uid_a" --regid="$gid_a" --clear-groups env LD_LIBRARY_PATH="$kit/sim"
        VRAM_DAEMON="$S" VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB VRAM_SIM_DRIVER=615)
  "${as_a[@]}" "$kit/peer" "$S" send "VRAM/1 PLACE job=step.0" >"$tmp/place3"
  check "PLACE by another user: refused (only root's processes join a job root registered)" \
    contains "$tmp/place3" "ERR .*PLACE is only for root"
  # A user's own vram run: moved by vramd, the command cannot leave the cgroup.
  "${as_a[@]}" "$kit/vram" run --limit 2GiB -- sh -c \
    "echo \$\$ >'$here/cgroup.procs' 2>/dev/null && echo LEFT || echo STAYED; sed -n 's/^0:://p' /proc/self/cgroup" \
    >"$tmp/user" 2>&1
  check "a user's vram run: the command runs in the job's cgroup" grep -q "^${root#$mnt}/job-[0-9]*-[0-9]*$" "$tmp/user"
  check "and cannot leave it" contains "$tmp/user" "^STAYED"
  remove_test_users
else
  echo "(no setpriv or useradd: another user's PLACE not tried)"
fi
kill "$holder"; wait "$holder" 2>/dev/null
check "the job root registered ended: its cgroup is gone" wait_for 5 no_job_cgroup
stop_daemon

# --- a reservation is the soft limit --------------------------------------------------
printf 'reserve 1GiB for user root\n' >"$tmp/policy"
start_daemon --policy "$tmp/policy"
run_job soft "cat /proc/self/cgroup >'$tmp/soft.cg'"
cg=$(job_cgroups)
"$limits" "$cg" >"$tmp/get"
check "the policy's reservation for the job's user is its soft limit" \
  grep -q "^soft=$G hard=$((4 * G)) " "$tmp/get"

# --- vramd killed: the job keeps its cgroup, the next vramd its limit ---------------
kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=
check "vramd killed: the job's cgroup stays, with its limit" \
  sh -c "'$limits' '$cg' | grep -q '^soft=$G hard=$((4 * G)) '"
mkdir "$root/job-999999999-1"
start_daemon --policy "$tmp/policy"
check "the next vramd removes a job cgroup whose holder is gone" wait_for 5 test ! -e "$root/job-999999999-1"
check "the job re-registers, in the same cgroup" \
  wait_for 10 sh -c "'$vram' status --json | grep -q '\"job\":\"soft\",\"budget\":$((4 * G)),.*\"backend\":\"driver\"'"
check "with its limit set again" sh -c "'$limits' '$cg' | grep -q '^soft=$G hard=$((4 * G)) '"
end_job
check "then ends: its cgroup is gone" wait_for 5 no_job_cgroup

# --- SIGTERM: nothing left --------------------------------------------------------------
run_job last true
stop_daemon
check "vramd stopped: no job cgroup left" no_job_cgroup
check "the job's command goes on" kill -0 "$job_pid"
end_job

# --- bad places ------------------------------------------------------------------------
timeout 10 "$vramd" --socket "$S" --cgroup-root vram >"$tmp/bad" 2>&1; rc=$?
check "--cgroup-root must be absolute: refused (2), naming the value and the forms" \
  sh -c "[ $rc = 2 ] && grep -q 'cgroup-root \"vram\": not an absolute path.*accepted: .*or off' '$tmp/bad'"
timeout 10 "$vramd" --socket "$S" --cgroup-root "$tmp/elsewhere" >"$tmp/bad" 2>&1; rc=$?
check "--cgroup-root outside the cgroup2 hierarchy, with driver 615: vramd does not start" \
  sh -c "[ $rc = 1 ] && grep -q 'is not in the cgroup2 hierarchy, mounted at $mnt' '$tmp/bad'"
start_daemon --cgroup-root off
run_job off "'$vram' status --json >'$tmp/off.json'"
check "--cgroup-root off: the interposer holds grants" \
  grep -q '"job":"off","budget":4294967296,.*"backend":"interposer"' "$tmp/off.json"
check "and no cgroup is made" no_job_cgroup
end_job

echo "test_driver_limits: $passed passed, $failures failed"
[ $failures = 0 ]
