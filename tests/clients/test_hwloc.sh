#!/usr/bin/env bash
# hwloc's NVML plugin (Debian's libhwloc-contrib-plugins, from contrib), a
# program nobody here wrote, loads against the simulated libnvidia-ml and
# lstopo lists the GPU with its model, serial and UUID: alone and under
# `vram run --limit 2GiB`. Before the simulated NVML exported all of nvml.h,
# the plugin did not load (undefined symbol nvmlDeviceGetNvLinkState).
set -u
build=$(cd "${1:?usage: test_hwloc.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/setup.sh"
need_contrib usr/lib/x86_64-linux-gnu/hwloc/hwloc_nvml.so "hwloc's NVML plugin (libhwloc-contrib-plugins, contrib)"
command -v lstopo-no-graphics >/dev/null ||
  missing "lstopo-no-graphics is not installed (Debian's hwloc; scripts/test-deps.sh installs it)"
export HWLOC_PLUGINS_PATH=$contrib/usr/lib/x86_64-linux-gnu/hwloc HWLOC_COMPONENTS_VERBOSE=1
gpu='GPU(NVML) .*GPUVendor="NVIDIA Corporation" GPUModel="NVIDIA H100 80GB HBM3" NVIDIASerial=1654923000001 NVIDIAUUID=GPU-5a1d0e5a-a000-4000-8000-000000000000) "nvml0"'

lstopo-no-graphics -v --of console >"$tmp/alone" 2>&1
check "lstopo ran" test $? = 0
check "the NVML plugin loaded" contains "$tmp/alone" "Enabling discovery component \`nvml'"
check "lstopo lists the GPU: model, serial, UUID" contains "$tmp/alone" "$gpu"

"$build/vram" run --limit 2GiB -- lstopo-no-graphics -v --of console >"$tmp/budget" 2>&1
check "lstopo ran under vram run" test $? = 0
check "under vram run: the plugin loaded" contains "$tmp/budget" "Enabling discovery component \`nvml'"
check "under vram run: the GPU listed" contains "$tmp/budget" "$gpu"
for f in alone budget; do echo "--- $f"; grep -E "nvml|GPU" "$tmp/$f"; done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
