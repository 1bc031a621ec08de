#!/usr/bin/env bash
# What `make test` needs beyond gcc, cmake and make, installed from
# Debian's packages where this machine lets us (root with apt-get, as on
# CI). Elsewhere it says what is missing; the tests that need it then
# report themselves skipped, never passed.
#   clang, libclang-rt-14-dev  libFuzzer, for the protocol and policy fuzzers
#   slurm-wlm, munge, libslurm-dev
#                              a real single-node Slurm and spank.h, for the
#                              SPANK plugin and its integration test
#   pkgconf                    pkg-config, to build the README's example
#                              against an install (test_install)
#   systemd                    systemd-analyze verify, for vramd's unit
#                              (test_install_unit)
#   man-db, groff-base         man -l and groff -ww, for the manual pages
#                              (test_man)
#   bash-completion            the loader that finds vram's completion
#                              (test_completion)
#   chromium, chromium-driver  a real browser, driven headless, to check what
#                              vram plot's page shows (tests/record/test_plot.sh)
#   python3                    Debian's, to drive it and to read the JSON and
#                              CSV that vram record writes; Python's
#                              subprocess as a real launcher of a command's
#                              processes (test_command), and its JSON parser
#                              for vram run --summary
#   podman, runc               real containers (podman 4.3, rootful, runc as
#                              its runtime, the host's root as the image):
#                              vram cdi generate's spec and vram oci-hook
#                              driven as podman drives them (tests/containers.sh)
#   tmux                       a real terminal to drive vram top in
#                              (test_top: send-keys, capture-pane)
#   python3-prometheus-client  Prometheus's text-format parser, to read what
#                              vram status --prometheus and vramd's metrics
#                              file say (test_status)
#   python3-numba, ffmpeg, hashcat
#                              real programs that use the CUDA driver, run on
#                              the simulated GPU alone and under vram run
#                              (tests/clients)
#   hwloc, python3-pytools, python3-appdirs, python3-decorator, python3-mako,
#   libboost-python1.74.0, libboost-thread1.74.0
#                              lstopo, and what PyCUDA needs from main
#   python3-blessed, python3-psutil
#                              what Debian's gpustat needs from main
#   nvtop, python3-pycuda, libhwloc-contrib-plugins, slurm-wlm-nvml-plugin,
#   gpustat, python3-pynvml (contrib), libcurand10 (non-free: PyCUDA's
#   _driver links it)
#                              real programs that use NVML (nvtop, hwloc's
#                              NVML plugin, Slurm's gpu/nvml plugin for
#                              AutoDetect=nvml, gpustat) and the CUDA
#                              driver (PyCUDA), in
#                              sections this machine's apt sources may not
#                              list: fetched from the same Debian archive
#                              and suite with a private sources list and
#                              lists folder (the machine's sources are not
#                              changed), unpacked with dpkg -x into
#                              .cache/debian/root in the source tree
#                              (VRAM_DEB_CACHE=DIR elsewhere); the tests
#                              look for them there
set -u
want=()
have_fuzzer() {
  command -v clang >/dev/null &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' |
      clang -x c -fsanitize=fuzzer - -o "$probe" 2>/dev/null
}
probe=$(mktemp "${TMPDIR:-/tmp}/vram-fuzz-probe.XXXXXX")
have_fuzzer || want+=(clang libclang-rt-14-dev)
rm -f "$probe"
{ [ -f /usr/include/slurm/spank.h ] && command -v slurmctld >/dev/null && command -v munged >/dev/null; } ||
  want+=(slurmctld slurmd slurm-client munge libslurm-dev)
command -v pkg-config >/dev/null || want+=(pkgconf)
command -v systemd-analyze >/dev/null || want+=(systemd)
{ command -v man >/dev/null && command -v groff >/dev/null; } || want+=(man-db groff-base)
[ -f /usr/share/bash-completion/bash_completion ] || want+=(bash-completion)
{ command -v chromium >/dev/null && command -v chromedriver >/dev/null; } ||
  want+=(chromium chromium-driver)
[ -x /usr/bin/python3 ] || want+=(python3)
/usr/bin/python3 -c 'import numba' 2>/dev/null || want+=(python3-numba)
command -v tmux >/dev/null || want+=(tmux)
{ command -v podman >/dev/null && command -v runc >/dev/null; } || want+=(podman runc)
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null || want+=(python3-prometheus-client)
command -v ffmpeg >/dev/null || want+=(ffmpeg)
command -v hashcat >/dev/null || want+=(hashcat)
command -v lstopo-no-graphics >/dev/null || want+=(hwloc)
/usr/bin/python3 -c 'import pytools, appdirs, decorator, mako' 2>/dev/null ||
  want+=(python3-pytools python3-appdirs python3-decorator python3-mako)
[ -e /usr/lib/x86_64-linux-gnu/libboost_python311.so.1.74.0 ] || want+=(libboost-python1.74.0)
[ -e /usr/lib/x86_64-linux-gnu/libboost_thread.so.1.74.0 ] || want+=(libboost-thread1.74.0)
/usr/bin/python3 -c 'import blessed, psutil' 2>/dev/null || want+=(python3-blessed python3-psutil)

# Packages from Debian's contrib and non-free sections, unpacked (never
# installed) into the project's cache; "" when everything is there.
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${VRAM_DEB_CACHE:-$root/.cache/debian}
unpacked() {
  [ -x "$cache/root/usr/bin/nvtop" ] && [ -f "$cache/root/usr/lib/python3/dist-packages/pycuda/driver.py" ] &&
    [ -f "$cache/root/usr/lib/x86_64-linux-gnu/hwloc/hwloc_nvml.so" ] &&
    [ -f "$cache/root/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so" ] &&
    [ -f "$cache/root/usr/lib/python3/dist-packages/gpustat/core.py" ] &&
    [ -f "$cache/root/usr/lib/python3/dist-packages/pynvml.py" ] &&
    ls "$cache"/root/usr/lib/x86_64-linux-gnu/libcurand.so.10* >/dev/null 2>&1
}
fetch_unpacked() {
  local pkgs=(nvtop python3-pycuda libhwloc-contrib-plugins slurm-wlm-nvml-plugin gpustat python3-pynvml
              libcurand10)
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  # The archive and suite this machine installs Debian from: the main
  # section's source without a -updates/-security suffix.
  local archive suite
  read -r archive suite < <(apt-cache policy 2>/dev/null |
    awk '$3 ~ /^[a-z]+\/main$/ && $2 ~ /^https?:/ {sub("/main", "", $3); print $2, $3; exit}')
  if [ -z "${archive:-}" ] || [ ! -f "$keyring" ]; then
    echo "cannot fetch ${pkgs[*]}: no Debian archive in apt's sources, or no $keyring; the tests needing them will be skipped"
    return 0
  fi
  local apt=$cache/apt
  mkdir -p "$apt/lists/partial" "$apt/parts" "$apt/archives/partial" "$apt/debs" "$cache/root"
  echo "deb [signed-by=$keyring] $archive $suite contrib non-free" >"$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
              -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "APT::Sandbox::User=root")
  echo "fetching for the tests, from $archive $suite contrib/non-free into $cache: ${pkgs[*]}"
  local log
  log=$(mktemp "${TMPDIR:-/tmp}/vram-test-deps.XXXXXX.log")
  if { "$root/scripts/apt-wait.sh" "${opts[@]}" update -qq &&
       (cd "$apt/debs" && "$root/scripts/apt-wait.sh" "${opts[@]}" download "${pkgs[@]}") &&
       for deb in "$apt"/debs/*.deb; do dpkg -x "$deb" "$cache/root" || exit 1; done; } >"$log" 2>&1; then
    rm -rf "$log" "$apt/debs" "$apt/archives"
  else
    echo "could not fetch ${pkgs[*]} (see $log); the tests needing them will be skipped"
  fi
}
if ! unpacked; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && command -v dpkg >/dev/null; then
    fetch_unpacked
  else
    echo "not fetched: nvtop, python3-pycuda, libhwloc-contrib-plugins, slurm-wlm-nvml-plugin, gpustat, python3-pynvml, libcurand10 (needs root and apt-get); the tests needing them will be skipped"
  fi
fi
[ ${#want[@]} = 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing for the tests: ${want[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp "${TMPDIR:-/tmp}/vram-test-deps.XXXXXX.log")
  # Another apt-get or dpkg may be at work (another person's make test, an
  # upgrade): waited for (scripts/apt-wait.sh), not given up on at once with
  # the tests that need these packages then skipped.
  if { "$root/scripts/apt-wait.sh" update -qq &&
       "$root/scripts/apt-wait.sh" install -y -qq --no-install-recommends "${want[@]}"; } >"$log"; then
    rm -f "$log"
  else
    echo "could not install ${want[*]} (see $log); the tests needing them will be skipped" \
         "(under CI=true: will fail)"
  fi
else
  echo "not installed: ${want[*]} (needs root and apt-get); the tests needing them will be skipped"
fi
exit 0
