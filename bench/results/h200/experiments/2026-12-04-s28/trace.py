#!/usr/bin/env python3
"""Reads a trace of the s28 trace patch (per-warp globaltimer marks of cuda.decode's gate_up and down kernels
and of the combine kernel's CTAs, the last layer of the graph's last replay) and prints where the time goes.
usage: trace.py FILE.bin H I KS_GU KS_DOWN MT"""
import struct, sys
import numpy as np

f, H, I, ksg, ksd, mt = sys.argv[1], *map(int, sys.argv[2:7])
a = np.fromfile(f, dtype=np.uint64).reshape(3, 32768, 8).astype(np.int64)
names = ["gate_up", "down", "combine"]
kst = {0: (H + 63) // 64 // ksg, 1: (I + 63) // 64 // ksd}
valid = [a[k][a[k][:, 1] != 0] for k in range(3)]
t0 = min(v[:, 1].min() for v in valid if len(v))
def pct(x):
    x = np.sort(x)
    if not len(x): return "-"
    return " ".join(f"{x[int(q * (len(x) - 1))] / 1e3:6.2f}" for q in (0, .1, .5, .9, 1))
print(f"{f}: times in us from the first gate_up warp's entry; columns min p10 p50 p90 max")
for k in range(3):
    v = valid[k]
    if not len(v): continue
    work = v[v[:, 6] != -1] if k < 2 else v
    idle = len(v) - len(work)
    print(f"-- {names[k]}: {len(v)} warps/CTAs recorded, {idle} without work, SMs {len(set(v[:, 0]))}")
    print(f"   entry        {pct(v[:, 1] - t0)}")
    print(f"   wait done    {pct(work[:, 2] - t0)}")
    if k < 2:
        w = work[work[:, 3] != 0]
        if (w[:, 7] > t0 - 10**9).all():  # slot 7: the group lookup's end from call 4's build on (blockIdx.x before)
            print(f"   group found  {pct(w[:, 7] - t0)}")
        print(f"   first data   {pct(w[:, 3] - t0)}")
        print(f"   first-wait   {pct(w[:, 3] - np.maximum(w[:, 1], 0))}  (first data minus entry)")
        print(f"   K loop       {pct(w[:, 4] - w[:, 3])}")
        print(f"   epilogue     {pct(w[:, 5] - w[:, 4])}")
        print(f"   exit         {pct(w[:, 5] - t0)}")
        b = kst[k] * 576 * mt
        span = (w[:, 5].max() - w[:, 3].min()) / 1e3
        print(f"   bytes {len(w) * b / 1e6:.1f} MB; first data -> last exit {span:.2f} us = {len(w) * b / span / 1e6:.2f} TB/s")
        # timeline: warps in their K loop per 1 us bin, and bytes delivered (uniform within each warp's loop)
        lo, hi = w[:, 3].min(), w[:, 5].max()
        bins = np.arange(lo, hi + 1000, 1000)
        inloop = [int(((w[:, 3] <= t) & (w[:, 4] > t)).sum()) for t in bins[:-1] + 500]
        rate = np.zeros(len(bins) - 1)
        for s, e in zip(w[:, 3], w[:, 4]):
            d = max(e - s, 1)
            for i in range(len(bins) - 1):
                ov = min(e, bins[i + 1]) - max(s, bins[i])
                if ov > 0: rate[i] += b * ov / d
        print("   per us from first data: warps in K loop / TB/s")
        print("   " + " ".join(f"{n}" for n in inloop))
        print("   " + " ".join(f"{r / 1e6:.1f}" for r in rate))
    else:
        print(f"   exit         {pct(v[:, 5] - t0)}")
