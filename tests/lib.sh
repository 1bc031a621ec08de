# Helpers of the shell tests: `check NAME CONDITION...` counts a pass or
# prints the failure; `wait_for SECONDS CONDITION...` polls, bounded.
failures=0 passed=0
check() {
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL: $name"; failures=$((failures + 1)); fi
}
contains() { grep -q -- "$2" "$1"; }
wait_for() {
  local deadline=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
  until "$@"; do
    [ $(( $(date +%s%N) / 1000000 )) -ge $deadline ] && return 1
    sleep 0.1
  done
}

# Users of this run only, for tests of what one user can do to another:
# `test_users a b` (as root, with useradd) sets user_a, user_b to fresh
# names (and uid_a, uid_b, gid_a, gid_b); `test_group g user_a...` makes a
# group with them as supplementary members (group_g, gid_group_g).
# remove_test_users stops everything they run and deletes them. Names carry
# this shell's pid, so runs side by side never share a user; so do the ids,
# given here rather than left to useradd (the next free one): a test that
# adds its users to a private copy of /etc (test_containers' overlay, for
# /etc/cdi) was given an id a user made in the host's /etc then got too,
# and its `pkill -u` at the end, from the host's pid namespace, killed the
# other test's processes. Ids are 2,000,000 + 8 x pid + n (n < 8), above
# useradd's own range (login.defs' UID_MAX), with no lastlog entry (-l:
# lastlog is a file indexed by id).
_test_users=() _test_groups=() _test_ids=0
_retry() { local i; for i in $(seq 40); do "$@" 2>/dev/null && return 0; sleep 0.25; done; "$@"; }
_test_id() {
  [ $_test_ids -lt 8 ] || { echo "lib.sh: a test makes at most 8 users and groups" >&2; return 1; }
  id=$((2000000 + 8 * $$ + _test_ids))
  _test_ids=$((_test_ids + 1))
}
test_users() {
  local n u id
  for n in "$@"; do
    u=vt$$$n
    _test_id || return 1
    _retry useradd --no-create-home --no-log-init --uid "$id" --user-group \
      --shell /usr/sbin/nologin "$u" || return 1
    _test_users+=("$u")
    eval "user_$n=$u uid_$n=$(id -u "$u") gid_$n=$(id -g "$u")"
  done
}
test_group() {
  local n=$1 g=vt$$$1 id; shift
  _test_id || return 1
  _retry groupadd --gid "$id" "$g" || return 1
  _test_groups+=("$g")
  local m; for m in "$@"; do _retry usermod -aG "$g" "$m" || return 1; done
  eval "group_$n=$g gid_group_$n=$(getent group "$g" | cut -d: -f3)"
}
remove_test_users() {
  local u g
  for u in "${_test_users[@]}"; do pkill -9 -u "$u" 2>/dev/null; done
  for u in "${_test_users[@]}"; do
    for _ in $(seq 20); do pgrep -u "$u" >/dev/null || break; sleep 0.1; done
    _retry userdel "$u"
  done
  for g in "${_test_groups[@]}"; do getent group "$g" >/dev/null && _retry groupdel "$g"; done
  _test_users=() _test_groups=()
}
# A copy of what another user runs (the build may be unreadable to them):
# make_kit BUILD PEER DIR puts vram, the interposer, the demo's grab program,
# peer and the simulated libraries in DIR, readable by all.
make_kit() {
  mkdir -p "$3/sim"
  cp "$1/vram" "$1/libvram-preload.so" "$1/vram-demo-grab" "$2" "$3/"
  cp -P "$1"/sim/lib* "$3/sim/"
  chmod -R a+rX "$3"
}

# The set-up the daemon's shell tests share: `daemon_test NAME BUILD` makes
# a private folder (tmp, removed at exit unless KEEP_TMP is set) with a
# simulated 12 GiB GPU and the place of the daemon's socket (S, exported as
# VRAM_DAEMON), clears the budget variables, and on exit stops everything
# the test started (its jobs, daemon_pid, its test users). `field KEY` is the
# first device's KEY in root's vram status --json; `is KEY VALUE` compares.
daemon_test() {
  tmp=$(mktemp -d "/tmp/vram-$1.XXXXXX")
  chmod 755 "$tmp"
  export LD_LIBRARY_PATH="$2/sim" VRAM_SIM_DEVICES=12GiB VRAM_SIM_DIR=$tmp/sim
  mkdir -m 1777 "$VRAM_SIM_DIR"
  unset VRAM_MEMORY_LIMIT VRAM_MEMORY_FRACTION LD_PRELOAD VRAM_LOG VRAM_WAIT VRAM_JOB
  S=$tmp/vramd.sock
  export VRAM_DAEMON=$S
  daemon_pid=
  trap _daemon_test_end EXIT
}
_daemon_test_end() {
  kill -9 $(jobs -p) 2>/dev/null
  [ -n "$daemon_pid" ] && kill -9 "$daemon_pid" 2>/dev/null
  # A failure comes with vramd's own log, which goes with the test's /tmp.
  if [ "$failures" != 0 ] && [ -s "$tmp/daemon.out" ]; then
    echo "--- vramd's log ($tmp/daemon.out), its last 300 lines:"
    tail -n 300 "$tmp/daemon.out"
  fi
  remove_test_users
  wait 2>/dev/null
  [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
field() {
  "$vram" status --json 2>/dev/null | grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2
}
is() { [ "$(field "$1")" = "$2" ]; }
# private_install BUILD: vram installed (cmake --install) under a prefix
# of the test's own, $P, in a folder $tmp removed when the test exits; on
# failure the log is shown and the test ends.
private_install() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  P=$tmp/prefix
  cmake --install "$1" --prefix "$P" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: cmake --install --prefix $P"; exit 1; }
}
# Tests that cannot run here end skipped (77), for one of two kinds of
# reason. `missing WHAT`: software the test needs is not installed (WHAT
# names it and what installs it). scripts/test-deps.sh installs all of it
# where it can (root with apt-get, as on CI), so under CI=true, on a
# machine it set up, a missing program is a failure, never a skip (a
# locked dpkg once left 8 tests skipped and the run green).
# `skip WHY`: something no package changes: not root, no cgroup2, a build
# under a path with a space, a sanitizer's build; a skip under CI=true too.
# `missing_for_check WHAT`: one check of a test that runs on without it
# (counted as a failure under CI=true).
missing() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $* (CI=true: what scripts/test-deps.sh installs must be there)"
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}
skip() {
  echo "SKIP: $*"
  exit 77
}
missing_for_check() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $* (CI=true: what scripts/test-deps.sh installs must be there)"
    failures=$((failures + 1))
  else
    echo "SKIP (one check): $*"
  fi
}
# Debian's python3 as $py (with its json and csv), or the test cannot run.
need_debian_python() {
  py=/usr/bin/python3
  [ -x $py ] || missing "Debian's python3 is not installed (scripts/test-deps.sh installs it)"
}
# Chromium, its WebDriver and Debian's python3 (as $py) for browser.py, or
# the test cannot run.
need_browser() {
  py=/usr/bin/python3
  local need
  for need in chromium chromedriver $py; do
    command -v "$need" >/dev/null ||
      missing "$need is not installed (scripts/test-deps.sh installs Debian's chromium," \
              "chromium-driver and python3)"
  done
}
# json_field FILE EXPR: EXPR (Python) of the JSON in FILE, as d.
json_field() { $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# The command a `vram run` started in the background runs as its child.
child_of() { local c=; read -r c _ <"/proc/$1/task/$1/children" 2>/dev/null; [ -n "$c" ] && echo "$c"; }
command_of() { wait_for 5 child_of "$1" >/dev/null && child_of "$1"; }
# What vram costs while nothing happens (issue 22). `cost_of DIR`: what the
# process /proc/PID (all its threads) or the thread /proc/PID/task/TID has
# cost so far, "TICKS SWITCHES": CPU (user + system, clock ticks) and how
# often it left the CPU (slept, or was preempted while spinning).
# `idle_cost NAME DIR SECONDS MAX_SWITCHES` measures over SECONDS, prints the
# figures and checks under 0.1 s of CPU (over 10 s) and under MAX_SWITCHES.
cost_of() {
  local d=$1 f s t n=0 v
  read -r -a f < <(sed 's/^.*) //' "$d/stat" 2>/dev/null) || return 1
  t=$((f[11] + f[12]))
  if [ -d "$d/task" ]; then set -- "$d"/task/*/status; else set -- "$d/status"; fi
  for s in "$@"; do
    for v in $(awk '/^(non)?voluntary_ctxt_switches/ {print $2}' "$s" 2>/dev/null); do
      n=$((n + v))
    done
  done
  echo "$t $n"
}
idle_cost() {
  local name=$1 dir=$2 secs=$3 max=$4 a b hz ms n
  hz=$(getconf CLK_TCK)
  a=($(cost_of "$dir")) || { check "$name: $dir is there to measure" false; return; }
  sleep "$secs"
  b=($(cost_of "$dir")) || { check "$name: $dir lived through the measurement" false; return; }
  ms=$(( (b[0] - a[0]) * 1000 / hz )) n=$((b[1] - a[1]))
  echo "$name: ${ms} ms of CPU and $n switches in $secs s"
  check "$name: under 0.1 s of CPU in $secs s (used $ms ms)" test $((ms * 10)) -lt $((100 * secs))
  check "$name: fewer than $max switches in $secs s ($n)" test "$n" -lt "$max"
}

# A cgroup of the test's own for the tests of vramd's driver backend:
# `test_cgroup` (root, a cgroup2 hierarchy this process may write) sets mnt
# (the mount), here (the cgroup the test began in), C (a new cgroup below
# it, which this shell moves itself into) and rel (C as /proc/PID/cgroup
# writes it), or returns 1 with why in cgroup_why. remove_test_cgroup puts
# every process under C back where the test began and removes C and what
# is below it, deepest first; call it at exit. job_cgroups lists the job
# cgroups below C: only what this test made, whatever else runs on the
# machine (another test's vramd, another worktree's).
test_cgroup() {
  cgroup_why=
  [ "$(id -u)" = 0 ] || { cgroup_why="moving processes between cgroups and setting the driver's limits need root"; return 1; }
  mnt=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") { print $5; exit } break } }' \
    /proc/self/mountinfo)
  [ -n "$mnt" ] || { cgroup_why="no cgroup2 hierarchy is mounted"; return 1; }
  here=$(sed -n 's/^0:://p' /proc/self/cgroup)
  [ -n "$here" ] || { cgroup_why="this process is in no cgroup2 cgroup (/proc/self/cgroup has no 0:: line)"; return 1; }
  here=$mnt${here%/}
  C=$mnt/vram-test-$$-$RANDOM
  rel=${C#$mnt}
  mkdir "$C" 2>/dev/null || { cgroup_why="cannot make a cgroup under $mnt"; C=; return 1; }
  echo $$ >"$C/cgroup.procs" 2>/dev/null || { cgroup_why="cannot move this test into $C"; rmdir "$C"; C=; return 1; }
}
remove_test_cgroup() {
  [ -n "${C:-}" ] && [ -d "$C" ] || return 0
  local d p
  for d in $(find "$C" -depth -type d); do
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do echo "$p" >"$here/cgroup.procs" 2>/dev/null; done
    rmdir "$d" 2>/dev/null
  done
}
job_cgroups() { find "$C" -maxdepth 6 -type d -name 'vram-job-*' 2>/dev/null; }
cg_of() { sed -n 's/^0:://p' "/proc/$1/cgroup"; }
no_job_cgroup() { [ -z "$(job_cgroups)" ]; }
