#!/usr/bin/env bash
# vram in podman containers on the simulated GPU (issue 29, its first
# part): the CDI spec of `vram cdi generate` read by podman 4.3 itself, a
# container that sees its budget as the device under the interposer alone
# and cannot pass it, a bad budget failing the container's start with vram
# run's own message (vram oci-hook, run by runc), a process in the
# container listed on the host by its host pid (not by its pid in the
# container, which the simulator once gave every reader: pid 1 is the
# host's init), the driver's own part charged to a command in a container,
# vramd telling a process in a container its host pid, and vram oci-hook
# refusing what a forger could hand it. One container serves most checks
# (a container's start takes about a second). Needs root and podman
# (tests/containers.sh), else skipped.
set -u
build=${1:?usage: test_containers.sh BUILD PEER MEMBER TEST_DRIVER_MEMORY NVML_LIMITS}
peer=${2:?} member=${3:?} driver_memory=${4:?} limits=${5:?}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/containers.sh"
need_podman

in_private_cdi_tmp containers "$0" "$@"
daemon_pid=
cleanup() {
  remove_containers
  kill -9 $(jobs -p) 2>/dev/null
  [ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
  remove_test_users
  wait 2>/dev/null
  [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp" "$tmp/cdi.etc"
}
trap cleanup EXIT

# One simulated 12 GiB GPU, shared with the containers through $tmp.
export LD_LIBRARY_PATH=$build/sim VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$tmp/sim
mkdir -m 1777 "$tmp/sim"
mkdir -m 755 "$tmp/out" "$tmp/vramd"
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG VRAM_WAIT VRAM_JOB VRAM_SIM_CONTEXT_SIZE
sim_env=(-e LD_LIBRARY_PATH -e VRAM_SIM_DEVICES -e VRAM_SIM_DIR -v "$tmp:$tmp")
# Under ASan the interposer comes before the programs' own runtime, which
# the tests' environment allows (tests/CMakeLists.txt): the containers' too.
[ -n "${ASAN_OPTIONS:-}" ] && sim_env+=(-e ASAN_OPTIONS)
uuid=GPU-5a1d0e5a-a000-4000-8000-000000000000
G=$((1 << 30))
# check_show NAME FILE CONDITION...: check, and on failure FILE's text.
check_show() {
  local name=$1 file=$2 before=$failures; shift 2
  check "$name" "$@"
  [ "$failures" = "$before" ] || sed 's/^/  | /' "$file"
}

# ------------------------------------------------------------- the spec
# Made without vramd (VRAM_DAEMON=off): the interposer alone in the containers.
VRAM_DAEMON=off "$vram" cdi generate --output "$tmp/cdi/vram.json" 2>"$tmp/err"
check "cdi generate: writes the spec" test -s "$tmp/cdi/vram.json"
check "cdi generate: no temporary file left beside it" \
  sh -c "[ \$(ls '$tmp/cdi' | wc -l) = 1 ]"
"$vram" cdi generate --output "$tmp/no/such/dir/x.json" 2>"$tmp/err"; rc=$?
check "cdi generate: an --output it cannot write says so" \
  sh -c "[ $rc != 0 ] && grep -q 'no/such/dir/x.json' '$tmp/err'"

# -------------------------------------- a container under the interposer
# Its first process and its children have the spec's environment; a
# process `podman exec` starts does not (podman 4.3 gives it the
# container's environment without what CDI added), so what needs the
# interposer runs from the first process.
if ! container_run c1 --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=2GiB "${sim_env[@]}" \
     -- sh -c "echo \"\$LD_PRELOAD \$VRAM_DAEMON\" >$tmp/out/env
               $grab A 1 1000 >$tmp/out/a 2>&1; $grab B 1 2500 >$tmp/out/b 2>&1
               touch $tmp/out/ran; exec sleep 300" 2>"$tmp/err"; then
  cat "$tmp/err"
  check "podman starts a container with the spec's device vram.dev/gpu=0" false
  exit 1
fi
c1=$containers_prefix-c1
wait_for 30 test -e "$tmp/out/ran"
check_show "the spec sets LD_PRELOAD to the interposer, mounted in" "$tmp/out/env" \
  sh -c "grep -q '^$build/libvram-preload.so off$' '$tmp/out/env' &&
         podman exec '$c1' test -r '$build/libvram-preload.so'"
check_show "in the container, the budget is the device (2 GiB)" "$tmp/out/a" grep -q "^RESULT A $((2 * G)) [0-9]* ok" "$tmp/out/a"
check_show "in the container, more than the budget is refused" "$tmp/out/b" grep -q "^RESULT B $((2 * G)) 0 OOM" "$tmp/out/b"
podman exec "$c1" "$vram" --version >/dev/null 2>&1
check "the vram command is mounted in" test $? = 0

# A bad budget fails the container's start with vram run's message, from
# vram oci-hook as runc runs it (the state on its stdin, the bundle's
# config.json podman wrote).
bad_start() { # WHAT EXPECTED OPTION...
  local what=$1 want=$2; shift 2
  podman run --rm "${podman_flags[@]}" --device vram.dev/gpu=0 "$@" --rootfs /:O true \
    >"$tmp/out/bad" 2>&1
  local rc=$?
  check "$what: the container does not start" test $rc != 0
  check_show "$what: the reason is vram's" "$tmp/out/bad" grep -q -- "$want" "$tmp/out/bad"
}
bad_start "VRAM_MEMORY_LIMIT=4Gx" 'VRAM_MEMORY_LIMIT="4Gx": unknown unit "Gx"' -e VRAM_MEMORY_LIMIT=4Gx
bad_start "VRAM_MEMORY_FRACTION=2" 'VRAM_MEMORY_FRACTION' -e VRAM_MEMORY_FRACTION=2
bad_start "annotation vram.dev/limit=lots" 'annotation vram.dev/limit' --annotation vram.dev/limit=lots
bad_start "both variables" 'are both set' -e VRAM_MEMORY_LIMIT=1GiB -e VRAM_MEMORY_FRACTION=0.5
bad_start "variable and annotation disagree" 'disagree' -e VRAM_MEMORY_LIMIT=1GiB \
  --annotation vram.dev/limit=2GiB

# ----------------------------------------- pids across pid namespaces
# A process holding memory in the container: listed on the host by its
# host pid, in the container by its pid there.
podman exec -d "$c1" env -u LD_PRELOAD "$member" hold $G 300 "$tmp/out/release" >/dev/null
holder_pids() { podman top "$c1" pid hpid args | awk -v m="$member" '$3 == m {print $1, $2}'; }
wait_for 10 sh -c "[ -n \"\$(podman top '$c1' pid hpid args | grep -F '$member')\" ]"
read -r in_pid host_pid < <(holder_pids)
listed_by() { "$@" "$vram" devices --json 2>/dev/null | grep -o '"pid":[0-9]*' | cut -d: -f2; }
wait_for 10 sh -c "'$vram' devices --json | grep -q '\"pid\":$host_pid[,}]'"
check "on the host, the container's process is listed by its host pid ($host_pid)" \
  sh -c "listed=\$('$vram' devices --json | grep -o '\"pid\":[0-9]*' | cut -d: -f2 | tr '\n' ' ');
         [ \"\$listed\" = '$host_pid ' ] || { echo \"listed: \$listed (in the container: $in_pid)\"; false; }"
check "in the container, by its pid there ($in_pid)" \
  sh -c "podman exec '$c1' env -u LD_PRELOAD '$vram' devices --json | grep -q '\"pid\":$in_pid[,}]'"
touch "$tmp/out/release"

# The driver's own part of a command in the container is charged (the
# program checks that its view of the device counts it: NVML's figure for
# it, found by its pid in the container; 50 modules launched lazily).
podman exec -e TEST_DRIVER_MEMORY_UNDER=command -e TEST_DRIVER_MEMORY_BUDGET=8GiB "$c1" \
  "$vram" run --limit 6GiB --log off --summary "$tmp/out/summary.json" -- "$driver_memory" \
  >"$tmp/out/driver" 2>&1
check_show "a command in the container: its program's view counts the driver's part" \
  "$tmp/out/driver" test $? = 0
check "a command in the container: --summary says the driver's part was charged" \
  sh -c "grep -q '\"driver_charged\": true' '$tmp/out/summary.json' &&
         [ \$(grep -o '\"driver\": [0-9]*' '$tmp/out/summary.json' | cut -d' ' -f2) -ge $((50 * 2 << 20)) ]"

# vramd tells a process in a container the pid it has on the host, which
# an NVML before R535 lists it under.
"$vramd" --socket "$tmp/vramd/vramd.sock" --state "$tmp/state" --log info \
  >"$tmp/vramd.out" 2>&1 &
daemon_pid=$!
wait_for 10 test -S "$tmp/vramd/vramd.sock"
podman exec "$c1" env -u LD_PRELOAD "$peer" "$tmp/vramd/vramd.sock" hold "$uuid" $((1 << 20)) \
  >"$tmp/out/peer" 2>&1 &
wait_for 10 grep -q GRANT "$tmp/out/peer"
read -r peer_in peer_host < <(podman top "$c1" pid hpid args | awk -v p="$peer" '$3 == p {print $1, $2}')
check_show "vramd's answer to HELLO says the host pid ($peer_host), not the one in the container ($peer_in)" \
  "$tmp/out/peer" grep -q "OK client=[0-9]* pid=$peer_host\$" "$tmp/out/peer"

# --------------------------------------------------- vram oci-hook by hand
# The state as runc gives it at createRuntime, from c1's own facts.
id=$(podman inspect -f '{{.Id}}' "$c1")
pid=$(podman inspect -f '{{.State.Pid}}' "$c1")
bundle=$(podman inspect -f '{{.StaticDir}}' "$c1")
state() { # PID ID BUNDLE [STATUS] [EXTRA]
  printf '{"ociVersion":"1.0.2-dev","id":"%s","status":"%s","pid":%s,"bundle":"%s"%s}' \
    "$2" "${4:-creating}" "$1" "$3" "${5:-}"
}
hook() { # STAGE STATE-TEXT: the hook's status, its stderr in $tmp/hook.err
  printf '%s' "$2" | VRAM_LOG=info "$vram" oci-hook "$1" --gpu "$uuid" 2>"$tmp/hook.err"
}
hook createRuntime "$(state "$pid" "$id" "$bundle")"; rc=$?
check_show "oci-hook: c1's own state is taken" "$tmp/hook.err" test $rc = 0
check_show "oci-hook: it finds the name, pid, cgroup, GPU and budget" "$tmp/hook.err" \
  grep -q "container $c1 ($id): pid $pid, cgroup /[^ ]*$id[^ ]*, GPU $uuid, budget VRAM_MEMORY_LIMIT=2GiB from the container's environment" \
  "$tmp/hook.err"
hook poststop "$(state 0 "$id" "$bundle" stopped)"; rc=$?
check "oci-hook poststop: taken" sh -c "[ $rc = 0 ] && grep -q 'container $c1 ($id) stopped' '$tmp/hook.err'"

refused() { # WHAT EXPECTED STAGE STATE-TEXT
  local what=$1 want=$2
  hook "$3" "$4"; local rc=$?
  echo "(status $rc)" >>"$tmp/hook.err"
  check_show "oci-hook refuses $what" "$tmp/hook.err" \
    sh -c "[ $rc = 1 ] && grep -q -- \"\$1\" '$tmp/hook.err'" _ "$want"
}
# A forged state: a pid that is not the container's.
refused "a pid on the host" "pid $$ is in the host's pid namespace" createRuntime "$(state $$ "$id" "$bundle")"
unshare --pid --fork --kill-child sleep 300 2>/dev/null &
wait_for 5 child_of $! >/dev/null
outsider=$(child_of $!)
refused "a pid in another pid namespace, outside the container's cgroup" \
  "pid $outsider is in cgroup .*, which is not container" createRuntime "$(state "$outsider" "$id" "$bundle")"
kill -9 "$outsider"
refused "a pid that does not exist" "no such process" createRuntime "$(state 999999999 "$id" "$bundle")"
# Its id against another container's bundle: the process is not in its cgroup.
refused "another id for c1's process" "which is not container" createRuntime \
  "$(state "$pid" "0123456789ab${id:12}" "$bundle")"
# A bundle of one's own making: its config.json names a cgroup outside the container.
mkdir -m 755 "$tmp/forged"
sed 's|"cgroupsPath": *"[^"]*"|"cgroupsPath":"/"|' "$bundle/config.json" >"$tmp/forged/config.json"
refused "a config.json whose cgroup is not the container's" \
  "not in the one config.json's linux.cgroupsPath names (/)" createRuntime "$(state "$pid" "$id" "$tmp/forged")"
chmod 777 "$tmp/forged"
refused "a bundle others may write in" "is writable by others (mode 0777)" createRuntime \
  "$(state "$pid" "$id" "$tmp/forged")"
chmod 755 "$tmp/forged"
# A state whose annotation is not the bundle's.
refused "an annotation the bundle does not have" "annotation vram.dev/limit is not the bundle's" \
  createRuntime "$(state "$pid" "$id" "$bundle" creating ',"annotations":{"vram.dev/limit":"64GiB"}')"
# Hostile text.
refused "a state that is not JSON" "is not JSON: a comma before '}'" createRuntime '{"id":"x",}'
refused "a key given twice" 'the state has "pid" twice' createRuntime \
  "$(state "$pid" "$id" "$bundle" creating ",\"pid\":$$")"
refused "a pid that is a string" '"pid" is not a process id' createRuntime \
  "{\"ociVersion\":\"1.0.2\",\"id\":\"$id\",\"status\":\"creating\",\"pid\":\"$pid\",\"bundle\":\"$bundle\"}"
refused "an id with a slash" 'id "../x" is not a container' createRuntime "$(state "$pid" ../x "$bundle")"
refused "a relative bundle" 'bundle "userdata" is not an absolute path' createRuntime "$(state "$pid" "$id" userdata)"
refused "the wrong status" 'status "running" is not a container' createRuntime "$(state "$pid" "$id" "$bundle" running)"
refused "another version of the spec" 'ociVersion "2.0" is not' createRuntime \
  "{\"ociVersion\":\"2.0\",\"id\":\"$id\",\"status\":\"creating\",\"pid\":$pid,\"bundle\":\"$bundle\"}"
refused "no pid at createRuntime" 'the state has no "pid"' createRuntime \
  "{\"ociVersion\":\"1.0.2\",\"id\":\"$id\",\"status\":\"creating\",\"bundle\":\"$bundle\"}"
head -c 70000 /dev/zero | tr '\0' ' ' >"$tmp/big"
printf '%s' "$(state "$pid" "$id" "$bundle")" >>"$tmp/big"
"$vram" oci-hook createRuntime <"$tmp/big" 2>"$tmp/hook.err"; rc=$?
check "oci-hook refuses a state over 64 KiB" sh -c "[ $rc = 1 ] && grep -q 'over 64 KiB' '$tmp/hook.err'"
"$vram" oci-hook start </dev/null 2>"$tmp/hook.err"; rc=$?
check "oci-hook: an unknown stage is a usage error" sh -c "[ $rc = 2 ] && grep -q 'createRuntime or poststop' '$tmp/hook.err'"
# A user who is not root, for root's container.
test_users a
setpriv --reuid "$uid_a" --regid "$gid_a" --clear-groups sh -c \
  "printf '%s' '$(state "$pid" "$id" "$bundle")' | '$vram' oci-hook createRuntime" 2>"$tmp/hook.err"; rc=$?
check_show "oci-hook refuses a user who is not root, for root's container" "$tmp/hook.err" \
  sh -c "[ $rc = 1 ] && grep -q 'pid $pid runs as user 0, not as you (user $uid_a)' '$tmp/hook.err'"

remove_containers

# ============================================ containers as vramd jobs
# The spec made with vramd running: each container one job, registered by
# vram oci-hook as runc runs it, held by the container's own cgroup, its
# command state handed by vramd to every process of the container.
kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=
S=$tmp/vramd/vramd.sock
printf 'default-budget 1GiB\nwhen-full wait 60s\nreconcile-every 100ms\n' >"$tmp/policy"
start_vramd() { # [VARIABLE=VALUE...]: vramd with them in its environment
  env "$@" "$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" --log info \
    >>"$tmp/vramd.out" 2>&1 &
  daemon_pid=$!
  wait_for 10 test -S "$S"
}
stop_vramd() { kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=; }
# The cgroup2 hierarchy (podman's containers have a cgroup there too).
mnt=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' /proc/self/mountinfo)
start_vramd
export VRAM_DAEMON=$S
VRAM_DAEMON=$S "$vram" cdi generate --output "$tmp/cdi/vram.json" 2>"$tmp/err"
check_show "cdi generate with vramd: the containers' processes ask vramd for their command state" \
  "$tmp/cdi/vram.json" grep -q '"VRAM_COMMAND=vramd"' "$tmp/cdi/vram.json"
status() { "$vram" status --json 2>/dev/null; }
ids=()
job_of() { # NAME: its job's name in $job; its id noted, for the end
  local id
  id=$(podman inspect -f '{{.Id}}' "$containers_prefix-$1")
  ids+=("$id")
  job=$containers_prefix-$1@${id:0:12}
}
host_pid_of() { # CONTAINER PROGRAM: the host pid of PROGRAM's process in it
  podman top "$containers_prefix-$1" hpid args | awk -v p="$2" '$2 == p {print $1; exit}'
}
has_job() { status | grep -q "\"role\":\"job\",\"command\":\"container\",\"job\":\"$1\",\"budget\":$2,"; }
no_job() { ! status | grep -q "\"job\":\"$1\""; }
job_field() { status | grep -o "\"job\":\"$1\",[^}]*" | head -1 | grep -o "\"$2\":[a-z0-9]*" | cut -d: -f2; }

# Two containers of 4 GiB each on the 12 GiB GPU, each holding 3 GiB
# through the interposer; in the first, a second process asks for 2 GiB
# more: one budget for the container's processes, so it is refused.
holder() { # NAME: its first process holds 3 GiB, a second asks for 2 GiB, then it sleeps
  container_run "$1" --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=4GiB "${sim_env[@]}" -- \
    sh -c "'$member' hold $((3 * G)) 300 '$tmp/out/release-$1' >'$tmp/out/held-$1' 2>&1 &
           while ! grep -q HELD '$tmp/out/held-$1' 2>/dev/null; do sleep 0.05; done
           '$grab' B 1 2048 >'$tmp/out/second-$1' 2>&1; exec sleep 300" 2>"$tmp/err-$1"
}
holder a; holder b
check_show "container a starts, its job granted" "$tmp/err-a" wait_for 10 test -s "$tmp/out/second-a"
check_show "container b starts beside it" "$tmp/err-b" wait_for 10 test -s "$tmp/out/second-b"
job_of a; ja=$job; job_of b; jb=$job
check_show "a holds 3 GiB of its 4" "$tmp/out/held-a" grep -q "^HELD $((3 * G))" "$tmp/out/held-a"
check_show "b holds 3 GiB of its 4, side by side" "$tmp/out/held-b" grep -q "^HELD $((3 * G))" "$tmp/out/held-b"
check_show "one budget for all of a container's processes: a second process of a, asking 2 GiB, is refused" \
  "$tmp/out/second-a" grep -q "^RESULT B .* OOM" "$tmp/out/second-a"
check "on the host, container a is one job, $ja, with its budget" wait_for 5 has_job "$ja" $((4 * G))
check "and b, $jb" has_job "$jb" $((4 * G))
hp_a=$(host_pid_of a "$member")
check "the job shows its process by its host pid ($hp_a)" \
  wait_for 5 sh -c "'$vram' status --json | grep -q '\"pid\":$hp_a,[^}]*\"job\":\"$ja\"'"
# (vram top's JOB column shows a job's name to its first 16 characters.)
check "vram top on the host shows both jobs" \
  sh -c "'$vram' top --once >'$tmp/out/top' && grep -q ' ${ja:0:16}' '$tmp/out/top' && grep -q ' ${jb:0:16}' '$tmp/out/top'"
wait_for 5 sh -c "[ \"\$('$vram' status --json | grep -o '\"job\":\"$ja\",[^}]*' | grep -o '\"used\":[0-9]*')\" = '\"used\":$((3 * G))' ]"
peak_a=$(job_field "$ja" peak) peak_b=$(job_field "$jb" peak)
echo "peaks: $ja $peak_a of $((4 * G)), $jb $peak_b of $((4 * G))"
check "the jobs' peaks are what their processes held (3 GiB and a context), within their budgets" \
  test "$peak_a" -ge $((3 * G)) -a "$peak_a" -le $((4 * G)) -a "$peak_b" -ge $((3 * G)) -a "$peak_b" -le $((4 * G))

# A third asking for 6 GiB (4 are left): refused with vramd's reason...
podman run --rm "${podman_flags[@]}" --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=6GiB --rootfs /:O \
  true >"$tmp/out/third" 2>&1; rc=$?
check_show "a third container that does not fit does not start" "$tmp/out/third" test $rc != 0
check_show "its start fails with vramd's reason" "$tmp/out/third" \
  grep -q "vramd refused the container GPU memory on $uuid: .*4.00 GiB grantable; requested 6.00 GiB" \
  "$tmp/out/third"
# ... or, with VRAM_WAIT, waits (the policy lets it), and starts when a
# container is killed: a's grant comes back at once.
podman run -d --name "$containers_prefix-w" "${podman_flags[@]}" --device vram.dev/gpu=0 \
  -e VRAM_MEMORY_LIMIT=6GiB -e VRAM_WAIT=60s "${sim_env[@]}" --rootfs /:O sleep 300 \
  >"$tmp/out/waiter" 2>&1 &
waiter=$!
_containers+=("$containers_prefix-w")
check_show "with VRAM_WAIT, the third waits in vramd's queue" "$tmp/vramd.out" \
  wait_for 10 grep -q "waits for 6.00 GiB" "$tmp/vramd.out"
check "its podman run waits with it" kill -0 "$waiter"
kill -9 "$(podman inspect -f '{{.State.Pid}}' "$containers_prefix-a")"
check "container a killed with -9: its job ends" wait_for 5 no_job "$ja"
check_show "its grant went back the moment its cgroup emptied, not at poststop" "$tmp/vramd.out" \
  grep -q "job $ja (root): its last process is gone: its grants are back" "$tmp/vramd.out"
wait "$waiter"; rc=$?
check_show "the waiting container is granted then, and starts" "$tmp/out/waiter" test $rc = 0
job_of w; jw=$job
check "its job holds 6 GiB" wait_for 5 has_job "$jw" $((6 * G))
podman rm -f -t 0 "$containers_prefix-w" >/dev/null 2>&1
check "removed, its job ends" wait_for 5 no_job "$jw"

# A process of b that clears LD_PRELOAD (podman exec: the spec's
# environment is not there) is the driver's and NVML's, not the
# interposer's: NVML sees it, and its memory counts against b's job.
podman exec -d "$containers_prefix-b" "$member" hold $((2 * G)) 300 "$tmp/out/release-x" >/dev/null
wait_for 10 sh -c "[ -n \"\$(podman top '$containers_prefix-b' hpid args | grep -F '$member hold $((2 * G))')\" ]"
hp_x=$(podman top "$containers_prefix-b" hpid args | grep -F "$member hold $((2 * G))" | awk '{print $1}')
check "on the host, the unpreloaded process is b's job's (pid $hp_x)" \
  wait_for 5 sh -c "'$vram' status --json | grep -q '\"pid\":$hp_x,[^}]*\"job\":\"$jb\"'"
check "NVML's 5 GiB count against b's job: over its 4 GiB budget" \
  wait_for 5 sh -c "'$vram' status --json | grep -o '\"job\":\"$jb\",[^}]*' | head -1 | grep -q '\"over_budget\":true'"
touch "$tmp/out/release-x"

# Inside a container of another user, vram top and vram status (vram is
# mounted in, VRAM_DAEMON set) show what vramd shows that user: their own
# job and processes, and root's only as a total.
chmod 777 "$tmp/out"
container_run u --device vram.dev/gpu=0 --user "$uid_a:$gid_a" -e VRAM_MEMORY_LIMIT=1GiB \
  "${sim_env[@]}" -- sh -c "sleep 1; '$vram' top --once >'$tmp/out/top-u' 2>&1;
    '$vram' status --json >'$tmp/out/status-u' 2>&1; exec sleep 300" 2>"$tmp/err-u"
check_show "a container of user $user_a starts" "$tmp/err-u" wait_for 10 test -s "$tmp/out/status-u"
job_of u; ju=$job
check "its job is $user_a's on the host" sh -c "'$vram' status --json | grep -q '\"user\":\"$user_a\",\"role\":\"job\",\"command\":\"container\",\"job\":\"$ju\"'"
check_show "vram top inside it shows its own job" "$tmp/out/top-u" grep -q " ${ju:0:16}" "$tmp/out/top-u"
check_show "and not root's containers' jobs" "$tmp/out/top-u" sh -c "! grep -q '$jb' '$tmp/out/top-u'"
check_show "vram status --json inside it: its job, no process of root's" "$tmp/out/status-u" \
  sh -c "grep -q '\"job\":\"$ju\"' '$tmp/out/status-u' && ! grep -q '\"uid\":0,\"user\":\"root\",\"role\"' '$tmp/out/status-u'"

# Hostile registrations from a user who is not root, over vramd's socket
# as the hook would send them: refused by vramd itself.
idb=$(podman inspect -f '{{.Id}}' "$containers_prefix-b")
pidb=$(podman inspect -f '{{.State.Pid}}' "$containers_prefix-b")
cgb=$(sed -n 's/^0:://p' "/proc/$pidb/cgroup")
as_a() { setpriv --reuid "$uid_a" --regid "$gid_a" --clear-groups "$@"; }
forged() { # WHAT EXPECTED MESSAGE
  as_a "$peer" "$S" send "$3" >"$tmp/out/forged" 2>&1
  check_show "vramd refuses $1" "$tmp/out/forged" grep -q -- "$2" "$tmp/out/forged"
}
forged "a user registering root's container" "^DENY .*container ${idb:0:12}'s job is another user's" \
  "VRAM/1 CONTAINER id=$idb name=x pid=$pidb cgroup=$cgb dev=$uuid bytes=1048576"
# A process of root's in a cgroup named as a container's would be: the
# kernel says whose it is.
mkdir "$mnt/vt$$-libpod-f00d"
sleep 300 &
rootish=$!
echo "$rootish" >"$mnt/vt$$-libpod-f00d/cgroup.procs"
forged "a user registering a process of root's" "^DENY .*pid $rootish is user 0's, not yours" \
  "VRAM/1 CONTAINER id=f00d name=x pid=$rootish cgroup=/vt$$-libpod-f00d dev=$uuid bytes=1048576"
kill "$rootish"; wait "$rootish" 2>/dev/null
wait_for 5 rmdir "$mnt/vt$$-libpod-f00d"
forged "a user naming another owner" "^DENY .*root's to say" \
  "VRAM/1 CONTAINER id=$idb name=x pid=$pidb cgroup=$cgb dev=$uuid bytes=1048576 uid=0"
as_a sleep 300 &
mine=$!
forged "a user's process outside the cgroup it names" "^DENY .*pid $mine is in the cgroup .*not in cgroup=/x/libpod-ab12" \
  "VRAM/1 CONTAINER id=ab12 name=x pid=$mine cgroup=/x/libpod-ab12 dev=$uuid bytes=1048576"
forged "a cgroup that does not name the container" "^DENY .*is not container ab12's own" \
  "VRAM/1 CONTAINER id=ab12 name=x pid=$mine cgroup=$(cg_of "$mine") dev=$uuid bytes=1048576"
kill "$mine"
forged "a user ending root's container's job" "^DENY .*only root or that user may end it" \
  "VRAM/1 STOPPED id=$idb"
check "b's job is still there" has_job "$jb" $((4 * G))
"$peer" "$S" send "VRAM/1 STATE" >"$tmp/out/state" 2>&1
check_show "a process in no container asks for a container's state: refused" "$tmp/out/state" \
  grep -q "^DENY .*which is no container's job" "$tmp/out/state"

# A restart of vramd (SIGTERM, then a new one): b's job is kept for its
# cgroup, from the state file.
stop_vramd
start_vramd
check_show "after a restart, b's job is still held for it" "$tmp/vramd.out" wait_for 5 has_job "$jb" $((4 * G))
check "with its process" \
  wait_for 5 sh -c "'$vram' status --json | grep -q '\"pid\":$(host_pid_of b "$member"),[^}]*\"job\":\"$jb\"'"
podman rm -f -t 0 "$containers_prefix-b" "$containers_prefix-u" >/dev/null 2>&1
check "b removed: its job ends" wait_for 5 no_job "$jb"

# The simulated R615 (per-cgroup limits): vramd sets the limit on the
# container's own cgroup, which holds a process that cleared LD_PRELOAD.
# (The simulated driver finds a process's cgroup through a cgroup2 mount,
# which a container here has none of: the host's is mounted in. A real
# driver asks the kernel.)
stop_vramd
start_vramd VRAM_SIM_DRIVER=615
# A user's own container, as rootless podman makes one (by hand here: a
# process of the user in a pid namespace of its own, in a cgroup delegated
# to them whose name names the container): vramd takes it as theirs, but
# they could move its processes out of that cgroup, so the driver's limit
# is not used (said): the interposer holds it, and no cgroup is made.
ucg=$mnt/vt$$-user/libpod-beef
mkdir -p "$ucg" && chown "$uid_a" "$mnt/vt$$-user" "$mnt/vt$$-user/cgroup.procs" "$ucg" "$ucg/cgroup.procs"
setpriv --reuid "$uid_a" --regid "$gid_a" --clear-groups unshare --user --map-root-user --pid --fork \
  sleep 300 2>/dev/null &
unshared=$!
wait_for 5 child_of "$unshared" >/dev/null
inner=$(child_of "$unshared")
echo "$inner" >"$ucg/cgroup.procs"
as_a "$peer" "$S" send "VRAM/1 CONTAINER id=beef name=mine pid=$inner cgroup=/vt$$-user/libpod-beef dev=$uuid bytes=$G" \
  >"$tmp/out/rootless" 2>&1
check_show "a user's own container (rootless): registered, as theirs" "$tmp/out/rootless" \
  sh -c "grep -q '^GRANT dev=$uuid bytes=$G' '$tmp/out/rootless' &&
         '$vram' status --json | grep -q '\"user\":\"$user_a\",\"role\":\"job\",\"command\":\"container\",\"job\":\"mine@beef\",\"budget\":$G,'"
check_show "615: its cgroup is the user's to change: the interposer holds it, said" "$tmp/vramd.out" \
  grep -q "job mine@beef ($user_a): user $uid_a may move processes out of $ucg" "$tmp/vramd.out"
check "615: and no cgroup is made for it" sh -c "! find '$mnt' -maxdepth 4 -name 'vram-job-mine*' | grep -q ."
kill -9 "$inner"; wait "$unshared" 2>/dev/null
check "the user's container's process gone: its job ends" wait_for 5 no_job mine@beef
rmdir "$ucg" "$mnt/vt$$-user"
container_run c --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=2GiB -e VRAM_SIM_DRIVER=615 \
  --cgroupns host -v "$mnt:/run/vram-test-cgroup2:ro" "${sim_env[@]}" -- sleep 300 2>"$tmp/err-c"
job_of c; jc=$job
cgc=$mnt$(sed -n 's/^0:://p' "/proc/$(podman inspect -f '{{.State.Pid}}' "$containers_prefix-c")/cgroup")
check_show "615: the container's job is held by the driver" "$tmp/vramd.out" \
  wait_for 5 sh -c "'$vram' status --json | grep -o '\"job\":\"$jc\",[^}]*' | grep -q '\"backend\":\"driver\"'"
limited_c() { VRAM_SIM_DRIVER=615 "$limits" "$cgc" | grep -q " hard=$((2 * G)) "; }
check "615: the limit is on the container's own cgroup" limited_c
unpreloaded() { # a process of c that clears LD_PRELOAD asks for 3 GiB: what it says
  podman exec "$containers_prefix-c" env -u LD_PRELOAD "$member" hold $((3 * G)) 0 /dev/null \
    >"$tmp/out/unpreloaded" 2>&1
}
unpreloaded
check_show "615: a process of c that clears LD_PRELOAD is refused by the driver past the budget" \
  "$tmp/out/unpreloaded" grep -q "^REFUSED" "$tmp/out/unpreloaded"
stop_vramd
start_vramd VRAM_SIM_DRIVER=615
check "615: after a restart, the job is still held" wait_for 5 has_job "$jc" $((2 * G))
check "615: and its limit is still on the container's cgroup" limited_c
podman rm -f -t 0 "$containers_prefix-c" >/dev/null 2>&1
check "615: c removed, its job ends" wait_for 5 no_job "$jc"
check "615: no job cgroup left in vramd's record" \
  wait_for 5 sh -c "! grep -v '^#' '$tmp/state.cgroups' | grep -q ."
check "615: no limit left in the simulated driver" wait_for 5 sh -c "! test -e '$tmp/sim/limits'"

# Docker 20.10's way (no CDI): the spec's mounts and variables on the
# command line, and vram-oci-runtime in front of runc adding the hooks
# (tests/test_docker.sh runs it under dockerd where one can start; podman
# runs it here as any OCI runtime).
stop_vramd
start_vramd
so=$build/libvram-preload.so
podman --runtime "$build/vram-oci-runtime" run --rm --ulimit nofile=4096:4096 \
  --ulimit nproc=1024:1024 --network none -e VRAM_CONTAINER_GPUS=0 \
  -e VRAM_MEMORY_LIMIT=2GiB -e LD_PRELOAD="$so" -e VRAM_DAEMON="$S" -e VRAM_COMMAND=vramd \
  -v "$so:$so:ro" -v "$vram:$vram:ro" -v "$tmp/vramd:$tmp/vramd" "${sim_env[@]}" --rootfs /:O \
  sh -c "'$grab' A 1 1000; '$grab' B 1 3000; '$vram' status --json >'$tmp/out/wrapped'" \
  >"$tmp/out/runtime" 2>&1
check_show "vram-oci-runtime: the container's job registered by the hooks it added" "$tmp/out/wrapped" \
  grep -q '"role":"job","command":"container","job":"[^"]*","budget":'$((2 * G))',' "$tmp/out/wrapped"
check_show "vram-oci-runtime: the container sees its budget as the device" "$tmp/out/runtime" \
  grep -q "^RESULT A $((2 * G)) [0-9]* ok" "$tmp/out/runtime"
check_show "vram-oci-runtime: and cannot pass it" "$tmp/out/runtime" \
  grep -q "^RESULT B $((2 * G)) 0 OOM" "$tmp/out/runtime"
podman --runtime "$build/vram-oci-runtime" run --rm --ulimit nofile=4096:4096 \
  --ulimit nproc=1024:1024 --network none -e VRAM_CONTAINER_GPUS=7x --rootfs /:O true \
  >"$tmp/out/runtime" 2>&1; rc=$?
check_show "vram-oci-runtime: a GPU that is none is refused, named" "$tmp/out/runtime" \
  sh -c "[ $rc != 0 ] && grep -q 'VRAM_CONTAINER_GPUS: \"7x\" is not a GPU' '$tmp/out/runtime'"

remove_containers
check "nothing of the test's left in podman" \
  sh -c "! podman ps -a --format '{{.Names}}' | grep -q '^$containers_prefix-'"
left=
for id in "${ids[@]}"; do left+=$(find "$mnt" -maxdepth 4 -name "*$id*" 2>/dev/null); done
check "no cgroup of the test's containers left" test -z "$left"
stop_vramd
echo "test_containers: $passed passed, $failures failed"
[ "$failures" = 0 ]
