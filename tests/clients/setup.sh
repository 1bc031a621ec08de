# What the client tests share: sourced after `build` is set. A private
# simulated machine (the profile's one H100) and scratch folder, removed at
# the end; the checks of ../lib.sh; no vram settings from outside.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$here/../lib.sh"
export LD_LIBRARY_PATH="$build/sim" VRAM_SIM_DIR="$tmp/sim" VRAM_DAEMON=off
unset VRAM_SIM_DEVICES VRAM_SIM_CONTEXT_SIZE CUDA_VISIBLE_DEVICES LD_PRELOAD VRAM_MEMORY_LIMIT \
  VRAM_MEMORY_FRACTION VRAM_LOG
