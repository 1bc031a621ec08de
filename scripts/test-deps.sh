#!/usr/bin/env bash
# What `make test` needs beyond gcc, cmake and make, installed from
# Debian's packages where this machine lets us (root with apt-get, as on
# CI). Elsewhere it says what is missing; the tests that need it then
# report themselves skipped, never passed.
#   clang, libclang-rt-14-dev  libFuzzer, for the protocol and policy fuzzers
#   slurm-wlm, munge, libslurm-dev
#                              a real single-node Slurm and spank.h, for the
#                              SPANK plugin and its integration test
#   python3                    Python's subprocess as a real launcher of a
#                              command's processes (test_command), and its
#                              JSON parser for vram run --summary
set -u
want=()
have_fuzzer() {
  command -v clang >/dev/null &&
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' |
      clang -x c -fsanitize=fuzzer - -o /tmp/vram-fuzz-probe.$$ 2>/dev/null
}
have_fuzzer || want+=(clang libclang-rt-14-dev)
rm -f /tmp/vram-fuzz-probe.$$
{ [ -f /usr/include/slurm/spank.h ] && command -v slurmctld >/dev/null && command -v munged >/dev/null; } ||
  want+=(slurmctld slurmd slurm-client munge libslurm-dev)
[ -x /usr/bin/python3 ] || want+=(python3)
[ ${#want[@]} = 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing for the tests: ${want[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${want[@]}"; } >/tmp/vram-test-deps.log 2>&1 ||
    echo "could not install ${want[*]} (see /tmp/vram-test-deps.log); the tests needing them will be skipped"
else
  echo "not installed: ${want[*]} (needs root and apt-get); the tests needing them will be skipped"
fi
exit 0
