"""Checks a file against the trace-event format (the JSON object form:
{"traceEvents": [...]}, as Chrome's "Trace Event Format" document describes
it and ui.perfetto.dev and chrome://tracing read it) and prints what it
shows as JSON: per GPU the highest sum of its "in use" counter's arguments,
its refusal marks and its last budget, and the processes named."""
import json
import sys

PHASES = {"C", "i", "I", "M"}


def fail(why):
    sys.exit(f"{sys.argv[1]}: {why}")


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main(path):
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("not an object with a traceEvents array")
    if doc.get("displayTimeUnit") not in (None, "ms", "ns"):
        fail("displayTimeUnit must be ms or ns")
    names, last_ts, gpus = {}, {}, {}
    for n, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ph") not in PHASES:
            fail(f"event {n}: phase {e.get('ph') if isinstance(e, dict) else e!r}")
        if not isinstance(e.get("name"), str) or not isinstance(e.get("pid"), int):
            fail(f"event {n}: name and integer pid required")
        ph = e["ph"]
        if ph == "M":
            if e["name"] not in ("process_name", "process_sort_index", "thread_name"):
                fail(f"event {n}: metadata {e['name']}")
            if e["name"] == "process_name":
                if not isinstance(e.get("args", {}).get("name"), str):
                    fail(f"event {n}: process_name without args.name")
                names[e["pid"]] = e["args"]["name"]
            continue
        if not number(e.get("ts")) or e["ts"] < 0:
            fail(f"event {n}: ts must be a non-negative number of microseconds")
        if not isinstance(e.get("tid"), int):
            fail(f"event {n}: integer tid required")
        track = (e["pid"], e["name"])
        if e["ts"] < last_ts.get(track, 0):
            fail(f"event {n}: {track} goes back in time")
        last_ts[track] = e["ts"]
        if ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(number(v) for v in args.values()):
                fail(f"event {n}: a counter needs numeric args")
            if e["name"].endswith(" in use") and e["name"].startswith("GPU "):
                g = gpus.setdefault(e["name"][4:-7], {"peak": 0, "refusals": 0, "budget": 0})
                g["peak"] = max(g["peak"], sum(args.values()))
            elif e["name"].endswith(" budget"):
                g = gpus.setdefault(e["name"][4:-7], {"peak": 0, "refusals": 0, "budget": 0})
                g["budget"] = max(g["budget"], *args.values())
        else:
            if e.get("s", "t") not in ("g", "p", "t"):
                fail(f"event {n}: instant scope {e.get('s')!r}")
            if e["name"].startswith("refused"):
                gpu = names.get(e["pid"], "")
                if not gpu.startswith("GPU "):
                    fail(f"event {n}: a refusal not on a GPU's track")
                g = gpus.setdefault(gpu[4:], {"peak": 0, "refusals": 0, "budget": 0})
                g["refusals"] += 1
    for pid, _ in last_ts:
        if pid not in names:
            fail(f"pid {pid} has events but no process_name")
    print(json.dumps({"gpus": gpus, "processes": sorted(v for v in names.values()
                                                       if not v.startswith("GPU "))}))


main(sys.argv[1])
