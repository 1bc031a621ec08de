#!/usr/bin/env bash
# bash completion for vram, installed under a prefix and loaded the way
# bash-completion loads it (from XDG_DATA_DIRS, when vram is first
# completed), then asked what TAB offers: the commands, each command's
# options (those of its --help), option values, and the program vram run
# starts.
set -u
build=$(cd "${1:?usage: test_completion.sh BUILD_DIR}" && pwd)
bc=/usr/share/bash-completion/bash_completion
. "$(dirname "$0")/lib.sh"
[ -f "$bc" ] || missing "bash-completion is not installed (scripts/test-deps.sh installs it)"
private_install "$build"
check "installed where bash-completion looks" test -f "$P/share/bash-completion/completions/vram"

offers() { # LINE: what TAB offers at the end of LINE, one a line, sorted
  PATH=$P/bin:$PATH XDG_DATA_DIRS=$P/share bash --norc --noprofile -c '
    . "$1" >/dev/null 2>&1
    __load_completion vram || _comp_load vram || exit 3
    spec=$(complete -p vram) || exit 4
    fn=${spec#*-F }; fn=${fn%% *}
    COMP_LINE=$2 COMP_POINT=${#2} COMP_TYPE=9
    read -ra COMP_WORDS <<<"$2"
    [[ $2 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    "$fn" vram "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}"
  ' _ "$bc" "$1" 2>"$tmp/err" | sort -u
}
is() { # LINE EXPECTED...: TAB offers exactly these
  local got want
  got=$(offers "$1" | tr '\n' ' ')
  shift
  want=$(printf '%s\n' "$@" | sort -u | tr '\n' ' ')
  [ "$got" = "$want" ] || { echo "  offered: $got"; echo "  wanted:  $want"; cat "$tmp/err"; return 1; }
}
has() { offers "$1" | grep -qx -- "$2"; }
lacks() { ! has "$@"; }

check "vram <TAB>: the commands" is "vram " run devices top status plot record cdi --help --version
check "vram d<TAB>" is "vram d" devices
check "vram run --l<TAB>" is "vram run --l" --limit --log
check "vram run --w<TAB>: --wait takes =DURATION" is "vram run --w" --wait=
check "vram run --<TAB>: every option of vram run --help" \
  is "vram run --" --limit --fraction --devices --gpus --growth --log --wait= --start-anyway --job \
  --per-process --summary --record --format --help
check "vram run --log <TAB>: the levels" is "vram run --log " off error warn info debug
check "vram run --limit <TAB>: nothing to guess" is "vram run --limit "
check "vram run --format <TAB>: the recording's forms" is "vram run --format " vrec csv json
check "vram plot --format <TAB>: the plot's forms" is "vram plot x.vrec --format " html svg
check "vram plot --j<TAB>: a job from vramd" is "vram plot --j" --job
check "vram devices --<TAB>" is "vram devices --" --brief --json --format --help
check "vram devices --format <TAB>: nvidia-smi's csv forms" \
  is "vram devices --format " csv csv,noheader csv,nounits csv,noheader,nounits
check "vram top --<TAB>" is "vram top --" --once --interval --sort --socket --help
check "vram top --sort <TAB>: the orders" is "vram top --sort " memory user pid time gpu
check "vram status --<TAB>" is "vram status --" --json --no-history --prometheus --socket --help
check "vram cdi <TAB>: generate" is "vram cdi " generate
check "vram cdi generate --<TAB>" is "vram cdi generate --" --output --help
check "vram cdi generate --output <TAB>: a file" has "vram cdi generate --output /et" /etc
check "vram oci-hook <TAB>: the runtime's stages" is "vram oci-hook " createRuntime poststop
check "vram oci-hook createRuntime --<TAB>" is "vram oci-hook createRuntime --" --gpu --help
check "vram oci-hook poststop --gpu <TAB>: all (or a UUID, an index)" is "vram oci-hook poststop --gpu " all
check "vram run ... -- <TAB>: the program to run" has "vram run --limit 4GiB -- bas" bash
check "vram run ... -- prog -<TAB>: the program's own completion, not vram's" \
  lacks "vram run --limit 4GiB -- ls --" --limit

echo "$passed passed, $failures failed"
[ "$failures" = 0 ]
