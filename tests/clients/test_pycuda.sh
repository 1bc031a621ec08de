#!/usr/bin/env bash
# PyCUDA (Debian's python3-pycuda, from contrib), a program nobody here
# wrote, on the simulated GPU: alone (the whole device less its context)
# and under `vram run --limit 2GiB` (a 2 GiB device, its context inside
# it): it fills exactly what is free, and 20 x make_context/detach leave
# the device's free where it was (each detached context is destroyed, and
# the budget gets it back). PyCUDA's _driver links libcurand.so.10
# (non-free's libcurand10, unpacked beside it).
set -u
build=$(cd "${1:?usage: test_pycuda.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/setup.sh"
need_contrib usr/lib/python3/dist-packages/pycuda/driver.py "Debian's python3-pycuda (contrib)"
py=/usr/bin/python3
export PYTHONPATH=$contrib/usr/lib/python3/dist-packages
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$contrib/usr/lib/x86_64-linux-gnu
if ! "$py" -c 'import pycuda.driver' >"$tmp/import" 2>&1; then
  cat "$tmp/import"
  missing "PyCUDA does not load (its Debian dependencies: scripts/test-deps.sh installs them)"
fi
MiB=$((1 << 20))
total=$((81079 * MiB)) context=$((518 * MiB)) # CUDA's total on the H100 profile; its context

"$py" "$here/pycuda_client.py" $total $((total - context)) >"$tmp/direct" 2>&1
check "PyCUDA alone: the whole device less its context, filled; 20 contexts gone" test $? = 0
"$build/vram" run --limit 2GiB -- "$py" "$here/pycuda_client.py" $((2048 * MiB)) $((2048 * MiB - context)) \
  >"$tmp/budget" 2>&1
check "PyCUDA under vram run --limit 2GiB: the budget, filled; 20 contexts gone" test $? = 0
check "the peak is the budget, its context inside it" contains "$tmp/budget" "peak 2.00 GiB of 2.00 GiB budget"
for f in direct budget; do echo "--- $f"; cat "$tmp/$f"; done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
