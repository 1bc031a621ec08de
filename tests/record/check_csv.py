"""Reads an RMM allocation log (Thread,Time,Action,Pointer,Size,Stream) as
RMM's replay reads it, checks that every line is well formed and that it
describes a consistent history (no pointer allocated twice while live, no
free of what is not allocated, a free's size is its allocation's), and
prints its figures as JSON: lines, allocations, frees, failures, peak (the
highest sum of live sizes)."""
import csv
import json
import re
import sys

TIME = re.compile(r"^\d\d:\d\d:\d\d\.\d{6}$")


def main(path):
    live, peak, now = {}, 0, 0
    counts = {"allocate": 0, "free": 0, "allocate failure": 0}
    with open(path, newline="") as f:
        rows = csv.reader(f)
        header = next(rows)
        if header != ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]:
            sys.exit(f"{path}: header {header}")
        for n, row in enumerate(rows, start=2):
            if len(row) != 6:
                sys.exit(f"{path}:{n}: {len(row)} fields")
            thread, time, action, pointer, size, stream = row
            int(thread)
            if not TIME.match(time):
                sys.exit(f"{path}:{n}: time {time!r}")
            ptr, size, _ = int(pointer, 16), int(size), int(stream, 16)
            if ptr >= 1 << 63:
                sys.exit(f"{path}:{n}: pointer {pointer} does not fit RMM's signed parse")
            if action not in counts:
                sys.exit(f"{path}:{n}: action {action!r}")
            counts[action] += 1
            if action == "allocate":
                if ptr in live or ptr == 0:
                    sys.exit(f"{path}:{n}: {pointer} allocated while live")
                live[ptr] = size
                now += size
                peak = max(peak, now)
            elif action == "free":
                if live.get(ptr) != size:
                    sys.exit(f"{path}:{n}: free of {pointer} ({size}): live as {live.get(ptr)}")
                now -= live.pop(ptr)
    print(json.dumps({"lines": sum(counts.values()), "allocations": counts["allocate"],
                      "frees": counts["free"], "failures": counts["allocate failure"],
                      "peak": peak, "live_at_end": now}))


main(sys.argv[1])
