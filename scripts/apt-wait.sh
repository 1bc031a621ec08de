#!/usr/bin/env bash
# apt-wait.sh ARGS...: apt-get ARGS..., waiting for another apt-get or dpkg
# (another person's installation, unattended upgrades) to finish rather
# than failing at once with "Could not get lock": up to APT_LOCK_WAIT
# seconds (600 unless set). dpkg's lock is waited for by apt's own option
# (DPkg::Lock::Timeout); the package lists' (apt-get update), which that
# option does not cover (apt 2.6), by trying again every 2 s. Says once, on
# stderr, what it waits for.
set -u
wait=${APT_LOCK_WAIT:-600}
case $wait in
  '' | *[!0-9]* | 0*[0-9]*)
    echo "apt-wait.sh: APT_LOCK_WAIT=$wait: expected a whole number of seconds (0 or more, no leading zero)" >&2
    exit 2 ;;
esac
deadline=$((SECONDS + wait))
said=
while :; do
  out=$(apt-get -o DPkg::Lock::Timeout="$wait" "$@" 2>&1)
  rc=$?
  if [ $rc != 0 ] && grep -q "Could not get lock" <<<"$out" && [ $SECONDS -lt $deadline ]; then
    if [ -z "$said" ]; then
      echo "apt-wait.sh: $(grep -m1 "Could not get lock" <<<"$out" | sed 's/^E: //'); waiting up to $wait s" >&2
      said=1
    fi
    sleep 2
    continue
  fi
  printf '%s\n' "$out"
  exit $rc
done
