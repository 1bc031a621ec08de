#!/usr/bin/env bash
# vram top in a real terminal, as a person uses it: a shell in tmux runs
# vram top against a private vramd on the simulated GPU with 30 processes
# holding memory (more than fit in 80x24) and one using memory without a
# grant; keys are typed with send-keys and the screen is read with
# capture-pane. Checks what a user sees: the header, the GPU summary kept on
# screen while the processes scroll, the sorting keys and their footer, the
# window's size honoured (also after a resize), sizes as vram devices writes
# them, q and Ctrl-C giving the terminal back as it was.
set -u
build=${1:?usage: test_top.sh BUILD_DIR HOLDER}
holder=${2:?}
vram=$build/vram vramd=$build/vramd
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || missing "tmux is not installed (scripts/test-deps.sh installs it)"
daemon_test top "$build"
export VRAM_SIM_CONTEXT_SIZE=0
M=$((1 << 20))

printf 'default-budget 64MiB\nwhen-full fail\nreconcile-every 100ms\n' >"$tmp/policy"
"$vramd" --socket "$S" --policy "$tmp/policy" --state "$tmp/state" >"$tmp/daemon.out" 2>&1 &
daemon_pid=$!
wait_for 30 test -S "$S" || { echo "FAIL: vramd did not start"; cat "$tmp/daemon.out"; exit 1; }

# 30 processes, each holding a different amount (i * 10 MiB) under a budget
# of twice that; one more that uses 300 MiB outside vramd (no grant).
for i in $(seq 1 30); do
  sleep 600 | VRAM_MEMORY_LIMIT=$((i * 20))MiB "$holder" $((i * 10))MiB >/dev/null 2>&1 &
done
sleep 600 | VRAM_DAEMON=off VRAM_MEMORY_LIMIT=400MiB "$holder" 300MiB >/dev/null 2>&1 &
outside=$!
unseen_in() { "$vram" status --json | grep -q '"unseen":\[{"device":0,"pid":'; }
check "30 processes in the ledger" wait_for 20 sh -c "[ \$('$vram' status --json | grep -o '\"role\":\"process\"' | wc -l) = 30 ]"
check "and one outside it" wait_for 30 unseen_in
outside_pid=$("$vram" status --json | sed 's/.*"unseen":\[{"device":0,"pid":\([0-9]*\).*/\1/')
driver=$("$vram" status --json | sed 's/.*"driver_version":"\([^"]*\)".*/\1/')

# A shell in an 80x24 terminal of its own (a private tmux server).
tm() { tmux -S "$tmp/tmux.sock" "$@"; }
tm -f /dev/null new-session -d -s t -x 80 -y 24 "env PS1='$ ' bash --norc --noprofile"
screen() { tm capture-pane -p -t t >"$tmp/screen"; }
shows() { screen; grep -q -- "$1" "$tmp/screen"; }
lines_of() { awk 'END { print NR }' "$tmp/screen"; }
widest() { awk '{ if (length > m) m = length } END { print m + 0 }' "$tmp/screen"; }
# The process rows of the screen: lines that start with a pid.
rows() { grep -E '^ *[0-9]+ ' "$tmp/screen" | grep -v '^ *0 NVIDIA\|^ *[0-9] NVIDIA' ; }
column_of() { # N: the Nth field of each process row
  rows | awk -v n="$1" '{ print $n }'
}
sorted() { # FILE FLAGS: the lines are in that order
  sort -c $2 "$1" 2>/dev/null
}

# The terminal's settings (stty -g: modes, not the window's size, which is
# tmux's to set and which tmux may still be changing after a resize).
# Typed into a shell: the paths quoted for it (a checkout's may have a space).
qvram=$(printf %q "$vram") qtmp=$(printf %q "$tmp")
tm send-keys -t t "stty -g >$qtmp/stty.before; $qvram top --interval 200ms" Enter
check "vram top takes the screen" wait_for 30 shows "q quit"
sleep 0.5
screen
cp "$tmp/screen" "$tmp/screen.first"
check "a header: host, time and driver version, as nvidia-smi has" \
  sh -c "head -1 '$tmp/screen' | grep -qE '^vram top  $(hostname | cut -c1-20).*[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}  driver $driver'"
nvml_version=$("$vram" status --json | sed 's/.*"nvml_version":"\([^"]*\)".*/\1/')
check "the NVML version whole, on the next line where the first has no room" \
  sh -c "sed -n 2p '$tmp/screen' | grep -qx 'NVML $nvml_version'"
check "the GPUs' free and grantable memory at 80 columns, what is unseen left out first" \
  sh -c "sed -n 3p '$tmp/screen' | grep -qE '^GPU NAME .* USED +FREE +GRANTABLE\$'"
check "the screen is the window's 24 lines" test "$(lines_of)" = 24
check "no line wider than its 80 columns" test "$(widest)" -le 80
check "the GPU summary on screen" sh -c "grep -q 'NVIDIA H100' '$tmp/screen' && grep -q 'GPU-' '$tmp/screen'"
check "the footer names the keys" sh -c "tail -1 '$tmp/screen' | grep -q 'q quit  sort: m\[memory\] u user p pid t time'"
check "31 processes do not fit: the footer says which are shown" \
  sh -c "tail -1 '$tmp/screen' | grep -qE ' 1-[0-9]+ of 31$'"
check "sizes with vram devices' precision" grep -q ' 290.00 MiB ' "$tmp/screen"
check "the user's line: 31 processes, the peak" grep -qE '^root +0 +31 ' "$tmp/screen"
check "usage without a grant is its process's, and its user's" \
  grep -qE "^ *$outside_pid root +0 +- +300.00 MiB +300.00 MiB unseen +holder 300MiB" "$tmp/screen"
# Each holder's command line says what it holds: the order of the rows.
held() { grep -oE 'holder [0-9]+MiB$' "$tmp/screen" | grep -oE '[0-9]+'; }
held >"$tmp/held"
check "sorted by memory, the most first" sh -c "head -1 '$tmp/held' | grep -qx 300 && [ \$(wc -l <'$tmp/held') -ge 10 ]"
check "all of them in order" sorted "$tmp/held" -nr
check "the command column: the command line, as wide as there is room" \
  grep -qE ' holder 290MiB$' "$tmp/screen"

tm send-keys -t t p
check "p sorts by pid" wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -q 'p\[pid\]'"
screen
column_of 1 >"$tmp/pids"
check "the rows are in pid order" sorted "$tmp/pids" -n
check "the GPU summary stays at the top" sh -c "sed -n 3,5p '$tmp/screen' | grep -q 'NVIDIA H100' && sed -n 5p '$tmp/screen' | grep -q '^    \['"
first=$(head -1 "$tmp/pids")
tm send-keys -t t NPage
check "PgDn scrolls the processes" wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -qE ' [1-9][0-9]*-[0-9]+ of 31\$' && ! tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -q ' 1-'"
screen
sed -n 3,5p "$tmp/screen.first" >"$tmp/gpu.first"; sed -n 3,5p "$tmp/screen" >"$tmp/gpu.now"
check "and the GPU summary does not move" cmp -s "$tmp/gpu.first" "$tmp/gpu.now"
column_of 1 >"$tmp/pids2"
check "the first rows are gone" sh -c "! grep -qx '$first' '$tmp/pids2'"
tm send-keys -t t End
check "End shows the last row" wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -qE '[0-9]+-31 of 31\$'"
tm send-keys -t t Home
check "Home goes back to the first" wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -qE ' 1-[0-9]+ of 31\$'"
tm send-keys -t t r
sleep 0.5
screen
column_of 1 >"$tmp/pids"
check "r reverses" sorted "$tmp/pids" -nr
check "and the footer says so" sh -c "tail -1 '$tmp/screen' | grep -q 'r\[reversed\]'"
tm send-keys -t t m
check "m sorts by memory again, in its own order (a new sort is not reversed)" \
  wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -q 'm\[memory\].* r reverse '"
screen
held >"$tmp/held"
check "the most first again" sorted "$tmp/held" -nr

tm resize-window -t t -x 132 -y 50
check "a larger window: all of it is used" wait_for 15 sh -c "[ \$(tmux -S '$tmp/tmux.sock' capture-pane -p -t t | awk 'END { print NR }') = 50 ] && tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -qE ' 1-31 of 31\$'"
screen
check "no line wider than its 132 columns, the bar reaching the edge" \
  sh -c "[ \$(awk '{ if (length > m) m = length } END { print m }' '$tmp/screen') -le 132 ] && grep -qE '^    \[[#=.]{80,}\] GPU-' '$tmp/screen'"
check "more columns where there is room: NVML's figure, the running time" \
  grep -qE 'NVML STATE +TIME COMMAND' "$tmp/screen"
tm resize-window -t t -x 80 -y 24
# tmux takes the new size at once (display-message says 80x24, capture-pane
# cuts its copy of the screen to 24 lines, top's footer last), but tells the
# terminal (TIOCSWINSZ, which top and stty read) only when its resize timer
# lets it, up to 250 ms later on an idle machine, later on a loaded one (the
# shell's stty -a said rows 50; columns 132): the terminal itself must be
# 80x24 again before it is compared.
pane_tty=$(tm display-message -p -t t '#{pane_tty}')
check "back to 80x24" wait_for 15 sh -c "[ \"\$(stty -F '$pane_tty' size)\" = '24 80' ] && [ \$(tmux -S '$tmp/tmux.sock' capture-pane -p -t t | awk 'END { print NR }') = 24 ] && tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -q 'q quit'"

tm send-keys -t t q
check "q quits" wait_for 15 shows '^\$ *$'
tm send-keys -t t "echo status=\$?; stty -g >$qtmp/stty.after" Enter
check "with status 0" wait_for 15 shows '^status=0$'
check "the terminal is as it was (stty -g)" wait_for 15 cmp -s "$tmp/stty.before" "$tmp/stty.after"
cmp -s "$tmp/stty.before" "$tmp/stty.after" || diff "$tmp/stty.before" "$tmp/stty.after" >&2
check "and the screen too: top's lines are gone with its screen" sh -c "! grep -q 'q quit' '$tmp/screen'"

tm send-keys -t t "$qvram top --interval 200ms" Enter
check "again" wait_for 30 shows "q quit"
tm send-keys -t t C-c
check "Ctrl-C ends it" wait_for 15 shows '^\$ *$'
tm send-keys -t t "echo status=\$?; stty -g >$qtmp/stty.after" Enter
check "as Ctrl-C ends a program (status 130)" wait_for 15 shows '^status=130$'
check "and gives the terminal back as it was" wait_for 15 cmp -s "$tmp/stty.before" "$tmp/stty.after"

tm kill-server
kill "$outside" 2>/dev/null
echo "test_top: $passed passed, $failures failed"
[ $failures = 0 ]
