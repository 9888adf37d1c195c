#!/usr/bin/env python3
"""The PyTorch peer of `fp4moe bench moe`: one MoE block with bf16 experts through torch._grouped_mm.

What it measures
    The same block `fp4moe bench moe` times (src/moe/bench_report.h), written the way a PyTorch engine
    without custom kernels would write it, with bf16 expert weights:
      logits = x.float() @ W_router.T                                   [T, E] fp32
      (ids, w) = the family's routing (src/moe/routing.cpp):
          qwen3:         softmax, top-k, renormalize
          GLM/DeepSeek:  sigmoid, + e_score_correction_bias for selection, optional expert groups
                         (group score = sum of its top-2, keep topk_group groups), renormalize (+1e-20),
                         x routed_scaling_factor
      shared expert(s) appended as extra slots E..E+S-1 with weight 1 (as our runners plan them)
      order = argsort(ids, stable)   counts = scatter_add   offs = cumsum(counts) (int32, on the device)
      h = torch._grouped_mm(x[order // slots], W_gate_up.transpose(1, 2), offs=offs)      [T*slots, 2I]
      a = silu(h[:, :I]) * h[:, I:]
      y = torch._grouped_mm(a, W_down.transpose(1, 2), offs=offs)                         [T*slots, H]
      out = sum over slots of w * y (rows scattered back to (token, slot) order)          [T, H] bf16
    Nothing in the block reads a value back to the host, so the whole block (router to combine) is
    captured in one torch.cuda.CUDAGraph per layer copy. If capture fails (an op that syncs or is not
    capturable in this torch build), the row is timed eagerly and says why (`tactic` "eager", `fallback`).

The torch._grouped_mm layout used (checked against PyTorch's source, aten/src/ATen/native/GroupedMMUtils.h,
cuda/GroupedBlas.cpp, cuda/GroupMM.cu, and its docs for torch.nn.functional.grouped_mm):
    _grouped_mm(Tensor self, Tensor mat2, Tensor? offs=None, Tensor? bias=None, ScalarType? out_dtype=None)
    2d x 3d: self [M_total, K] row-major, mat2 [G, K, N], offs int32 [G] = cumulative END row of each group
    (no leading 0; offs[-1] = M_total here), out [M_total, N]. mat2 may be row- or column-major in its last
    two dims; we store weights as the checkpoints do, [G, N, K] contiguous, and pass the transposed view
    (column-major, "TN" GEMM; PyTorch's own tests do the same). Data pointers 16-byte aligned, strides
    multiples of 16 bytes, G < 1024. On sm90/sm100 with bf16 in and out it runs a CUTLASS (or, in builds
    with CUDA >= 13.2, cuBLAS) grouped GEMM whose per-group sizes are read from offs on the device; the
    other path (_grouped_mm_fallback) copies offs to the host and would break capture. The schema torch
    reports at run time is written to meta.grouped_mm.

How it times
    Weights: a pool of expert slots (bf16 gate_up [2I, H] and down [H, I] per slot) of at least 2 layers
    and 8 x L2, capped by --pool-gib; each of --copies layer copies is a contiguous window of E+S slots at a
    random offset with its own router and bias, and has its own captured graph. Replays go round-robin
    over the copies, each with a fresh random input written just before it (untimed), so the experts
    touched differ from replay to replay. Each replay is timed alone with CUDA events; the row's `us` is
    the median of --iters replays after warm-up. A GPU sleep kernel is queued before each chunk of
    replays so the CPU runs ahead and the events measure GPU time, not Python's launch cost (the peer's
    best case; eager rows are timed without it, launch cost included, which is what eager costs).
    Bytes and flops use moe_block_cost's formulas with bf16 weights (6*H*I bytes per expert), the touched
    experts counted on the device from each timed replay's routing and averaged. Ceilings measured in the
    same run: HBM bandwidth = a 2 GiB device-to-device copy (bytes read + written / median time) and the
    bf16 peak = an 8192^3 torch.mm on random data, timed under load as the rows are (median of 20 rounds of 8
    after 500 ms; the from-idle figure goes into peak_kind). pct_floor = 100 * max(bytes/bandwidth,
    flops/peak) / us, against the peer's OWN (bf16) bytes; `nvfp4_floor_us` is the floor of the same block
    with NVFP4 weights (what our runner must reach) for the same touched experts, so bench/join.py can
    put both runners against one floor.

Correctness, before timing each T: one replay of the captured block against a per-expert loop in fp32
(normalized error ||out - ref|| / ||ref||, must be <= 1e-2: bf16 operands land near 3e-3), and the routing
of the first tokens against a plain-Python transcription of src/moe/routing.cpp. A failure marks the row
skipped, prints FAIL and makes the exit status 1 (the other rows are still written).

Why: issue #4 asks for a peer measured side by side with the CUDA MoE runner on the same GPU, shapes and
token counts; `python3 bench/join.py ours.json peer.json --md ... --plot ...` puts them in one table.

    python3 bench/peers/torch_grouped_mm.py --shape glm-4.5-air --tokens 1,4,16,64 \\
        --json bench/results/h200/torch-glm-4.5-air.json

Needs PyTorch with CUDA (--help works without it).
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time

torch = None  # imported in main(): --help and the cost formulas work without PyTorch
F = None

# The presets of src/moe/shapes.cpp (keep in step with it): hidden H, intermediate I, routed experts E,
# top_k, shared slots S, and the routing rule (moe_routing in include/fp4moe/moe.h).
PRESETS = {
    "qwen3-30b-a3b": dict(H=2048, I=768, E=128, k=8, S=0, scoring="softmax", bias=False, n_group=1, topk_group=1,
                          scale=1.0, renormalize=True),
    "glm-4.5-air": dict(H=4096, I=1408, E=128, k=8, S=1, scoring="sigmoid", bias=True, n_group=1, topk_group=1,
                        scale=1.0, renormalize=True),
    "glm-4.5": dict(H=5120, I=1536, E=160, k=8, S=1, scoring="sigmoid", bias=True, n_group=1, topk_group=1,
                    scale=2.5, renormalize=True),
    "deepseek-v3": dict(H=7168, I=2048, E=256, k=8, S=1, scoring="sigmoid", bias=True, n_group=8, topk_group=4,
                        scale=2.5, renormalize=True),
    "glm-5": dict(H=6144, I=2048, E=256, k=8, S=1, scoring="sigmoid", bias=True, n_group=1, topk_group=1, scale=2.5,
                  renormalize=True),
}

RUNNER = "torch.grouped_mm.bf16"
TACTICS = {"cuda-graph": 0, "eager": 1}
MAX_ERR = 1e-2


# ---- accounting: the formulas of src/moe/bench_report.cpp --------------------------------------------------


def desc_string(p, weights="bf16"):
    """moe_desc::to_string() of the preset, with the weight format of this runner."""
    return "H={} I={} E={} k={} S={} {} permuted {}{}/g{}/{}/x{:g}{}".format(
        p["H"], p["I"], p["E"], p["k"], p["S"], weights, p["scoring"], "+bias" if p["bias"] else "", p["n_group"],
        p["topk_group"], p["scale"], "" if p["renormalize"] else " norenorm")


def matrix_bytes(weights, n, k):
    """moe_matrix_bytes: nvfp4 n*k/2 + n*k/16 + 4; bf16 2*n*k."""
    return n * k // 2 + n * k // 16 + 4 if weights == "nvfp4" else 2 * n * k


def expert_bytes(p, weights):
    """moe_expert_bytes: gate [I, H], up [I, H], down [H, I]."""
    return 2 * matrix_bytes(weights, p["I"], p["H"]) + matrix_bytes(weights, p["H"], p["I"])


def block_cost(p, tokens, touched, weights):
    """moe_block_cost -> (bytes, flops): router E*H*4 + touched experts + activations 2*T*H*2; router
    2*T*H*E + experts 2*T*slots*3*H*I."""
    H, I, E = p["H"], p["I"], p["E"]
    nbytes = E * H * 4 + touched * expert_bytes(p, weights) + 2 * tokens * H * 2
    flops = 2 * tokens * H * E + 2 * tokens * (p["k"] + p["S"]) * 3 * H * I
    return float(nbytes), float(flops)


def floor_us(nbytes, flops, bandwidth_gbps, peak_tflops):
    """max(bytes / bandwidth, flops / peak) in microseconds (moe_bench_fill_rates)."""
    return max(nbytes / (bandwidth_gbps * 1e3) if bandwidth_gbps > 0 else 0.0,
               flops / (peak_tflops * 1e6) if peak_tflops > 0 else 0.0)


# ---- routing, as src/moe/routing.cpp writes it, in plain Python (the check) --------------------------------


def route_token_reference(p, logits, bias):
    """One token's (ids, weights) by routing.cpp's rule; ties to the lower index. Lists of floats in."""
    E = p["E"]

    def top(v, n):
        return sorted(range(len(v)), key=lambda i: (-v[i], i))[:n]

    if p["scoring"] == "softmax":
        mx = max(logits)
        ex = [math.exp(v - mx) for v in logits]
        s = sum(ex)
        score = [v / s for v in ex]
        select = list(score)
    else:
        score = [1.0 / (1.0 + math.exp(-v)) for v in logits]
        select = [score[e] + (bias[e] if p["bias"] else 0.0) for e in range(E)]
        if p["n_group"] > 1:
            per = E // p["n_group"]
            gs = []
            for g in range(p["n_group"]):
                grp = select[g * per:(g + 1) * per]
                i0, i1 = top(grp, 2)
                gs.append(grp[i0] + grp[i1])
            kept = set(top(gs, p["topk_group"]))
            select = [v if e // per in kept else -math.inf for e, v in enumerate(select)]
    ids = top(select, p["k"])
    w = [score[e] for e in ids]
    if p["renormalize"]:
        d = sum(w) + (1e-20 if p["scoring"] == "sigmoid" else 0.0)
        w = [v / d for v in w]
    w = [v * p["scale"] for v in w]
    return ids, w


# ---- the block in PyTorch ----------------------------------------------------------------------------------


def route(p, logits, bias):
    """(ids [T, k] int64, weights [T, k] fp32) on the device; no host synchronization."""
    T, E = logits.shape
    if p["scoring"] == "softmax":
        score = torch.softmax(logits, dim=-1)
        select = score
    else:
        score = torch.sigmoid(logits)
        select = score + bias if p["bias"] else score
        if p["n_group"] > 1:
            ng, per = p["n_group"], E // p["n_group"]
            grouped = select.view(T, ng, per)
            group_score = grouped.topk(2, dim=-1).values.sum(dim=-1)  # [T, ng]
            kept = group_score.topk(p["topk_group"], dim=-1).indices
            keep = torch.zeros(T, ng, dtype=torch.bool, device=logits.device).scatter_(1, kept, True)
            select = grouped.masked_fill(~keep.unsqueeze(-1), float("-inf")).view(T, E)
    ids = select.topk(p["k"], dim=-1).indices
    w = score.gather(1, ids)
    if p["renormalize"]:
        denom = w.sum(dim=-1, keepdim=True)
        w = w / (denom + 1e-20 if p["scoring"] == "sigmoid" else denom)
    if p["scale"] != 1.0:
        w = w * p["scale"]
    return ids, w


def with_shared(p, ids, w):
    """Appends the shared slots E..E+S-1 with weight 1."""
    if p["S"] == 0:
        return ids, w
    T = ids.shape[0]
    sid = torch.arange(p["E"], p["E"] + p["S"], device=ids.device, dtype=ids.dtype).expand(T, p["S"])
    return torch.cat([ids, sid], dim=1), torch.cat([w, torch.ones(T, p["S"], device=w.device, dtype=w.dtype)], 1)


def moe_block(p, grouped_mm, x, router, bias, w_gu_t, w_d_t):
    """The timed block. x [T, H] bf16; router [E, H] fp32; w_gu_t [G, H, 2I] and w_d_t [G, I, H] bf16
    (transposed views of [G, 2I, H] and [G, H, I]). Returns (out [T, H] bf16, touched experts, 0-d int64)."""
    T, H = x.shape
    I, slots, G = p["I"], p["k"] + p["S"], p["E"] + p["S"]
    logits = x.float() @ router.t()
    ids, w = with_shared(p, *route(p, logits, bias))
    flat = ids.reshape(-1)  # pair = token * slots + slot
    order = torch.argsort(flat, stable=True)  # permuted row r holds pair order[r]: expert-sorted, by token
    counts = torch.zeros(G, dtype=torch.int32, device=x.device).scatter_add_(
        0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)  # end row of each expert's group
    xs = x.index_select(0, order // slots)
    h = grouped_mm(xs, w_gu_t, offs=offs)  # [T*slots, 2I]
    a = F.silu(h[:, :I]) * h[:, I:]
    y = grouped_mm(a, w_d_t, offs=offs)  # [T*slots, H]
    y_pairs = torch.empty_like(y).index_copy_(0, order, y)  # back to (token, slot) order
    out = (y_pairs.view(T, slots, H).float() * w.unsqueeze(-1)).sum(dim=1).to(torch.bfloat16)
    return out, (counts > 0).sum()


def moe_block_reference(p, x, router, bias, w_gu, w_d):
    """Per-expert loop in fp32 (weights upcast), same routing. w_gu [G, 2I, H], w_d [G, H, I]."""
    I = p["I"]
    logits = x.float() @ router.t()
    ids, w = with_shared(p, *route(p, logits, bias))
    xf = x.float()
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in torch.unique(ids).tolist():
        tok, slot = (ids == e).nonzero(as_tuple=True)
        h = xf[tok] @ w_gu[e].float().t()
        a = F.silu(h[:, :I]) * h[:, I:]
        y = a @ w_d[e].float().t()
        out.index_add_(0, tok, y * w[tok, slot].unsqueeze(-1))
    return out, ids, w


# ---- measurement helpers -------------------------------------------------------------------------------------


def median_event_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        ts.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ts)


def measure_bandwidth_gbps(nbytes=2 << 30):
    """Device-to-device copy: (bytes read + bytes written) / median time, in 1e9 B/s."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms = median_event_ms(lambda: dst.copy_(src), iters=20, warmup=3)
    del src, dst
    return 2 * nbytes / (ms * 1e-3) / 1e9


def measure_bf16_peak_tflops(n=8192, hold_ms=500.0, rounds=20, per_round=8):
    """(under load, from idle) TFLOP/s of an 8192^3 torch.mm, as `fp4moe bench moe` measures its cuBLAS
    reference: the H200 holds its clock only for bursts under its power limit and every row is timed under
    load, so the rate is the median of `rounds` rounds of `per_round` GEMMs after `hold_ms` of untimed GEMMs;
    the burst figure (median of 20 after 3 from idle) is returned beside it."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    flop = 2 * n ** 3
    burst = flop / (median_event_ms(lambda: torch.mm(a, b), iters=20, warmup=3) * 1e-3) / 1e12

    def round_():
        for _ in range(per_round):
            torch.mm(a, b)

    held = 0.0
    while held < hold_ms:
        held += median_event_ms(round_, iters=1, warmup=0)
    ms = median_event_ms(round_, iters=rounds, warmup=0) / per_round
    del a, b
    return flop / (ms * 1e-3) / 1e12, burst


def sleep_cycles_per_ms():
    """GPU clock cycles of torch.cuda._sleep per millisecond (None when torch has no _sleep)."""
    if not hasattr(torch.cuda, "_sleep"):
        return None
    cycles = 20_000_000
    torch.cuda._sleep(cycles)  # warm
    ms = median_event_ms(lambda: torch.cuda._sleep(cycles), iters=3, warmup=0)
    return cycles / ms if ms > 0 else None


def l2_bytes():
    props = torch.cuda.get_device_properties(0)
    for name in ("L2_cache_size", "l2_cache_size"):
        v = getattr(props, name, None)
        if v:
            return int(v)
    return 60 << 20  # H200 (KINDS.md: 60 MB)


def git_commit():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - the commit is informational
        return ""


def script_sha256():
    """Of this file: identifies the script where the checkout's git metadata does not (a copied tree)."""
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def grouped_mm_schema():
    try:
        return str(torch.ops.aten._grouped_mm.default._schema)
    except Exception as e:  # noqa: BLE001
        return f"(schema not available: {e})"


def first_line(e):
    s = f"{type(e).__name__}: {e}".strip()
    return s.splitlines()[0][:300] if s else type(e).__name__


# ---- one shape -------------------------------------------------------------------------------------------------


class Layer:
    """The weight pool and the layer copies of one shape."""

    def __init__(self, p, args, l2, seed):
        H, I, E, S = p["H"], p["I"], p["E"], p["S"]
        self.G = G = E + S
        eb = expert_bytes(p, "bf16")
        cap = int(args.pool_gib * (1 << 30))
        want = max(2 * G * eb, 8 * l2)
        self.slots = max(G, min(want, cap) // eb)
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        # Random bf16 weights (|w| ~ 4e-3, like bench moe's bf16 pool): never zeros.
        self.pool_gu = torch.empty(self.slots, 2 * I, H, dtype=torch.bfloat16, device="cuda")
        self.pool_d = torch.empty(self.slots, H, I, dtype=torch.bfloat16, device="cuda")
        for t in (self.pool_gu, self.pool_d):
            t.normal_(0.0, 4e-3, generator=gen)
        router_bytes = E * H * 4
        n = args.copies or min(32, max(8, -(-4 * l2 // router_bytes)))
        ra = math.sqrt(3.0 / H)  # logits ~ unit variance, as bench moe
        cpu_gen = torch.Generator()
        cpu_gen.manual_seed(seed ^ 0xC0FFEE)
        self.copies = []
        for _ in range(n):
            off = int(torch.randint(0, self.slots - G + 1, (1,), generator=cpu_gen))
            router = torch.empty(E, H, dtype=torch.float32, device="cuda").uniform_(-ra, ra, generator=gen)
            bias = torch.empty(E, dtype=torch.float32, device="cuda").uniform_(-0.01, 0.01, generator=gen)
            if args.skew > 0:
                # Zipf as bench moe: x[:, 0] = 1 and router column 0 = -s*ln(rank) (random ranks per copy).
                rank = torch.randperm(E, generator=cpu_gen).to(torch.float64) + 1
                router[:, 0] = (-args.skew * torch.log(rank)).to(torch.float32).cuda()
            w_gu, w_d = self.pool_gu[off:off + G], self.pool_d[off:off + G]
            self.copies.append(dict(off=off, router=router, bias=bias, w_gu=w_gu, w_d=w_d,
                                    w_gu_t=w_gu.transpose(1, 2), w_d_t=w_d.transpose(1, 2)))
        pool = self.slots * eb
        self.text = (f"{self.slots} expert slots x {eb / 1e6:.1f} MB = {pool / 1e9:.2f} GB ({pool / l2:.0f} x L2 of "
                     f"{l2 >> 20} MiB); {n} layer copies = windows of {G} contiguous slots at random offsets, each "
                     f"with its own router and captured graph")
        if G * eb > cap:
            self.text += f" (one layer is over --pool-gib {args.pool_gib:g})"

    def fill_input(self, x, skew):
        x.uniform_(-1.7320508, 1.7320508)  # unit variance, never zeros
        if skew > 0:
            x[:, 0] = 1.0


def check_correctness(p, grouped_mm, layer, T, run_block, args):
    """One run of the block (as timed) against the fp32 loop; returns (normalized error, message)."""
    c = layer.copies[0]
    x = torch.empty(T, p["H"], dtype=torch.bfloat16, device="cuda")
    layer.fill_input(x, args.skew)
    out = run_block(x)
    ref, ids, w = moe_block_reference(p, x, c["router"], c["bias"], c["w_gu"], c["w_d"])
    out = out.float()
    if not torch.isfinite(out).all():
        return math.inf, "non-finite output"
    err = float((out - ref).norm() / ref.norm().clamp_min(1e-30))
    # Routing of the first tokens against routing.cpp's rule in plain Python.
    n = min(T, 8)
    logits = (x[:n].float() @ c["router"].t()).double().cpu().tolist()
    bias = c["bias"].double().cpu().tolist()
    ids_l, w_l = ids[:n, :p["k"]].cpu().tolist(), w[:n, :p["k"]].double().cpu().tolist()
    for t in range(n):
        rid, rw = route_token_reference(p, logits[t], bias)
        got = dict(zip(ids_l[t], w_l[t]))
        if set(rid) != set(got):
            return err, f"routing of token {t}: torch {sorted(got)} vs routing.cpp rule {sorted(rid)}"
        if any(abs(got[e] - v) > 1e-5 * max(1.0, abs(v)) for e, v in zip(rid, rw)):
            return err, f"routing weights of token {t} differ: {w_l[t]} vs {rw}"
    return err, ""


def bench_shape(name, args, bw, peak, l2, sleep_per_ms, meta_common):
    p = PRESETS[name]
    grouped_mm = getattr(torch, "_grouped_mm", None) or torch.nn.functional.grouped_mm
    layer = Layer(p, args, l2, args.seed)
    torch.cuda.synchronize()
    print(f"[{name}] {layer.text}", flush=True)
    meta = dict(meta_common)
    meta.update(shape=name, desc=desc_string(p), pool=layer.text)
    meta["correctness"] = {}
    rows, failed = [], False
    H = p["H"]
    for T in sorted(set(args.tokens)):
        n_copies = len(layer.copies)
        xs = [torch.empty(T, H, dtype=torch.bfloat16, device="cuda") for _ in range(n_copies)]
        for x in xs:
            layer.fill_input(x, args.skew)

        def eager(j, x=None):
            c = layer.copies[j]
            return moe_block(p, grouped_mm, xs[j] if x is None else x, c["router"], c["bias"], c["w_gu_t"], c["w_d_t"])

        # Capture one graph per layer copy (one memory pool shared by them: replays are sequential).
        graphs, outs, reason = [], [], ""
        try:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    eager(0)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            pool = torch.cuda.graph_pool_handle()
            for j in range(n_copies):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    outs.append(eager(j))
                graphs.append(g)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - recorded in the row
            reason = "CUDA graph capture failed: " + first_line(e)
            graphs, outs = [], []
            try:
                torch.cuda.synchronize()
            except Exception:  # noqa: BLE001 - the eager timing below reports a broken context itself
                pass
            print(f"[{name}] T={T}: {reason}; timing eagerly", flush=True)

        tactics = ["cuda-graph"] if graphs else ["eager"]
        if args.also_eager and graphs:
            tactics.append("eager")
        for tactic in tactics:
            row = dict(runner=RUNNER, tactic=tactic, tactic_id=TACTICS[tactic], shape=name, tokens=T)
            if tactic == "eager" and reason:
                row["fallback"] = reason

            if tactic == "cuda-graph":
                def run_block(x, _g=graphs[0], _xs=xs[0], _out=outs[0]):
                    _xs.copy_(x)
                    _g.replay()
                    return _out[0].clone()
            else:
                def run_block(x):
                    return eager(0, x)[0]

            err, msg = check_correctness(p, grouped_mm, layer, T, run_block, args)
            meta["correctness"][f"T={T} {tactic}"] = err
            print(f"[{name}] T={T} {tactic}: normalized error vs fp32 per-expert loop {err:.3e}"
                  f"{' (' + msg + ')' if msg else ''}", flush=True)
            if not (err <= MAX_ERR) or msg:
                failed = True
                why = msg or f"normalized error {err:.3e} > {MAX_ERR:g}"
                print(f"FAIL [{name}] T={T} {tactic}: {why}", flush=True)
                row.update(us=None, samples=0, tflops=None, gbps=None, pct_floor=None, bytes=None, flops=None,
                           skipped="correctness check failed: " + why)
                rows.append(row)
                continue

            us, touched = time_block(args, tactic, graphs, outs, xs, layer, eager, sleep_per_ms)
            t_avg = statistics.fmean(touched)
            nbytes = statistics.fmean(block_cost(p, T, t, "bf16")[0] for t in touched)
            nv_bytes = statistics.fmean(block_cost(p, T, t, "nvfp4")[0] for t in touched)
            flops = block_cost(p, T, 0, "bf16")[1]
            med = statistics.median(us)
            qs = statistics.quantiles(us, n=10) if len(us) >= 2 else [med] * 9
            row.update(us=med, samples=len(us), tflops=flops / (med * 1e6), gbps=nbytes / (med * 1e3),
                       pct_floor=100.0 * floor_us(nbytes, flops, bw, peak) / med, bytes=nbytes, flops=flops,
                       nvfp4_floor_us=floor_us(nv_bytes, flops, bw, peak), nvfp4_bytes=nv_bytes,
                       floor_us=floor_us(nbytes, flops, bw, peak), touched_experts=t_avg, us_p10=qs[0],
                       us_p90=qs[-1], copies=n_copies, max_err=err)
            rows.append(row)
            print(f"[{name}] T={T:<5} {tactic:<10} {med:10.1f} us  {row['gbps']:8.1f} GB/s  "
                  f"{row['pct_floor']:5.1f}% of bf16 floor  (NVFP4 floor {row['nvfp4_floor_us']:.1f} us, "
                  f"{t_avg:.1f} experts touched)", flush=True)
        del graphs, outs, xs
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    del layer
    torch.cuda.empty_cache()
    return {"meta": meta, "rows": rows}, failed


def time_block(args, tactic, graphs, outs, xs, layer, eager, sleep_per_ms):
    """Per-replay times (us) and touched experts of --iters timed runs, round-robin over the layer copies."""
    n_copies, iters = len(xs), args.iters
    log = torch.zeros(iters, dtype=torch.int64, device="cuda")

    def one(i, timed):
        j = i % n_copies
        layer.fill_input(xs[j], args.skew)  # fresh input, before the start event: untimed
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if tactic == "eager":
            torch.cuda.synchronize()
        s.record()
        if tactic == "cuda-graph":
            graphs[j].replay()
            touched = outs[j][1]
        else:
            touched = eager(j)[1]
        e.record()
        if timed:
            log[i].copy_(touched)
        return s, e

    for i in range(args.warmup * n_copies):
        one(i, False)
    torch.cuda.synchronize()
    chunk, events = 32, []
    sleep_cycles = 0
    if tactic == "cuda-graph" and sleep_per_ms and not args.no_sleep:
        # How long the CPU takes to queue a chunk, so the sleep kernel in front of it outlasts that.
        t0 = time.perf_counter()
        for i in range(chunk):
            one(i, False)
        cpu_ms = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()
        sleep_cycles = int(min(2 * cpu_ms + 1.0, 200.0) * sleep_per_ms)
    for c0 in range(0, iters, chunk):
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
        for i in range(c0, min(iters, c0 + chunk)):
            events.append(one(i, True))
        torch.cuda.synchronize()
    us = [s.elapsed_time(e) * 1e3 for s, e in events]
    return us, log.cpu().tolist()


# ---- main ------------------------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True,
                    help=f"preset name(s), comma-separated, or 'all' ({', '.join(PRESETS)})")
    ap.add_argument("--tokens", default="1,4,16,64,256,1024", help="token counts T (default: %(default)s)")
    ap.add_argument("--json", required=True,
                    help="output JSON in bench moe's format; with several shapes it must contain {shape}")
    ap.add_argument("--iters", type=int, default=100, help="timed replays per row, >= 50 (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed rounds over the layer copies (default: %(default)s)")
    ap.add_argument("--copies", type=int, default=0,
                    help="layer copies (0: enough routers for 4 x L2, 8..32)")
    ap.add_argument("--pool-gib", type=float, default=36.0,
                    help="cap of the bf16 expert pool in GiB (default: %(default)s)")
    ap.add_argument("--skew", type=float, default=0.0, help="Zipf exponent of the routing, as bench moe --skew")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-sleep", action="store_true",
                    help="no GPU sleep before each chunk of graph replays (CPU launch cost may show in the times)")
    ap.add_argument("--also-eager", action="store_true", help="also time the block eagerly (rows with tactic eager)")
    args = ap.parse_args(argv)
    args.argv = list(argv)
    names = list(PRESETS) if args.shape == "all" else [s.strip() for s in args.shape.split(",") if s.strip()]
    for n in names:
        if n not in PRESETS:
            ap.error(f"unknown shape '{n}' (known: {', '.join(PRESETS)}, all)")
    args.shapes = names
    try:
        args.tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--tokens: expected comma-separated integers, got {args.tokens!r}")
    if not args.tokens or min(args.tokens) <= 0:
        ap.error("--tokens: token counts must be positive")
    if args.iters < 50:
        ap.error("--iters must be >= 50")
    if len(names) > 1 and "{shape}" not in args.json:
        ap.error("--json must contain {shape} when several shapes are given")
    return args


def main(argv=None):
    global torch, F
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch as _torch
        import torch.nn.functional as _F
    except ImportError as e:
        print(f"torch_grouped_mm.py: needs PyTorch with CUDA, which this python3 does not have ({e}). "
              f"Run it on the GPU machine.", file=sys.stderr)
        return 2
    torch, F = _torch, _F
    if not torch.cuda.is_available():
        print(f"torch_grouped_mm.py: torch {torch.__version__} sees no CUDA device.", file=sys.stderr)
        return 2
    if not hasattr(torch, "_grouped_mm") and not hasattr(torch.nn.functional, "grouped_mm"):
        print(f"torch_grouped_mm.py: torch {torch.__version__} has no torch._grouped_mm.", file=sys.stderr)
        return 2

    torch.manual_seed(args.seed)
    dev = torch.cuda.get_device_name(0)
    cap = torch.cuda.get_device_capability(0)
    print(f"{dev} (sm_{cap[0]}{cap[1]}), torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    print("measuring HBM bandwidth (2 GiB device copy) and bf16 peak (8192^3 torch.mm)...", flush=True)
    bw = measure_bandwidth_gbps()
    peak, peak_burst = measure_bf16_peak_tflops()
    sleep_per_ms = sleep_cycles_per_ms()
    l2 = l2_bytes()
    print(f"bandwidth {bw:.1f} GB/s (read + written), bf16 peak {peak:.1f} TFLOP/s under load ({peak_burst:.1f} from "
          f"idle), L2 {l2 >> 20} MiB", flush=True)

    meta_common = {
        "device": f"{dev} (sm_{cap[0]}{cap[1]})",
        "commit": git_commit(),
        "script_sha256": script_sha256(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0]] + list(args.argv)),
        "bandwidth_gbps": bw,
        "peak_tflops": peak,
        "peak_kind": f"bf16 torch.mm 8192^3 under load: median of 20 x 8 after 500 ms; from idle {peak_burst:.1f}",
        "shape": "",
        "desc": "",
        "threads": 0,
        "skew": args.skew,
        "pool": "",
        "seed": args.seed,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "bandwidth_kind": "device-to-device copy of 2 GiB, bytes read + written",
        "grouped_mm": f"{grouped_mm_schema()}; 2d x 3d: mat_a [T*slots, K] row-major, mat_b = W.transpose(1, 2) of "
                      f"W [E+S, N, K] contiguous (column-major), offs int32 [E+S] cumulative ends",
        "timing": ("median of per-replay CUDA-event times, round-robin over layer copies, fresh random input per "
                   "replay; " + ("a GPU sleep queued before each chunk of 32 graph replays so CPU launch cost "
                                 "is hidden" if sleep_per_ms and not args.no_sleep else
                                 "graph replays queued as the CPU issues them (no GPU sleep in front)")),
        "max_err_limit": MAX_ERR,
    }
    any_failed = False
    for name in args.shapes:
        report, failed = bench_shape(name, args, bw, peak, l2, sleep_per_ms, meta_common)
        any_failed |= failed
        path = args.json.replace("{shape}", name)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        print(f"[{name}] wrote {path}", flush=True)
    if any_failed:
        print("FAIL: at least one correctness check failed (rows marked skipped)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
