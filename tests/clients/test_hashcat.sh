#!/usr/bin/env bash
# hashcat, a program nobody here wrote, lists the simulated GPU as its CUDA
# device (`hashcat -I`): the device's name, SMs and memory (the whole device,
# less its CUDA context, free), and under `vram run --limit 4GiB` the budget
# as its memory (free: the budget less its context). hashcat's CUDA backend
# needs NVIDIA's run-time compiler (libnvrtc, from a CUDA toolkit; Debian's
# main archive has none): without
# it hashcat does not use CUDA at all, and this test says it was skipped.
set -u
build=$(cd "${1:?usage: test_hashcat.sh BUILD_DIR}" && pwd)
. "$(dirname "$0")/../lib.sh"
command -v hashcat >/dev/null || missing "hashcat is not installed (scripts/test-deps.sh installs it as root)"
# Not a package scripts/test-deps.sh installs (Debian's main archive has
# none): a skip, also under CI=true.
ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' ||
  skip "hashcat's CUDA backend needs libnvrtc (a CUDA toolkit's), which is not installed"
. "$(dirname "$0")/setup.sh"
export HOME="$tmp" XDG_DATA_HOME="$tmp" XDG_CACHE_HOME="$tmp" XDG_CONFIG_HOME="$tmp"

(cd "$tmp" && hashcat -I --backend-ignore-opencl) >"$tmp/alone" 2>&1
check "hashcat -I runs" test $? = 0
check "lists a CUDA device" contains "$tmp/alone" "CUDA.Version.: 13.0"
check "the H100" contains "$tmp/alone" "Name...........: NVIDIA H100 80GB HBM3"
check "its SMs" contains "$tmp/alone" "Processor(s)...: 132"
check "its memory" contains "$tmp/alone" "Memory.Total...: 81079 MB"
check "free: all but the CUDA context (518 MiB)" contains "$tmp/alone" "Memory.Free....: 80561 MB"
check "its PCI address" contains "$tmp/alone" "PCI.Addr.BDFe..: 0000:18:00.0"

(cd "$tmp" && "$build/vram" run --limit 4GiB -- hashcat -I --backend-ignore-opencl) >"$tmp/budget" 2>&1
check "under vram run: runs" test $? = 0
check "under vram run: the budget is its memory" contains "$tmp/budget" "Memory.Total...: 4096 MB"
check "under vram run: all of it free but its context" contains "$tmp/budget" "Memory.Free....: 3578 MB"
cat "$tmp/alone" "$tmp/budget"
echo "$passed passed, $failures failed"
[ $failures = 0 ]
