# bash completion for vram, installed as
# PREFIX/share/bash-completion/completions/vram, where bash-completion looks
# for it (XDG_DATA_DIRS, or beside the vram it completes).
#
# The commands and options are read from the --help texts of the vram being
# completed, so they are always that vram's: no list here to fall behind.

# The commands of `vram --help`, or the options of `vram CMD --help`.
_vram_help_words()
{
    local vram=$1 cmd=$2
    if [[ -z $cmd ]]; then
        "$vram" --help 2>/dev/null | sed -n -e 's/^  \([a-z][a-z]*\) .*/\1/p' \
            -e 's/^  \(--[a-z][a-z-]*\).*/\1/p'
    else
        "$vram" "$cmd" --help 2>/dev/null | sed -n 's/^  \(--[a-z][a-z-]*\)\(.\).*/\1\2/p' |
            sed -e 's/\[$/=/' -e 's/[^=]$//'
    fi
}

_vram()
{
    local cur prev words cword split
    _init_completion -s || return

    local vram=${words[0]} cmd= cmdi=0 i
    for ((i = 1; i < cword; i++)); do
        if [[ ${words[i]} != -* ]]; then
            cmd=${words[i]} cmdi=$i
            break
        fi
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$(_vram_help_words "$vram" "")" -- "$cur"))
        return
    fi

    # vram run: after "--", or after the first word that is not an option or
    # an option's value, comes the program, completed as itself.
    if [[ $cmd == run ]]; then
        for ((i = cmdi + 1; i < cword; i++)); do
            if [[ ${words[i]} == -- ]]; then
                _command_offset $((i + 1))
                return
            fi
        done
    fi

    case $prev in
        --log)
            COMPREPLY=($(compgen -W "off error warn info debug" -- "$cur"))
            return
            ;;
        --sort)
            COMPREPLY=($(compgen -W "memory user pid time gpu" -- "$cur"))
            return
            ;;
        --socket | --summary | --record | --output)
            _filedir
            return
            ;;
        --format)
            if [[ $cmd == plot ]]; then
                COMPREPLY=($(compgen -W "html svg" -- "$cur"))
            elif [[ $cmd == devices ]]; then
                COMPREPLY=($(compgen -W "csv csv,noheader csv,nounits csv,noheader,nounits" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "vrec csv json" -- "$cur"))
            fi
            return
            ;;
        --gpu) # vram oci-hook's, as a CDI spec passes it: a UUID, an index, or all
            COMPREPLY=($(compgen -W "all" -- "$cur"))
            return
            ;;
        --limit | --fraction | --devices | --gpus | --job | --interval)
            return # a value of the user's own
            ;;
    esac
    $split && return

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_vram_help_words "$vram" "$cmd")" -- "$cur"))
        [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
    elif [[ $cmd == run ]]; then
        _command_offset $cword
    elif [[ $cmd == cdi && $cword == $((cmdi + 1)) ]]; then
        COMPREPLY=($(compgen -W "generate" -- "$cur"))
    elif [[ $cmd == oci-hook && $cword == $((cmdi + 1)) ]]; then
        COMPREPLY=($(compgen -W "createRuntime poststop" -- "$cur")) # a runtime's stages
    fi
} &&
    complete -F _vram vram
