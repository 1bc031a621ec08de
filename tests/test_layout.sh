#!/usr/bin/env bash
# The tree's layout is its architecture (ARCHITECTURE.md): which folder's
# code may include which. Above all, the daemon's state (src/ledger) is
# pure and includes no client and no view, and nothing that runs inside a
# user's program (src/client, src/core, src/preload, tools/, slurm/)
# includes the daemon's state or vramd's own code. Every #include "..." of
# the tree is resolved to the folder it names and checked against the
# folder's list below; a new arrow is a change to this list, made on
# purpose. The check is first run on a made-up tree that breaks the rules,
# to show that it can fail. And the driver's generated prototypes are for
# the test programs only.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/tests/lib.sh"

# What each folder of src/ may include (besides itself); include/ is vram.h.
declare -A allowed=(
  [util]="include"
  [alloc]="util"
  [cuda]=""
  [record]="util"
  [protocol]="util"
  [ledger]="protocol util"                        # the daemon's state: pure
  [view]="protocol util"
  [command]="util"                                # a vram run command's shared budget
  [client]="command protocol util"
  [core]="alloc client cuda include util"
  [preload]="client command core cuda record util"
  [daemon]="client command cuda ledger protocol util view"  # command: a container's state (containers.c)
)
# Outside src/: what each folder must not include.
declare -A forbidden=(
  [tools]="ledger daemon"       # vram, run by any user
  [slurm]="ledger daemon view"  # in srun, sbatch and slurmstepd
)

# A static check takes a second or two, also on a busy machine: one grep
# reads every #include of the tree, and the rest is bash alone, with no
# process per file or per include (a thousand of them took a minute at
# load 6).

# The folder a path names, into $part: src/X -> X; anything else its first
# component.
part_of() {
  case $1 in
    src/*) part=${1#src/}; part=${part%%/*} ;;
    */*) part=${1%%/*} ;;
    *) part=. ;;
  esac
}

# DIR/INCLUDE with its . and .. resolved, relative to the tree, into $target
# (as realpath -m would, the tree having no symbolic links).
resolve() {
  local -a parts out=()
  local p IFS=/
  read -r -a parts <<<"$1"
  for p in "${parts[@]}"; do
    case $p in
      '' | .) ;;
      ..) if [ ${#out[@]} -gt 0 ] && [ "${out[-1]}" != .. ]; then unset 'out[-1]'; else out+=(..); fi ;;
      *) out+=("$p") ;;
    esac
  done
  target="${out[*]}"
}

# Prints "file: includes target (rule)" for every include that breaks the
# rules in the tree at $1.
violations() {
  local root=$1 file inc line part fpart tpart target
  while IFS= read -r line; do
    file=${line%%:*} inc=${line#*:}
    inc=${inc#*\"} inc=${inc%\"}
    resolve "${file%/*}/$inc"
    [ -e "$root/$target" ] || continue
    part_of "$target"; tpart=$part
    part_of "$file"; fpart=$part
    [ "$tpart" = "$fpart" ] && continue
    case $file in
      src/*)
        if [ -z "${allowed[$fpart]+set}" ]; then
          echo "$file: src/$fpart is not in tests/test_layout.sh's list"
        elif ! [[ " ${allowed[$fpart]} " == *" $tpart "* ]]; then
          echo "$file: includes $target (src/$fpart may include only: ${allowed[$fpart]:-itself})"
        fi ;;
      *)
        if [[ " ${forbidden[$fpart]:-} " == *" $tpart "* ]]; then
          echo "$file: includes $target ($fpart/ must not include: ${forbidden[$fpart]})"
        fi ;;
    esac
  done < <(cd "$root" && grep -r -H -o --include='*.[ch]' \
             '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"' src tools slurm 2>/dev/null | sort)
}

# A tree that breaks the rules four times: the check must find each.
bad=$(mktemp -d "${TMPDIR:-/tmp}/vram-layout.XXXXXX") || exit 1
trap 'rm -rf "$bad"' EXIT
mkdir -p "$bad/src/ledger" "$bad/src/client" "$bad/src/view" "$bad/tools"
touch "$bad/src/ledger/ledger.h" "$bad/src/client/client.h" "$bad/src/view/screen.h"
printf '#include "../client/client.h"\n#include "../view/screen.h"\n' >"$bad/src/ledger/ledger.c"
printf '#include "../ledger/ledger.h"\n' >"$bad/src/client/client.c"
printf '#include "../src/ledger/ledger.h"\n' >"$bad/tools/top.c"
found=$(violations "$bad")
check "the check finds the daemon's state including a client and a view, a client and vram including the state" \
  test "$(printf '%s\n' "$found" | grep -c .)" = 4

found=$(violations "$src")
[ -z "$found" ] || printf '%s\n' "$found"
check "every #include of the tree follows the layout" test -z "$found"

# The driver's prototypes are the test programs': vram reaches the driver
# only through dlopen() and dlsym(), never by linking to it.
protos=$(cd "$src" && grep -rl --include='*.[ch]' 'cuda_prototypes\.h' src tools slurm |
         grep -v '^src/cuda/cuda_prototypes\.h$')
[ -z "$protos" ] || printf '%s\n' "$protos"
check "nothing of vram includes the driver's prototypes (src/cuda/cuda_prototypes.h)" \
  test -z "$protos"

echo "test_layout: $passed passed, $failures failed"
[ "$failures" = 0 ]
