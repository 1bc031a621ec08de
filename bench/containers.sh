#!/usr/bin/env bash
# make bench: containers as vramd jobs (podman 4.3 and runc from Debian, the
# simulated 12 GiB GPU, root; else said and skipped), wall-clock:
#   - what vram oci-hook adds to a container's start: `podman run --rm ...
#     true` with --device vram.dev/gpu=0 (the hook registering the job with
#     vramd, which makes its command state) and without, ROUNDS of each,
#     interleaved, median and the difference of the medians;
#   - from a kill -9 of a container holding memory to another request's
#     GRANT of what its grant held (a process on the host waiting for 10
#     GiB while the container's job holds 4): the container's cgroup
#     empties, vramd hears it (inotify on cgroup.events) and ends the job,
#     KILLS times, median and longest;
#   - two containers of 4 GiB, each holding 3 GiB: their jobs' peaks.
#   containers.sh BUILD_DIR [ROUNDS [KILLS]]
set -u
build=$(cd "${1:?usage: containers.sh BUILD_DIR [ROUNDS [KILLS]]}" && pwd)
rounds=${2:-10} kills=${3:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"
. "$src/tests/containers.sh"
container_skip() { echo "containers: skipped: $*"; exit 0; }
missing() { container_skip "$@"; }
need_podman
in_private_cdi_tmp bench-containers "$0" "$@"
daemon_pid=
trap 'remove_containers; kill -9 $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/sim VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$tmp/sim
unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG VRAM_WAIT VRAM_JOB
mkdir -m 1777 "$tmp/sim"
mkdir -m 755 "$tmp/vramd" "$tmp/out"
export VRAM_DAEMON=$tmp/vramd/vramd.sock
printf 'default-budget 1GiB\nwhen-full wait 60s\nreconcile-every 100ms\n' >"$tmp/policy"
"$build/vramd" --socket "$VRAM_DAEMON" --policy "$tmp/policy" --state "$tmp/state" --log info \
  >"$tmp/vramd.log" 2>&1 &
daemon_pid=$!
wait_for 10 test -S "$VRAM_DAEMON" || { echo "containers: vramd did not start"; exit 1; }
"$build/vram" cdi generate --output "$tmp/cdi/vram.json" || exit 1
sim=(-e LD_LIBRARY_PATH -e VRAM_SIM_DEVICES -e VRAM_SIM_DIR -v "$tmp:$tmp")
G=$((1 << 30))
now_us() { echo $(( $(date +%s%N) / 1000 )); }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# The hook's cost at a container's start.
: >"$tmp/plain"; : >"$tmp/hooked"
for i in $(seq "$rounds"); do
  for kind in plain hooked; do
    dev=(); [ "$kind" = hooked ] && dev=(--device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=1GiB)
    t0=$(now_us)
    podman run --rm "${podman_flags[@]}" "${dev[@]}" --rootfs /:O true >/dev/null 2>&1 ||
      { echo "containers: podman run ($kind) failed"; exit 1; }
    echo $(( $(now_us) - t0 )) >>"$tmp/$kind"
  done
done
plain=$(median <"$tmp/plain") hooked=$(median <"$tmp/hooked")
printf 'a container'"'"'s start, podman run --rm true, median of %d: %d ms plain, %d ms with vram.dev/gpu=0 (its job registered): %d ms more\n' \
  "$rounds" $((plain / 1000)) $((hooked / 1000)) $(( (hooked - plain) / 1000 ))

# Two containers of 4 GiB holding 3 GiB each: their peaks.
for n in a b; do
  container_run "$n" --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=4GiB "${sim[@]}" -- \
    "$build/tests/member" hold $((3 * G)) 300 "$tmp/out/release"
done
job_peak() {
  local id; id=$(podman inspect -f '{{.Id}}' "$containers_prefix-$1")
  "$build/vram" status --json | grep -o "\"job\":\"$containers_prefix-$1@${id:0:12}\",[^}]*" |
    head -1 | grep -o '"peak":[0-9]*' | cut -d: -f2
}
peaks_known() { [ -n "$(job_peak a)" ] && [ -n "$(job_peak b)" ]; }
wait_for 10 peaks_known
sleep 1.5 # a report or two (every 0.5 s)
printf 'two containers of 4 GiB, each holding 3 GiB through the interposer: peaks %s and %s of 4.00 GiB\n' \
  "$(awk -v b="$(job_peak a)" 'BEGIN { printf "%.2f GiB", b / 2^30 }')" \
  "$(awk -v b="$(job_peak b)" 'BEGIN { printf "%.2f GiB", b / 2^30 }')"
remove_containers

# From a container's kill to another request's grant.
: >"$tmp/kill"; : >"$tmp/gone"
for i in $(seq "$kills"); do
  container_run k$i --device vram.dev/gpu=0 -e VRAM_MEMORY_LIMIT=4GiB "${sim[@]}" -- \
    "$build/tests/member" hold $((3 * G)) 300 "$tmp/out/release"
  wait_for 10 grep -q "job $containers_prefix-k$i@.*its holder, pid [0-9]*, is gone" "$tmp/vramd.log" 2>/dev/null ||
    sleep 1
  uuid=$("$build/vram" status --json | grep -o '"uuid":"[^"]*"' | head -1 | cut -d'"' -f4)
  "$build/tests/peer" "$VRAM_DAEMON" hold "$uuid" $((10 * G)) 60000 >"$tmp/out/granted" 2>&1 &
  waiter=$!
  wait_for 10 grep -q WAIT "$tmp/out/granted"
  job=$containers_prefix-k$i@$(podman inspect -f '{{.Id}}' "$containers_prefix-k$i" | cut -c1-12)
  pid=$(podman inspect -f '{{.State.Pid}}' "$containers_prefix-k$i")
  t0=$(now_us)
  kill -9 "$pid"
  # (Each look costs a vram status, about 4 ms here: the figures are at
  # most that much late.)
  while "$build/vram" status --json | grep -q "\"job\":\"$job\""; do :; done
  gone=$(now_us)
  until grep -q GRANT "$tmp/out/granted"; do :; done
  granted=$(now_us)
  echo $((gone - t0)) >>"$tmp/gone"
  echo $((granted - t0)) >>"$tmp/kill"
  kill "$waiter"; wait "$waiter" 2>/dev/null
  remove_containers
done
ms() { awk '{ printf "%.1f", $1 / 1000 }'; }
printf 'from a kill -9 of a container holding 4 GiB, %d kills (median, longest): its job gone from vramd'"'"'s ledger %s ms, %s ms; a waiting request'"'"'s GRANT (NVML read again, every 100 ms here) %s ms, %s ms\n' \
  "$kills" "$(median <"$tmp/gone" | ms)" "$(sort -n "$tmp/gone" | tail -1 | ms)" \
  "$(median <"$tmp/kill" | ms)" "$(sort -n "$tmp/kill" | tail -1 | ms)"
kill -TERM "$daemon_pid"; wait "$daemon_pid" 2>/dev/null
