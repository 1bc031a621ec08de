#!/usr/bin/env bash
# Docker's ways to put a container under vram (README "Containers"),
# through dockerd itself: 20.10's, without CDI (the spec's mounts and
# variables on the command line, vram-oci-runtime in front of runc adding
# the hooks), and, on Docker 25 and later, CDI (--device vram.dev/gpu=0).
# A private engine of the test's own (its data root, socket and runtimes
# in the test's folder; no network, no registry: an image imported from
# an empty root, the host's /usr mounted in), a vramd of the test's and the
# simulated GPU. Needs root and a Docker engine that can start here. This
# kind of machine cannot run one: the test then says why and is skipped,
# which is not a missing package (scripts/test-deps.sh installs none for
# that reason) but a capability the machine lacks; tests/test_containers.sh
# runs vram-oci-runtime, the part of vram Docker 20.10 runs, under podman.
#   test_docker.sh BUILD
set -u
build=$(cd "${1:?usage: test_docker.sh BUILD}" && pwd)
vram=$build/vram vramd=$build/vramd grab=$build/vram-demo-grab
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/containers.sh"
[ "$(id -u)" = 0 ] || skip "the Docker test runs dockerd as root"
command -v dockerd >/dev/null && command -v docker >/dev/null ||
  skip "no Docker engine (dockerd) here: this kind of machine cannot run one, so" \
    "scripts/test-deps.sh installs none: a capability the machine lacks, not a missing package;" \
    "vram-oci-runtime, what Docker 20.10 runs, is tested under podman by test_containers"
version=$(dockerd --version | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vram-docker.XXXXXX")
chmod 755 "$tmp"
engine_pid= daemon_pid=
D=(docker -H "unix://$tmp/docker.sock")
cleanup() {
  [ -n "$engine_pid" ] && { "${D[@]}" rm -f $("${D[@]}" ps -aq) >/dev/null 2>&1; kill "$engine_pid"; wait "$engine_pid"; }
  [ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
export LD_LIBRARY_PATH=$build/sim VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$tmp/sim
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG VRAM_WAIT VRAM_JOB
mkdir -m 1777 "$tmp/sim"
mkdir -m 755 "$tmp/vramd" "$tmp/out" "$tmp/cdi"
S=$tmp/vramd/vramd.sock
export VRAM_DAEMON=$S
"$vramd" --socket "$S" --state "$tmp/state" --log info >"$tmp/vramd.out" 2>&1 &
daemon_pid=$!
wait_for 10 test -S "$S" || { cat "$tmp/vramd.out"; echo "FAIL: vramd did not start"; exit 1; }
"$vram" cdi generate --output "$tmp/cdi/vram.json" || exit 1

# The engine: vram-oci-runtime as a runtime, and CDI from the test's folder on 25 and later.
cdi=
[ "${version:-0}" -ge 25 ] && cdi=", \"features\": {\"cdi\": true}, \"cdi-spec-dirs\": [\"$tmp/cdi\"]"
printf '{"runtimes": {"vram": {"path": "%s"}}%s}\n' "$build/vram-oci-runtime" "$cdi" >"$tmp/daemon.json"
dockerd --config-file "$tmp/daemon.json" --data-root "$tmp/data" --exec-root "$tmp/exec" \
  -H "unix://$tmp/docker.sock" --pidfile "$tmp/docker.pid" --bridge none --iptables=false \
  >"$tmp/dockerd.log" 2>&1 &
engine_pid=$!
if ! wait_for 30 "${D[@]}" info >/dev/null 2>&1; then
  why=$(grep -i 'level=\(error\|fatal\)' "$tmp/dockerd.log" | tail -1)
  kill "$engine_pid" 2>/dev/null; wait "$engine_pid" 2>/dev/null; engine_pid=
  skip "dockerd cannot start here (${why:-it did not answer in 30 s}): a capability" \
    "this machine lacks, not a missing package"
fi

# An image with nothing in it: the host's /usr (merged, as Debian 12's) mounted in.
mkdir -p "$tmp/root/usr" "$tmp/root/etc" "$tmp/root/proc" "$tmp/root/sys" "$tmp/root/dev" "$tmp/root/tmp"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$tmp/root/$d"; done
tar -C "$tmp/root" -c . | "${D[@]}" import - "vram-test-$$" >/dev/null ||
  { echo "FAIL: docker import"; exit 1; }
so=$build/libvram-preload.so
common=(--rm --network none -v /usr:/usr:ro -v /etc/ld.so.cache:/etc/ld.so.cache:ro
        -v "$build:$build:ro" -v "$tmp:$tmp" -e LD_LIBRARY_PATH -e VRAM_SIM_DEVICES -e VRAM_SIM_DIR)
inside="'$grab' A 1 1000; '$grab' B 1 3000; '$vram' status --json"
G=$((1 << 30))

# Docker 20.10, as the README has it: the mounts and variables by hand,
# the hooks added by vram-oci-runtime.
"${D[@]}" run "${common[@]}" --runtime vram -e VRAM_CONTAINER_GPUS=0 -e VRAM_MEMORY_LIMIT=2GiB \
  -e LD_PRELOAD="$so" -e VRAM_DAEMON="$S" -e VRAM_COMMAND=vramd -v "$so:$so:ro" \
  -v "$vram:$vram:ro" -v "$tmp/vramd:$tmp/vramd" "vram-test-$$" sh -c "$inside" >"$tmp/out/20" 2>&1
check "docker --runtime vram: the container is one vramd job with its budget" \
  grep -q '"role":"job","command":"container","job":"[^"]*","budget":'$((2 * G))',' "$tmp/out/20"
check "docker --runtime vram: it sees its budget as the device" grep -q "^RESULT A $((2 * G)) [0-9]* ok" "$tmp/out/20"
check "docker --runtime vram: and cannot pass it" grep -q "^RESULT B $((2 * G)) 0 OOM" "$tmp/out/20"

# Docker 25 and later: the CDI spec.
if [ -n "$cdi" ]; then
  "${D[@]}" run "${common[@]}" --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=2GiB "vram-test-$$" \
    sh -c "$inside" >"$tmp/out/25" 2>&1
  check "docker --device vram.dev/gpu=0 (CDI): one vramd job" \
    grep -q '"role":"job","command":"container","job":"[^"]*","budget":'$((2 * G))',' "$tmp/out/25"
  check "docker --device vram.dev/gpu=0 (CDI): the budget as the device" \
    grep -q "^RESULT A $((2 * G)) [0-9]* ok" "$tmp/out/25"
  check "docker --device vram.dev/gpu=0 (CDI): and no more" grep -q "^RESULT B $((2 * G)) 0 OOM" "$tmp/out/25"
else
  echo "(Docker $version: no CDI before 25; that half not run)"
fi
check "no job left in vramd" wait_for 5 sh -c "! '$vram' status --json | grep -q '\"role\":\"job\"'"
[ "$failures" = 0 ] || for f in "$tmp/out/"*; do echo "--- $f"; cat "$f"; done
echo "test_docker: $passed passed, $failures failed"
[ "$failures" = 0 ]
