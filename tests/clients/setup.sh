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

# `hold HOLDER SIZE`: another process on the device, holding SIZE through
# libvram until stop_hold (its pid in $HOLD_PID).
hold() {
  coproc HOLD { exec "$1" "$2"; }
  local line
  read -r line <&"${HOLD[0]}"
  test "$line" = held
}
stop_hold() { eval "exec ${HOLD[1]}>&-"; wait "$HOLD_PID" 2>/dev/null; }

# Debian packages scripts/test-deps.sh unpacked (contrib, non-free) for the
# tests, in the source tree's cache; `need_contrib PATH WHAT` skips the
# test, saying why, when PATH is not there.
contrib=${VRAM_DEB_CACHE:-$here/../../.cache/debian}/root
need_contrib() {
  [ -e "$contrib/$1" ] ||
    missing "$2 is not unpacked in $contrib (scripts/test-deps.sh fetches it from Debian, as root)"
}
