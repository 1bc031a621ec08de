"""PyCUDA (Debian's python3-pycuda) on the simulated GPU: the device it sees,
every byte of it that it can allocate, and contexts made and detached
twenty times, after which the device has as much free as before.
    pycuda_client.py TOTAL FREE   (what the device's total and its free
                                   beside one context must be)"""
import sys

import pycuda.driver as cuda

total_want, free_want = int(sys.argv[1]), int(sys.argv[2])
failures = 0


def check(what, ok):
    global failures
    print(("ok: " if ok else "FAIL: ") + what)
    failures += not ok


cuda.init()
dev = cuda.Device(0)
print("device", dev.name(), dev.total_memory())
ctx = dev.make_context()
free, total = cuda.mem_get_info()
print("mem_get_info", free, total)
check(f"the device's total is {total_want}", total == total_want and dev.total_memory() == total_want)
check(f"beside its context {free_want} are free", free == free_want)

# Fill: the largest blocks first, halving down to 1 MiB (the 518 MiB context
# leaves an odd number of MiB free; small allocations share pages).
held, filled, block = [], 0, 1 << 30
while block >= 1 << 20:
    try:
        held.append(cuda.mem_alloc(block))
        filled += block
    except cuda.MemoryError:
        block //= 2
print("filled", filled)
print("free after filling", cuda.mem_get_info()[0])
check("every free byte could be allocated, and not one more", filled == free and cuda.mem_get_info()[0] == 0)
for a in held:
    a.free()
check("all of it free again", cuda.mem_get_info()[0] == free)
ctx.pop()
ctx.detach()

# Twenty contexts made and detached: none of them stays.
for i in range(20):
    try:
        c = dev.make_context()
    except cuda.Error as e:
        check(f"context {i + 1} of 20 made", False)
        print("  ", e)
        break
    c.pop()
    c.detach()
try:
    ctx = dev.make_context()
except cuda.Error as e:
    check("a context made after them", False)
    print("  ", e)
    sys.exit(1)
after = cuda.mem_get_info()[0]
print("free after 20 make_context/detach", after)
check("20 x make_context/detach leave the device's free where it was", after == free)
ctx.pop()
ctx.detach()
sys.exit(1 if failures else 0)
