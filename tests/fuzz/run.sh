#!/usr/bin/env bash
# Fuzzes the protocol parser and the policy parser with libFuzzer for a
# bounded time each, starting from the kept corpus (tests/fuzz/corpus).
# Exit 77 (skipped) when clang with libFuzzer is not on this machine:
# scripts/test-deps.sh installs it where it can.
#   run.sh BUILD_DIR [SECONDS]   (FUZZ_MERGE=1: add what was found to the corpus)
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
out=$build/fuzz
mkdir -p "$out"
cc=${FUZZ_CC:-clang}
if ! command -v "$cc" >/dev/null ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
     "$cc" -x c -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "SKIP: no clang with libFuzzer here (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
common="$src/src/util/parse.c"
status=0
for target in protocol policy; do
  extra=
  [ $target = protocol ] && extra="$src/src/ledger/protocol.c $src/src/ledger/snapshot.c $src/src/ledger/client.c"
  [ $target = policy ] && extra="$src/src/ledger/policy.c"
  "$cc" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all "$src/tests/fuzz/fuzz_$target.c" $extra $common \
    -o "$out/fuzz_$target" || { status=1; continue; }
  # New inputs go to a scratch folder: the kept corpus changes only on purpose.
  scratch=$out/corpus-$target
  rm -rf "$scratch"; mkdir -p "$scratch"
  if ! "$out/fuzz_$target" -max_total_time="$seconds" -max_len=2048 -timeout=5 \
       -artifact_prefix="$out/crash-$target-" "$scratch" "$src/tests/fuzz/corpus/$target" \
       >"$out/$target.log" 2>&1; then
    echo "fuzz_$target found a failure:"; tail -40 "$out/$target.log"; status=1; continue
  fi
  echo "fuzz_$target: $(grep -m1 -o 'Done [0-9]* runs in [0-9]* second(s)' "$out/$target.log"), no failure"
  if [ "${FUZZ_MERGE:-}" = 1 ]; then
    "$out/fuzz_$target" -merge=1 "$src/tests/fuzz/corpus/$target" "$scratch" >/dev/null 2>&1
  fi
done
exit $status
