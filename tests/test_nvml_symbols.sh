#!/usr/bin/env bash
# The simulated libnvidia-ml.so.1 exports exactly the functions NVIDIA's
# nvml.h declares (the list scripts/gen-nvml-api.py committed in
# sim/nvml_entry_points.inc) and the three that driver 580.159.04's library
# exports beyond its header (src/cuda/nvml_later.h; issue 28): a tool that
# looks its NVML symbols up when it loads finds every one, as on a real
# driver. It exports nothing else but R615's per-cgroup memory limits,
# which those headers predate (sim/nvml_limits.c). NVIDIA's 580.159.04
# library exports 404 names: these 403 and its private export table.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:?usage: test_nvml_symbols.sh LIBNVIDIA_ML}
. "$src/tests/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -n 's/^NVML_\(SYMBOL\|OTHER\)(\([A-Za-z0-9_]*\).*/\2/p' "$src/sim/nvml_entry_points.inc" >"$tmp/list"
later="nvmlDeviceGetRemappedRows_v2 nvmlDeviceGetUnrepairableMemoryFlag_v1 nvmlDeviceReadPRMCounters_v1"
r615="nvmlDeviceGetMemoryLimits_v1 nvmlDeviceSetMemoryLimits_v1"
{ cat "$tmp/list"; printf '%s\n' $later $r615; } | sort >"$tmp/header"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwVv]$/ {print $3}' | sort >"$tmp/lib"
check "the header's list is the generated one (400 functions of driver 580's nvml.h)" test "$(wc -l <"$tmp/list")" = 400
diff "$tmp/header" "$tmp/lib" >"$tmp/diff"
check "nm -D of the library equals the header's functions, driver 580.159.04's three beyond it and R615's two (< expected only, > library only)" test ! -s "$tmp/diff"
check "405 names expected: driver 580.159.04's 404 less its private table, and R615's two" test "$(grep -c . <"$tmp/header")" = 405
head -40 "$tmp/diff"
echo "$passed passed, $failures failed"
[ $failures = 0 ]
