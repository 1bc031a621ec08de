# What tests leave behind, for scripts/ctest.sh (a whole run) and
# tests/isolate.sh (one test), which source this.
#
# `private_tmp DIR...`, in a mount namespace of the caller's own, mounts
# an empty tmpfs on /tmp and binds back, at its path, each DIR that is
# under /tmp (a checkout or a build there, where many people try a
# project), so that it stays visible; `kept` lists their first components
# (X of /tmp/X), which are not leftovers. Returns 1 when no tmpfs could be
# mounted, 2 when a DIR could not be shown (said).
private_tmp() {
  local d rel
  kept=()
  exec 9</tmp # the /tmp that was, reachable through it once the tmpfs hides it
  if ! mount -t tmpfs -o mode=1777 vram-tests /tmp; then
    exec 9<&-
    return 1
  fi
  for d in "$@"; do
    case $d in /tmp/?*) ;; *) continue ;; esac
    rel=${d#/tmp/}
    # --no-canonicalize: mount would otherwise resolve the path to its text
    # (/tmp/...), which names the new, empty /tmp.
    if ! mkdir -p "/tmp/$rel" || ! mount --no-canonicalize --bind "/proc/self/fd/9/$rel" "/tmp/$rel"; then
      echo "cannot show $d inside the private /tmp"
      exec 9<&-
      return 2
    fi
    kept+=("${rel%%/*}")
  done
  exec 9<&-
}

# `stop_left FIND WHO`: runs FIND (a function that sets `running` to the
# pids of what is left) until it finds nothing or 5 s have passed (a
# process killed at a test's end takes a moment to go); what is still
# there is listed as left by WHO, and killed. Returns 1 if anything was.
stop_left() {
  local p
  for _ in $(seq 50); do
    "$1"
    [ ${#running[@]} = 0 ] && return 0
    sleep 0.1
  done
  echo "FAIL: $2 left these processes running (a test stops what it starts):"
  for p in "${running[@]}"; do
    echo "  pid $p: $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")"
  done
  kill -9 "${running[@]}" 2>/dev/null
  return 1
}

# `remove_dead_test_users`: tests/lib.sh's users and groups are named
# vtPIDx, PID the test's (its shell's, or in a PID namespace of its own
# unshare's outside it), with the id 2,000,000 + 8 x PID + n (n < 8): a
# name and an id no account of the machine's own has both of. A test
# killed at its timeout never runs its end, and its users stay on the
# machine; those whose PID no longer runs are removed here, and said. One
# whose PID runs may be a test of a run beside this one, and is left alone.
remove_dead_test_users() {
  local name id pid db
  for db in passwd group; do
    while IFS=: read -r name _ id _; do
      [[ $name =~ ^vt([0-9]+)[a-z]$ ]] || continue
      pid=${BASH_REMATCH[1]}
      [[ $id =~ ^[0-9]+$ ]] && [ $((id - 2000000 - 8 * pid)) -ge 0 ] &&
        [ $((id - 2000000 - 8 * pid)) -lt 8 ] || continue
      [ -d "/proc/$pid" ] && continue
      if [ $db = passwd ]; then
        pkill -9 -u "$name" 2>/dev/null
        userdel "$name" 2>/dev/null || continue
      else
        getent group "$name" >/dev/null || continue # went with its user
        groupdel "$name" 2>/dev/null || continue
      fi
      echo "removed the test $([ $db = passwd ] && echo user || echo group) $name, left by a test killed before its end (pid $pid is gone)"
    done < <(getent $db)
  done
}
