#!/usr/bin/env bash
# make bench: what charging contexts and modules to the budget costs, on the
# simulated driver and NVML (the difference is vram's; a real driver's own
# work, tens to hundreds of ms for a context, is not in these figures):
#   - making a context and loading a module, plainly and under the
#     interposer with a budget (vram-bench-contexts);
#   - vram run's start, which makes, measures and releases a context on each
#     GPU the program will see: `vram run --limit 8GiB -- true` with 1 and 4
#     simulated GPUs, wall-clock ms, median of 21 runs.
set -eu
build=${1:?usage: contexts.sh BUILD_DIR}
build=$(cd "$build" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/sim VRAM_DAEMON=off VRAM_SIM_DIR=$tmp/sim
unset VRAM_SIM_DEVICES VRAM_SIM_CONTEXT_SIZE VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD
mkdir "$VRAM_SIM_DIR"
"$build/vram-bench-contexts"
VRAM_MEMORY_LIMIT=8GiB LD_PRELOAD=$build/libvram-preload.so "$build/vram-bench-contexts"
for gpus in 1 4; do
  devices=$(printf '80GiB%.0s,' $(seq "$gpus")) && devices=${devices%,}
  printf 'vram run --limit 8GiB -- true, %d simulated GPU%s: ' "$gpus" "$([ "$gpus" = 1 ] || echo s)"
  VRAM_SIM_DEVICES=$devices "$build/vram-bench-contexts" --start "$build/vram"
done
