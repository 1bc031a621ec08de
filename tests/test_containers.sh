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
build=${1:?usage: test_containers.sh BUILD PEER MEMBER TEST_DRIVER_MEMORY}
peer=${2:?} member=${3:?} driver_memory=${4:?}
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/containers.sh"
need_podman

if [ -z "${VRAMTEST_PRIVATE_CDI:-}" ]; then
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/vram-containers.XXXXXX")
  chmod 755 "$tmp"
  mkdir "$tmp/cdi"
  export VRAMTEST_TMP=$tmp
  in_private_cdi "$tmp/cdi" "$0" "$@"
fi
tmp=$VRAMTEST_TMP
in_private_cdi "$tmp/cdi"
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
check "nothing of the test's left in podman" \
  sh -c "! podman ps -a --format '{{.Names}}' | grep -q '^$containers_prefix-'"
echo "test_containers: $passed passed, $failures failed"
[ "$failures" = 0 ]
