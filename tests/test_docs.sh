#!/usr/bin/env bash
# What the documents promise about themselves and the tree:
# - until docs/gpu-validation.md records a run on a GPU, the README says
#   that vram has not yet run on one (and stops saying it once one is);
# - messages and documents say "no one", never "nobody" (a user's name);
# - no file that .gitignore says to ignore is committed (byte-code caches).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"

# The validation table's rows: a run has a date in its first column.
runs=$(awk -F'|' '/^\| *date *\|/ { table = 1; next } table && /^\|---/ { next }
                  table && /^\|/ { gsub(/ /, "", $2); if ($2 != "" && $2 != "—") n++ }
                  table && !/^\|/ { table = 0 } END { print n + 0 }' "$src/docs/gpu-validation.md")
if [ "$runs" = 0 ]; then
  check "no GPU run recorded: the README says vram has not yet run on a real GPU" \
    grep -q "vram has not yet run on a real GPU" "$src/README.md"
  check "and what the simulated GPU is for" grep -q "The simulated GPU is there so that" "$src/README.md"
else
  check "a GPU run is recorded: the README no longer says vram never ran on one" \
    sh -c "! grep -q 'vram has not yet run on a real GPU' '$src/README.md'"
fi

no_nobody() { # grep: 1 is "not found"; 0 (found) and 2 (trouble) fail
  grep -rnw -i nobody "$@"
  [ $? = 1 ]
}
check "no \"nobody\" for \"no one\" in the documents, messages or comments" \
  no_nobody "$src/README.md" "$src/ARCHITECTURE.md" "$src/docs" "$src/man" "$src/tools" \
  "$src/completion" "$src/dist" "$src/src" "$src/include" "$src/sim" "$src/slurm" "$src/demo" \
  "$src/bench"

if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  ignored=$(git -C "$src" ls-files -ci --exclude-standard)
  check "no committed file is one .gitignore ignores${ignored:+ (${ignored//$'\n'/ })}" test -z "$ignored"
  check "no committed byte-code cache" sh -c "! git -C '$src' ls-files | grep -q '__pycache__\|\.pyc$'"
else
  echo "SKIP: $src is not a git checkout: committed files not checked"
  skipped=1
fi

echo "$passed passed, $failures failed"
[ "$failures" = 0 ] || exit 1
[ -z "${skipped:-}" ] || exit 77
