"""Reads a .vrec recording as src/record/recording.h describes it (its own
reading, not vram's reader: every block whole and its checksum right, each
process's events in time order) and checks it against the logs that
tests/record/recorded.c wrote of what it did.

  check_recording.py REC LOG...     each LOG's process is one process image
      of REC whose events are exactly those its LOG expects, thread by
      thread in order (its contexts and modules, charged to the budget,
      among them); after each of its steps, what its events hold in use is
      what the budget counted and what the simulated GPU said it held; it
      wrote its exit record; and no other process recorded anything.
  check_recording.py --killed REC LOG   the process of LOG (recorded churn)
      was killed: every pair it logged up to a second before its last is
      in REC, in order, and REC holds nothing it did not do.
  check_recording.py --lazy REC LOG MODULES   the process of LOG (recorded
      lazy) held MODULES modules whose code the driver took at their first
      launch: REC holds NVML's readings of it, and the last before its step
      "held" is what NVML said then (the log's), what the budget counted,
      and exceeds what vram charged the calls by the driver's part (the
      family "driver"): the code, 2 MiB a module.

NVML's readings (the interposer's, at times the program does not choose)
are no EXPECT line of a log; in every form they must be well formed.

Prints what it read as JSON: processes, events, refusals, and the peak (the
most in use on device 0 at once, all processes together)."""
import json
import struct
import sys

ALLOC, FREE, RESIZE, MAP, UNMAP, RELEASE, REFUSE, BUDGET, CONTEXT, EXIT, NVML = range(1, 12)
PLAIN, DRIVER = 1, 10
MiB = 1 << 20
MASK = (1 << 64) - 1
REC = ""


def fail(why):
    sys.exit(f"{REC}: {why}")


def checksum(data):
    h = 0x9E3779B97F4A7C15 ^ len(data)
    whole = len(data) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", data[:whole]):
        h = ((h ^ w) * 0xFF51AFD7ED558CCD) & MASK
        h ^= h >> 29
    tail = int.from_bytes(data[whole:], "little")
    h = ((h ^ tail) * 0xC4CEB9FE1A85EC53) & MASK
    return h ^ (h >> 32)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"VRAMREC\n":
        fail("not a vram recording")
    version, event_size, order = struct.unpack_from("<III", data, 8)
    if version not in (1, 2) or (event_size, order) != (48, 0x01020304):
        fail(f"header: version {version}, event size {event_size}, order {order:#x}")
    images, pos = {}, 32
    while pos < len(data):
        if len(data) - pos < 32:
            fail(f"a block header cut short at {pos}")
        magic, kind, _, pid, length, image, check = struct.unpack_from("<IHHIIQQ", data, pos)
        payload = data[pos + 32:pos + 32 + length]
        if magic != 0x4B4C4256 or len(payload) != length or checksum(payload) != check:
            fail(f"block at {pos}: magic {magic:#x}, {len(payload)} of {length} bytes, "
                 f"checksum {'right' if checksum(payload) == check else 'wrong'}")
        im = images.setdefault(image, {"pid": pid, "command": None, "events": []})
        if kind == 1:
            ppid, = struct.unpack_from("<I", payload, 4)
            im["command"] = payload[32:].split(b"\0")[0].decode(errors="replace")
            if struct.unpack_from("<I", payload)[0] != pid:
                fail(f"process block of {pid} names another pid")
        elif kind == 2:
            if length % 48:
                fail(f"events block at {pos}: {length} bytes")
            for e in struct.iter_unpack("<QQQQQIBBBB", payload):
                time, address, size, aux, stream, thread, dev, family, action, reason = e
                im["events"].append({"time": time, "thread": thread, "event": (
                    action, family, dev, address, size, aux, stream, reason)})
        else:
            fail(f"block at {pos}: kind {kind}")
        pos += 32 + length
    for im in images.values():
        times = [e["time"] for e in im["events"]]
        if times != sorted(times):
            fail(f"process {im['pid']}: events out of time order")
        for e in im["events"]:
            action, family, dev, address, size, aux, stream, reason = e["event"]
            if action == NVML and (version < 2 or family or dev != 0 or address or stream
                                   or reason or not size or aux < size):
                fail(f"process {im['pid']}: a malformed NVML reading {e}")
    return images


def read_log(path):
    log = {"pid": None, "expect": {}, "steps": [], "done": []}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "PID":
                log["pid"] = int(w[1])
            elif w[0] == "EXPECT":
                log["expect"].setdefault(int(w[1]), []).append(tuple(int(x) for x in w[2:]))
            elif w[0] == "STEP":
                used = None if w[3] == "-" else int(w[3])
                log["steps"].append((w[1], int(w[2]), used, int(w[4])))
            elif w[0] == "DONE":
                log["done"].append((int(w[1]), int(w[2])))
    return log


def holding(events, until=None):
    """What the events hold in use (device 0), up to `until`."""
    live = {}
    for e in events:
        if until is not None and e["time"] > until:
            break
        action, family, _, address, size = e["event"][:5]
        if action in (ALLOC, RESIZE):
            live[(family, address)] = size
        elif action == FREE:
            live.pop((family, address), None)
        elif action == EXIT:
            live.clear()
    return sum(live.values())


def peak(images):
    merged = sorted(((e["time"], n, e) for n, im in enumerate(images.values())
                     for e in im["events"]), key=lambda x: x[0])
    live, now, top = {}, 0, 0
    for _, n, e in merged:
        action, family, _, address, size = e["event"][:5]
        key = (n, family, address)
        if action in (ALLOC, RESIZE, FREE):
            now -= live.pop(key, 0)
            if action != FREE:
                live[key] = size
                now += size
        elif action == EXIT:
            for k in [k for k in live if k[0] == n]:
                now -= live.pop(k)
        top = max(top, now)
    return top


def exact(images, logs):
    by_pid = {}
    for im in images.values():
        if im["events"]:
            by_pid.setdefault(im["pid"], []).append(im)
    pids = sorted(log["pid"] for log in logs)
    if sorted(by_pid) != pids:
        fail(f"processes with events: {sorted(by_pid)}; expected {pids}")
    for log in logs:
        pid = log["pid"]
        if len(by_pid[pid]) != 1:
            fail(f"process {pid}: {len(by_pid[pid])} images")
        im = by_pid[pid][0]
        if not im["command"] or "recorded" not in im["command"]:
            fail(f"process {pid}: command {im['command']!r}")
        events = im["events"]
        if not events or events[-1]["event"][0] != EXIT:
            fail(f"process {pid}: no exit record last")
        got = {}
        for e in events:
            # NVML's readings and what they make of the driver's own part
            # are the interposer's reader's, at times the program does not
            # choose: while its threads allocate, a reading may fall between
            # a call's charge and the driver's answer.
            if e["event"][0] not in (EXIT, NVML) and e["event"][1] != DRIVER:
                got.setdefault(e["thread"], []).append(e["event"])
        if sorted(got) != sorted(log["expect"]):
            fail(f"process {pid}: threads {sorted(got)}; expected {sorted(log['expect'])}")
        for tid, want in log["expect"].items():
            have = got[tid]
            for i in range(max(len(want), len(have))):
                w = want[i] if i < len(want) else None
                h = have[i] if i < len(have) else None
                if w != h:
                    fail(f"process {pid} thread {tid} event {i}: recorded {h}, expected {w}")
        for name, time, used, nvml in log["steps"]:
            held = holding(events, time)
            if held != nvml or used is not None and used != held:
                fail(f"process {pid} after {name}: the recording holds {held}, the budget "
                     f"counted {used}, the simulated GPU {nvml}")


def killed(images, log):
    ims = [im for im in images.values() if im["events"]]
    if len(ims) != 1:
        fail(f"{len(ims)} images of the killed process")
    events = ims[0]["events"]
    if events and events[-1]["event"][0] == EXIT:
        fail("a killed process wrote an exit record")
    # Its pairs: plain allocations (its context is one more charge).
    frees = [e for e in events if e["event"][:2] == (FREE, PLAIN)]
    done = log["done"]
    if not done:
        fail("the program logged nothing")
    last = done[-1][0]
    due = [d for d in done if d[0] <= last - 1_000_000_000]
    if len(due) < 100:
        fail(f"only {len(due)} pairs logged a second before the kill: too short a run to judge")
    if len(frees) < len(due):
        fail(f"{len(frees)} frees recorded; {len(due)} were logged a second before the kill")
    if len(frees) > len(done) + 1:
        fail(f"{len(frees)} frees recorded, more than the {len(done)} done")
    for i, (d, e) in enumerate(zip(done, frees)):
        if e["event"][3] != d[1]:
            fail(f"pair {i}: recorded free of {e['event'][3]:#x}, logged {d[1]:#x}")
    allocs = [e for e in events if e["event"][:2] == (ALLOC, PLAIN)]
    if not len(frees) <= len(allocs) <= len(frees) + 1:
        fail(f"{len(allocs)} allocations recorded for {len(frees)} frees")
    return {"logged": len(done), "due": len(due), "recorded_pairs": len(frees)}


def lazy(images, log, modules):
    ims = [im for im in images.values() if im["events"]]
    if len(ims) != 1 or ims[0]["pid"] != log["pid"]:
        fail(f"processes with events: {[im['pid'] for im in ims]}; expected {log['pid']}")
    events = ims[0]["events"]
    held = [s for s in log["steps"] if s[0] == "held"]
    if not held:
        fail("the program logged no step \"held\"")
    _, when, used, nvml_said = held[0]
    readings = [e for e in events if e["event"][0] == NVML and e["time"] <= when]
    if not readings:
        fail("no NVML reading recorded before the step \"held\"")
    last = readings[-1]
    figure = last["event"][4]
    upto = [e for e in events if e["time"] <= last["time"]]
    driver = holding([e for e in upto if e["event"][1] == DRIVER])
    charged = holding([e for e in upto if e["event"][1] != DRIVER])
    if figure != nvml_said:
        fail(f"NVML's last recorded figure {figure}; NVML said {nvml_said} then")
    if figure != used:
        fail(f"NVML's last recorded figure {figure}; the budget counted {used}")
    if figure - charged != driver:
        fail(f"NVML's figure {figure} exceeds what vram charged the calls ({charged}) by "
             f"{figure - charged}; the driver's part recorded is {driver}")
    if driver != modules * 2 * MiB:
        fail(f"the driver's part is {driver}; its code for {modules} modules is "
             f"{modules * 2 * MiB}")
    return {"nvml_readings": sum(1 for e in events if e["event"][0] == NVML),
            "nvml": figure, "charged": charged, "driver": driver}


def main(argv):
    kill = argv[0] == "--killed"
    modules = None
    if kill:
        argv = argv[1:]
    elif argv[0] == "--lazy":
        modules, argv = int(argv[3]), argv[1:3]
    global REC
    REC = argv[0]
    images = load(REC)
    logs = [read_log(p) for p in argv[1:]]
    out = {"processes": sum(1 for im in images.values() if im["events"]),
           "events": sum(len(im["events"]) for im in images.values()),
           "refusals": sum(1 for im in images.values() for e in im["events"]
                           if e["event"][0] == REFUSE),
           "peak": peak(images)}
    if kill:
        out.update(killed(images, logs[0]))
    elif modules is not None:
        out.update(lazy(images, logs[0], modules))
    else:
        exact(images, logs)
        out["expected_refusals"] = sum(1 for log in logs for evs in log["expect"].values()
                                       for e in evs if e[0] == REFUSE)
    print(json.dumps(out))


main(sys.argv[1:])
