#!/usr/bin/env bash
# vram devices' total, used and free add up on the measured H100. Inside
# `vram run --limit`, NVML answers with the command's own view, as
# cuMemGetInfo does: the device's total is the budget, free is what the
# command can still have, used the rest, and the compute process list adds
# up to used: the command's processes at their size, other processes only
# as far as they take from what the budget would leave (a monitor under
# vram run never shows someone else's 3 GiB process on a 2 GiB device),
# and the per-process utilisation (the original call and the versioned
# one) and accounting (turned on: VRAM_SIM_ACCOUNTING) list the processes
# that list lists, no other (issue 28).
# Without a budget NVML's figures pass through.
set -u
build=$(cd "${1:?usage: test_nvml_view.sh BUILD_DIR HOLDER NVML_VIEW}" && pwd)
holder=${2:?usage: test_nvml_view.sh BUILD_DIR HOLDER NVML_VIEW}
view=${3:?usage: test_nvml_view.sh BUILD_DIR HOLDER NVML_VIEW}
tests=$(cd "$(dirname "$0")" && pwd)
. "$tests/clients/setup.sh"
MiB=$((1 << 20)) ctx=$((518 * MiB)) # a context on the profile (sim/config.h)
export VRAM_SIM_ACCOUNTING=1 # as root's nvidia-smi -am 1 sets it on a GPU

# vram devices on the profile's H100 (NVML's total with its 480 MiB reserve,
# CUDA's without): total, used and free add up, used being the processes'.
unset VRAM_SIM_DEVICES
check "another process holds 3 GiB" hold "$holder" 3GiB
"$build/vram" devices --json >"$tmp/devices" 2>&1
total=$((81079 * MiB)) used=$((3072 * MiB + ctx))
check "vram devices: total = CUDA's 81,079 MiB = used + free; used = the process's 3 GiB and its context" \
  contains "$tmp/devices" "\"total\":$total,\"used\":$used,\"free\":$((total - used)),"
stop_hold

# A device with room: the command sees its budget and its own process only.
unset VRAM_SIM_DEVICES # the profile's H100, whose NVML reserves 480 MiB
check "another process holds 3 GiB" hold "$holder" 3GiB
"$build/vram" run --limit 2GiB -- "$view" $((512 * MiB)) "$HOLD_PID" >"$tmp/roomy" 2>&1
check "nvml_view ran under vram run" test $? = 0
own=$((ctx + 512 * MiB))
check "v1: total = the budget, used = what the command holds" \
  contains "$tmp/roomy" "^mem $((2048 * MiB)) $own $((2048 * MiB - own))$"
check "v2: no reserve inside the budget; the same used and free" \
  contains "$tmp/roomy" "^mem2 $((2048 * MiB)) 0 $own $((2048 * MiB - own))$"
check "NVML's free is cuMemGetInfo's" contains "$tmp/roomy" "^cuda $((2048 * MiB)) $((2048 * MiB - own))$"
check "the process list (v1) is the command's process alone, at its size" contains "$tmp/roomy" "^proc self:$own$"
check "the process list (v3) too" contains "$tmp/roomy" "^proc3 self:$own$"
check "per-process utilisation: the command's process, not the other" contains "$tmp/roomy" "^util self$"
check "the versioned query too" contains "$tmp/roomy" "^utilv self$"
check "accounting: the command's process alone" contains "$tmp/roomy" "^acct self$"
check "and no stats for the other (NVML_ERROR_NOT_FOUND)" contains "$tmp/roomy" "^acctstats $HOLD_PID 6$"
stop_hold

# A device the other process nearly fills: what it takes from the budget
# is in used, and it is listed at that much, no more.
# (2.5 GiB and its context, so that the command's context still fits.)
export VRAM_SIM_DEVICES=4GiB
check "another process holds 2.5 GiB of 4" hold "$holder" 2560MiB
"$build/vram" run --limit 2GiB -- "$view" 0 >"$tmp/full" 2>&1
check "nvml_view ran under vram run" test $? = 0
phys_free=$((4096 * MiB - (2560 * MiB + ctx) - ctx))
used=$((2048 * MiB - phys_free))
check "v1: used is the budget less what the device still has" \
  contains "$tmp/full" "^mem $((2048 * MiB)) $used $phys_free$"
check "the list: the command's process, then the other one as far as it fits" \
  contains "$tmp/full" "^proc3 self:$ctx other:$((used - ctx))$"
check "utilisation lists the same two" contains "$tmp/full" "^util \(self other\|other self\)$"
check "the versioned query too" contains "$tmp/full" "^utilv \(self other\|other self\)$"
check "accounting lists the same two" contains "$tmp/full" "^acct \(self other\|other self\)$"
stop_hold

# No budget: NVML's own figures, the other process at its size.
check "another process holds 2.5 GiB" hold "$holder" 2560MiB
"$view" 0 "$HOLD_PID" >"$tmp/plain" 2>&1
check "without vram run: NVML's total and every process at its size" \
  contains "$tmp/plain" "^proc3 \(self:$ctx other:$((2560 * MiB + ctx))\|other:$((2560 * MiB + ctx)) self:$ctx\)$"
check "and utilisation lists both" contains "$tmp/plain" "^util \(self other\|other self\)$"
check "the versioned query too" contains "$tmp/plain" "^utilv \(self other\|other self\)$"
check "accounting lists both" contains "$tmp/plain" "^acct \(self other\|other self\)$"
check "with the other's stats" contains "$tmp/plain" "^acctstats $HOLD_PID 0$"
stop_hold
# A bad VRAM_SIM_ACCOUNTING is named, with what is accepted; NVML does not start.
VRAM_SIM_ACCOUNTING=maybe "$view" 0 >"$tmp/bad" 2>&1
check "VRAM_SIM_ACCOUNTING=maybe: refused" test $? != 0
check "and named, with what is accepted" contains "$tmp/bad" 'VRAM_SIM_ACCOUNTING="maybe": .*expected true or false'
for f in devices roomy full plain bad; do echo "--- $f"; cat "$tmp/$f"; done
echo "$passed passed, $failures failed"
[ $failures = 0 ]
