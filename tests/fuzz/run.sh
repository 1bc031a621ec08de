#!/usr/bin/env bash
# Fuzzes with libFuzzer, for a bounded time each, from the kept corpus
# (tests/fuzz/corpus): the protocol parser, the policy parser, vramd's
# message handling end to end (fuzz_daemon: the real handlers and ledger,
# without the loop, through tests/fake_conns.c), and the recording reader
# with the summary and timeline vram record and vram plot make of it. The kept corpus is only
# read: what the fuzzers find goes to a temporary folder, removed at the
# end, so a run leaves the checkout as it was (a failing input is kept in
# BUILD_DIR/fuzz, to reproduce it with the binary there).
# Exit 77 (skipped) when clang with libFuzzer is not on this machine:
# scripts/test-deps.sh installs it where it can.
#   run.sh BUILD_DIR [SECONDS]   (FUZZ_MERGE=1: add to the kept corpus, minimised
#                                 with -merge=1, the inputs that reach new code;
#                                 FUZZ_TARGETS="daemon": only those; FUZZ_RUNS=N:
#                                 N inputs each instead of SECONDS)
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$src/tests/lib.sh"
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
mkdir -p "$build/fuzz"
out=$(cd "$build/fuzz" && pwd) || exit 1
cc=${FUZZ_CC:-clang}
status=0
# The fuzzers of one run each, several runs (one per target) at once.
scratch_root=$(mktemp -d "${TMPDIR:-/tmp}/vram-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$scratch_root"' EXIT
if ! command -v "$cc" >/dev/null ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
     "$cc" -x c -fsanitize=fuzzer - -o "$scratch_root/probe" 2>/dev/null; then
  missing "no clang with libFuzzer here (scripts/test-deps.sh installs clang and libclang-rt-14-dev)"
fi
common="src/util/parse.c src/util/report.c src/util/text.c" # relative to $src, where they are compiled
ledger="src/protocol/protocol.c src/protocol/snapshot.c src/client/client.c
        src/protocol/history_view.c src/view/trend.c"
daemon="src/daemon/daemon.c src/daemon/identity.c src/daemon/answers.c src/daemon/answers_send.c
        src/daemon/answers_jobs.c src/daemon/answers_containers.c src/daemon/driver_limits.c
        src/daemon/driver_work.c src/daemon/cgroups.c src/daemon/job_keep.c
        src/daemon/containers.c src/command/command_state.c src/util/container.c
        src/daemon/files.c src/ledger/ledger.c src/ledger/ledger_admit.c
        src/ledger/ledger_held.c src/ledger/ledger_view.c src/ledger/policy.c
        src/view/metrics.c src/ledger/history.c src/util/proc.c
        tests/fake_conns.c"
record="src/record/reader.c src/record/usage.c src/record/summary.c
        src/record/timeline.c src/record/recording.c src/record/formats.c
        src/record/export_csv.c src/record/export_trace.c
        src/util/addrmap.c src/util/json.c"
for target in ${FUZZ_TARGETS:-protocol policy daemon record}; do
  case $target in
    protocol) extra=$ledger ;;
    policy) extra="src/ledger/policy.c" ;;
    daemon) extra="$ledger $daemon" ;;
    record) extra=$record ;;
  esac
  # Compiled from the checkout (the lists are relative: its path may have a space).
  (cd "$src" && "$cc" -g -O1 -std=c11 -D_GNU_SOURCE -DFAKE_KEEP=8 \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all "tests/fuzz/fuzz_$target.c" \
    $extra $common -o "$out/fuzz_$target") || { status=1; continue; }
  # libFuzzer writes new inputs into the first folder it is given: a scratch
  # one, so the kept corpus changes only on purpose (FUZZ_MERGE=1).
  scratch=$scratch_root/$target
  mkdir "$scratch" || { status=1; continue; }
  if [ -n "${FUZZ_RUNS:-}" ]; then limit="-runs=$FUZZ_RUNS"; else limit="-max_total_time=$seconds"; fi
  # -timeout catches an input that hangs; it is wall-clock time, so it is
  # far above what any input takes (well under a second) for a machine
  # busy with other tests not to look like a hang.
  if ! "$out/fuzz_$target" $limit -max_len=2048 -timeout=60 \
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
