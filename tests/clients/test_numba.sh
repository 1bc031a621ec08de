#!/usr/bin/env bash
# Numba, a program nobody here wrote, on the simulated GPU: alone (the whole
# device less its CUDA context) and under `vram run --limit 2GiB` (a 2 GiB
# device, its context inside it: all the rest and not a byte more). Debian's numba runs with Debian's
# python3 (/usr/bin/python3), the one the package installs into.
set -u
build=$(cd "${1:?usage: test_numba.sh BUILD_DIR}" && pwd)
py=/usr/bin/python3
. "$(dirname "$0")/../lib.sh"
"$py" -c 'import numba.cuda' 2>/dev/null ||
  missing "Debian's python3-numba is not installed (scripts/test-deps.sh installs it as root)"
. "$(dirname "$0")/setup.sh"
export NUMBA_CACHE_DIR="$tmp/cache"
MiB=$((1 << 20))
total=85017493504 context=$((518 * MiB)) # the H100 profile's CUDA total and its context (sim/config.h)

"$py" "$here/numba_client.py" $total $((total - context)) >"$tmp/direct" 2>&1
check "numba alone: the whole device less the context" test $? = 0
"$build/vram" run --limit 2GiB -- "$py" "$here/numba_client.py" $((2048 * MiB)) $((2048 * MiB - context)) >"$tmp/budget" 2>&1
check "numba under vram run --limit 2GiB: a 2 GiB device, all its context leaves, no more" test $? = 0
check "the peak is the budget, the context inside it" contains "$tmp/budget" "peak 2.00 GiB of 2.00 GiB budget (context 518.00 MiB)"
check "the refusal names the budget" contains "$tmp/budget" "budget 2.00 GiB"
for f in direct budget; do echo "--- $f"; cat "$tmp/$f"; done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
