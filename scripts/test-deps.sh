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
#   tmux                       a real terminal to drive vram top in
#                              (test_top: send-keys, capture-pane)
#   python3-prometheus-client  Prometheus's text-format parser, to read what
#                              vram status --prometheus and vramd's metrics
#                              file say (test_status)
#   python3-numba, ffmpeg, hashcat
#                              real programs that use the CUDA driver, run on
#                              the simulated GPU alone and under vram run
#                              (tests/clients)
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
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null || want+=(python3-prometheus-client)
command -v ffmpeg >/dev/null || want+=(ffmpeg)
command -v hashcat >/dev/null || want+=(hashcat)
[ ${#want[@]} = 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing for the tests: ${want[*]}"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp "${TMPDIR:-/tmp}/vram-test-deps.XXXXXX.log")
  if { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${want[@]}"; } >"$log" 2>&1; then
    rm -f "$log"
  else
    echo "could not install ${want[*]} (see $log); the tests needing them will be skipped"
  fi
else
  echo "not installed: ${want[*]} (needs root and apt-get); the tests needing them will be skipped"
fi
exit 0
