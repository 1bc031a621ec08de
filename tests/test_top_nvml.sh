#!/usr/bin/env bash
# vram top without vramd, as nvitop works: NVML's view for any user. In a
# real terminal (tmux, keys by send-keys, the screen by capture-pane), as a
# user who is not root, with processes of two users on the simulated GPU:
# root's program holding memory without a budget, and the user's own vram
# run command with its budget. Checks both users' processes, the command as
# a job with its process under it, the devices' sensors, sorting, a signal
# refused for root's process and sent to the user's own after confirming, q
# giving the terminal back; then --once for scripts, as root and as the user.
set -u
build=${1:?usage: test_top_nvml.sh BUILD_DIR HOLDER}
holder=${2:?}
vram=$build/vram
. "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || missing "tmux is not installed (scripts/test-deps.sh installs it)"
[ "$(id -u)" = 0 ] || skip "processes of two users need root"
for c in setpriv useradd; do
  command -v $c >/dev/null || missing "$c is not installed (processes of two users)"
done
daemon_test top-nvml "$build"
export VRAM_DAEMON=off VRAM_SIM_CONTEXT_SIZE=0
test_users u || { echo "FAIL: no test user"; exit 1; }
kit=$tmp/kit
make_kit "$build" "$holder" "$kit"
mkdir -m 777 "$tmp/u"
as_u() { setpriv --reuid="$uid_u" --regid="$gid_u" --clear-groups env LD_LIBRARY_PATH="$kit/sim" \
  VRAM_SIM_DIR="$VRAM_SIM_DIR" VRAM_SIM_DEVICES=12GiB VRAM_SIM_CONTEXT_SIZE=0 VRAM_DAEMON=off "$@"; }

# root's program without a budget; the user's command with one.
sleep 600 | VRAM_MEMORY_LIMIT=600MiB "$holder" 500MiB >/dev/null 2>&1 &
rpid=$!
sleep 600 | as_u "$kit/vram" run --limit 1GiB -- "$kit/holder" 300MiB >"$tmp/u/run.out" 2>&1 &
upid_of() { pgrep -u "$uid_u" -f "^$kit/holder 300MiB"; }
check "the user's command holds its memory" wait_for 30 sh -c "[ -n \"\$(pgrep -u $uid_u -f '^$kit/holder 300MiB')\" ] && '$vram' top --once | grep -q ' 300.00 MiB'"
upid=$(upid_of)
check "and root's program its own" wait_for 30 sh -c "'$vram' top --once | grep -qE '^ *$rpid root '"

# --- the live screen, as the user ---------------------------------------------
tm() { tmux -S "$tmp/tmux.sock" "$@"; }
tm -f /dev/null new-session -d -s t -x 80 -y 24 \
  "setpriv --reuid=$uid_u --regid=$gid_u --clear-groups env LD_LIBRARY_PATH=$kit/sim VRAM_SIM_DIR=$VRAM_SIM_DIR VRAM_SIM_DEVICES=12GiB VRAM_DAEMON=off HOME=$tmp/u PS1='$ ' bash --norc --noprofile"
screen() { tm capture-pane -p -t t >"$tmp/screen"; }
shows() { screen; grep -q -- "$1" "$tmp/screen"; }
footer_has() { tm capture-pane -p -t t | tail -1 | grep -q -- "$1"; }
rows() { grep -E '^ *[0-9]+ ' "$tmp/screen" | grep -v '^ *[0-9] NVIDIA'; }

tm send-keys -t t "stty -g >$tmp/u/stty.before; $kit/vram top --interval 200ms" Enter
check "vram top without vramd takes the screen" wait_for 30 shows "q quit"
sleep 0.5
screen
check "it says whose view it is" grep -q "(no vramd: NVML's view)" "$tmp/screen"
check "the NVML version whole at 80 columns" grep -qE 'NVML [0-9]+\.[0-9]+\.[0-9]+\.[0-9]+( |$)' "$tmp/screen"
# 800 MiB of the simulated 12 GiB H100 is 7% of it: 33 C, 114 W (sim/nvml_board.c).
check "the GPU: used, free, utilisation, temperature, power" \
  sh -c "grep -qE '^GPU NAME +TOTAL +USED +FREE +BUDGETS +UTIL +TEMP +POWER' '$tmp/screen' && grep -qE '^ +0 NVIDIA.* 12.00 GiB +800.00 MiB +11.22 GiB +1.00 GiB +7% +33C +114W' '$tmp/screen'"
check "root's process: NVML's figure, no budget" grep -qE "^ *$rpid root +0 +- +- +500.00 MiB " "$tmp/screen"
check "the user's command as a job with its budget" grep -qE "^ +job $user_u +0 +run-[0-9]+ +1.00 GiB +300.00 MiB" "$tmp/screen"
check "its process under it, drawing on the job's budget" \
  sh -c "grep -A1 -E '^ +job $user_u' '$tmp/screen' | tail -1 | grep -qE '^ *$upid $user_u +0 +run-[0-9]+ +- +300.00 MiB +300.00 MiB holder 300'"
check "each user's total" sh -c "grep -qE '^root +0 +1 +- +500.00 MiB' '$tmp/screen' && grep -qE '^$user_u +0 +1 +1.00 GiB +300.00 MiB' '$tmp/screen'"
check "no line wider than 80 columns" test "$(awk '{ if (length > m) m = length } END { print m + 0 }' "$tmp/screen")" -le 80

tm send-keys -t t u
check "u sorts by user" wait_for 15 footer_has 'u\[user\]'
screen
rows | awk '{ print $2 }' >"$tmp/users"
check "the rows in the users' order" sort -c "$tmp/users"
tm send-keys -t t p
check "p sorts by pid" wait_for 15 footer_has 'p\[pid\]'
screen
check "the job's process stays under its job" \
  sh -c "grep -A1 -E '^ +job ' '$tmp/screen' | tail -1 | grep -qE '^ *$upid '"
tm send-keys -t t p
check "p again reverses, and the footer says so" wait_for 15 footer_has 'r\[reversed\]'
tm send-keys -t t m
check "a new sort starts in its own order" wait_for 15 sh -c "tmux -S '$tmp/tmux.sock' capture-pane -p -t t | tail -1 | grep -q 'm\[memory\].*r reverse'"

# root's process is the first row (the most memory): select it, ask.
tm send-keys -t t Down
# The row in reverse video, without its escapes.
marked() { tm capture-pane -p -e -t t | grep -F "$(printf '\033[7m')" | sed 's/\x1b\[[0-9;]*m//g'; }
selected() { marked | grep -qE "^ *$1 "; }
check "an arrow selects the first row, in reverse video" wait_for 15 selected "$rpid root"
tm send-keys -t t k
check "k on root's process: refused, with why" wait_for 15 footer_has "$rpid is root's process: you may signal only your own"
check "root's process is left alone" kill -0 "$rpid"
tm send-keys -t t Down Down
check "the user's own process selected" wait_for 15 selected "$upid $user_u"
tm send-keys -t t k
check "k asks first" wait_for 15 footer_has "send SIGTERM to $upid (holder)? y/n"
tm send-keys -t t n
check "n sends nothing" wait_for 15 footer_has "no signal sent"
check "and the process runs on" kill -0 "$upid"
tm send-keys -t t PPage
check "PgUp keeps a selection: the first row" wait_for 15 selected "$rpid root"
tm send-keys -t t Down Down
check "back on the user's process" wait_for 15 selected "$upid $user_u"
tm send-keys -t t k
check "k asks again" wait_for 15 footer_has "send SIGTERM to $upid (holder)? y/n"
tm send-keys -t t y
check "y sends SIGTERM, and says so" wait_for 15 footer_has "sent SIGTERM to $upid (holder)"
check "the process ends" wait_for 15 sh -c "! kill -0 $upid 2>/dev/null"
check "its command ended with it: vram run said so" wait_for 15 grep -q 'peak' "$tmp/u/run.out"
check "and its rows are gone from the screen" wait_for 15 sh -c "! tmux -S '$tmp/tmux.sock' capture-pane -p -t t | grep -qE '^ *$upid |^ +job '"

tm send-keys -t t q
check "q quits" wait_for 15 shows '^\$ *$'
tm send-keys -t t "echo status=\$?; stty -g >$tmp/u/stty.after" Enter
check "with status 0" wait_for 15 shows '^status=0$'
check "the terminal's settings are as they were" wait_for 15 cmp -s "$tmp/u/stty.before" "$tmp/u/stty.after"
tm kill-server

# --- --once, for scripts ---------------------------------------------------------
sleep 600 | as_u "$kit/vram" run --limit 2GiB -- "$kit/holder" 200MiB >/dev/null 2>&1 &
check "a new command of the user's" wait_for 30 sh -c "'$vram' top --once | grep -q ' 200.00 MiB'"
COLUMNS=120 "$vram" top --once >"$tmp/once" 2>"$tmp/once.err"
rc=$?
check "--once: one screen, status 0, nothing on stderr" sh -c "[ $rc = 0 ] && [ ! -s '$tmp/once.err' ] && [ \$(grep -c '^vram top ' '$tmp/once') = 1 ]"
check "--once: no footer, both users" sh -c "! grep -q 'q quit' '$tmp/once' && grep -qE '^ *$rpid root ' '$tmp/once' && grep -qE ' $user_u .*holder 200MiB' '$tmp/once'"
check "--once as root: the user's process, its budget the user's to see" grep -qE "^ *[0-9]+ $user_u +0 +- +200.00 MiB" "$tmp/once"
as_u env COLUMNS=120 "$kit/vram" top --once >"$tmp/once.u" 2>&1
check "--once as the user: their command's budget" grep -qE "^ +job $user_u +0 +run-[0-9]+ +2.00 GiB +200.00 MiB" "$tmp/once.u"
check "--sort takes the start of a name" sh -c "'$vram' top --once --sort mem >/dev/null"
"$vram" top --once --sort x >/dev/null 2>"$tmp/err"
rc=$?
check "--sort x is refused, naming what is accepted" sh -c "[ $rc = 2 ] && grep -q 'sort \"x\".*memory, user, pid, time or gpu' '$tmp/err'"
VRAM_DAEMON=$tmp/none.sock "$vram" top --once >"$tmp/once" 2>&1
rc=$?
check "a vramd that does not answer: NVML's view, and why" \
  sh -c "[ $rc = 0 ] && tr '\\n' ' ' <'$tmp/once' | grep -q 'vramd does not answer: .*$tmp/none.sock.*NVML.s view and your vram run commands. budgets instead' && grep -qE '^ *$rpid root ' '$tmp/once'"
LD_LIBRARY_PATH= "$vram" top --once >"$tmp/once" 2>&1
rc=$?
check "no vramd and no NVML: said, status 1" sh -c "[ $rc = 1 ] && grep -q 'vramd is not asked (VRAM_DAEMON=off), and NVML cannot be read' '$tmp/once'"

# A command of two processes, one of them killed (issue 27, item 11): the
# job's USED is what the live one holds, at once, as with vramd, not what
# the dead one's count still says until the command next needs the room.
sleep 600 | "$vram" run --limit 2GiB -- sh -c "exec 3<&0; '$holder' 302MiB <&3 & '$holder' 204MiB <&3 & wait" \
  >"$tmp/two.out" 2>&1 &
job_used() { "$vram" top --once >"$tmp/two" 2>&1; grep -qE "^ +job root +0 +run-[0-9]+ +2.00 GiB +$1 " "$tmp/two"; }
check "a command of two processes: its job holds both" wait_for 30 job_used "506.00 MiB"
big=$(pgrep -f "^$holder 302MiB")
check "the one holding 302 MiB is there to kill" test -n "$big"
kill -9 $big
check "killed: the job's USED is the live process's alone" wait_for 15 job_used "204.00 MiB"
check "and the live one is listed under it" grep -qE "^ *[0-9]+ root +0 +run-[0-9]+ +- +204.00 MiB .*holder 204" "$tmp/two"
check "the killed one is not" sh -c "! grep -qE '^ *$big ' '$tmp/two'"

echo "test_top_nvml: $passed passed, $failures failed"
[ $failures = 0 ]
