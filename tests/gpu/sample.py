"""NVML's figure for every process, sampled every 100 ms until SIGTERM:
then one line per pid, `pid=N max=BYTES samples=K`, the largest figure NVML
gave for it. Run by tests/gpu/run.sh beside a training command, outside
vram (it must see what the driver says, not a budget's view).

    python sample.py [INTERVAL_MS]
"""
import signal
import sys
import time

import pynvml  # nvidia-ml-py

interval = (int(sys.argv[1]) if len(sys.argv) > 1 else 100) / 1000
peak, count = {}, {}
stop = False


def end(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, end)
pynvml.nvmlInit()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
print("ready", flush=True)
while not stop:
    for h in handles:
        try:
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
        except pynvml.NVMLError:
            continue
        for p in procs:
            used = p.usedGpuMemory or 0
            peak[p.pid] = max(peak.get(p.pid, 0), used)
            count[p.pid] = count.get(p.pid, 0) + 1
    time.sleep(interval)
for pid, m in sorted(peak.items()):
    print(f"pid={pid} max={m} samples={count[pid]}", flush=True)
