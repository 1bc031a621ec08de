#!/usr/bin/env bash
# make test: every stage, each timed, none stopping the next.
#   test-all.sh BUILD_DIR   (environment: JOBS, compilers at once; TEST_JOBS,
#                            tests at once; CMAKE_FLAGS, for every build)
#  1. deps: the Debian packages the tests need (scripts/test-deps.sh);
#  2. build: the plain build;
#  3. plain: its tests, while the ASan+UBSan and TSan builds are made
#     alongside, at a lower priority until the tests end (the tests spend
#     most of their time waiting on daemons, timeouts and each other, so
#     the CPU they leave builds the sanitizers' trees; each build's output
#     is in its folder's build.log, shown if it fails);
#  4. asan: every test under AddressSanitizer + UndefinedBehaviorSanitizer;
#  5. tsan: the threaded tests (label threads) under ThreadSanitizer.
# Tests run TEST_JOBS at once (twice the cores unless set: most of them
# wait more than they compute), through scripts/ctest.sh. A stage that
# fails does not stop the next: the run ends with the time of each stage
# and fails naming those that failed.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: test-all.sh BUILD_DIR}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
test_jobs=${TEST_JOBS:-$((2 * jobs))}
for v in jobs test_jobs; do
  case ${!v} in
    '' | *[!0-9]* | 0*)
      echo "test-all.sh: ${v^^}=${!v}: expected a whole number above 0" >&2; exit 2 ;;
  esac
done
read -r -a flags <<<"${CMAKE_FLAGS:-}"

failed=() timing=()
now() { date +%s; }
stage() { # NAME SECONDS [NOTE]: one line of the table at the end
  timing+=("$(printf '  %-7s %5d s%s' "$1" "$2" "${3:+   $3}")")
}
configure() { # DIR [FLAGS...]
  local dir=$1; shift
  cmake -S "$src" -B "$dir" "${flags[@]}" "$@" >/dev/null
}
# A sanitizer's tree, configured and built; its output in DIR/build.log,
# and "STATUS END_TIME" in DIR/build.status when it is done.
build_tree() { # DIR FLAGS...
  local dir=$1 rc; shift
  mkdir -p "$dir"
  rm -f "$dir/build.status"
  { configure "$dir" "$@" && nice -n 10 cmake --build "$dir" -j "$jobs"; } >"$dir/build.log" 2>&1
  rc=$?
  echo "$rc $(now)" >"$dir/build.status"
}
built() { # DIR NAME: waits for build_tree's end; 0 if it built
  local rc= end
  until [ -s "$1/build.status" ] && read -r rc end <"$1/build.status"; do
    kill -0 "$builds" 2>/dev/null || break
    sleep 1
  done
  ready=${end:-$(now)}
  [ "$rc" = 0 ] && return 0
  echo "make test: the $2 build failed (its log: $1/build.log):"
  tail -40 "$1/build.log"
  return 1
}
tests() { # NAME DIR [CTEST_ARGS...]
  local name=$1 dir=$2; shift 2
  "$src/scripts/ctest.sh" "$dir" --output-on-failure -j "$test_jobs" "$@" || failed+=("$name")
}

start=$(now)
t=$(now); "$src/scripts/test-deps.sh"; stage deps $(($(now) - t))

t=$(now)
echo "== build ($build)"
{ configure "$build" && cmake --build "$build" -j "$jobs"; } || failed+=(build)
stage build $(($(now) - t))

echo "== plain tests, $test_jobs at once; $build-asan, then $build-tsan, built alongside"
t=$(now)
rm -f "$build-asan/build.status" "$build-tsan/build.status"
set -m # the builds: a process group of their own, to renice and to stop
{ build_tree "$build-asan" -DVRAM_SANITIZE=address,undefined
  build_tree "$build-tsan" -DVRAM_SANITIZE=thread; } &
builds=$!
set +m
trap 'kill -- -$builds 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
builds_t0=$t
if [[ " ${failed[*]} " == *" build "* ]]; then
  failed+=(plain)
else
  tests plain "$build"
fi
plain_end=$(now)
stage plain $((plain_end - t))
# Nothing of this run competes with the builds now: at everyone's priority
# again (which only root may give back; elsewhere they stay niced).
renice -n 0 -g $builds >/dev/null 2>&1
# A sanitizer's stage: waiting for its build (if it is not done yet), then
# its tests.
t=$(now)
built "$build-asan" ASan+UBSan; asan_ok=$? asan_ready=$ready
waited=$(($(now) - t))
echo "== ASan+UBSan tests, $test_jobs at once"
if [ $asan_ok = 0 ]; then tests asan "$build-asan"; else failed+=(asan); fi
stage asan $(($(now) - t)) "($waited s of it waiting for its build)"

t=$(now)
built "$build-tsan" TSan; tsan_ok=$? tsan_ready=$ready
wait $builds
waited=$(($(now) - t))
echo "== TSan tests (label threads), $test_jobs at once"
if [ $tsan_ok = 0 ]; then tests tsan "$build-tsan" -L threads; else failed+=(tsan); fi
stage tsan $(($(now) - t)) "($waited s of it waiting for its build)"

echo "make test: where the time went (the sanitizers' trees were built from the start of the"
echo "plain tests: ASan+UBSan's was ready $((asan_ready - builds_t0)) s after it, TSan's $((tsan_ready - builds_t0)) s;" \
     "the plain tests took $((plain_end - builds_t0)) s)"
printf '%s\n' "${timing[@]}"
printf '  %-7s %5d s\n' total $(($(now) - start))
if [ ${#failed[@]} != 0 ]; then
  echo "make test: FAILED: ${failed[*]}"
  exit 1
fi
echo "make test: every stage passed"
