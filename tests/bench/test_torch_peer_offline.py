#!/usr/bin/env python3
"""bench/peers/torch_grouped_mm.py without a GPU: --help works without PyTorch, its presets and bytes/flops
formulas agree with `fp4moe bench moe` (a committed result's desc, bytes and flops; every preset against
`fp4moe bench moe --weights bf16` at T=1 when the CLI is built), its routing transcription follows routing.cpp on hand-made cases, and running it
without PyTorch fails with a clear message. Exit status: 0 pass, 1 fail.
"""
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--fp4moe", default="")
    args, _ = ap.parse_known_args()
    src = os.path.abspath(args.source_dir)
    script = os.path.join(src, "bench/peers/torch_grouped_mm.py")
    spec = importlib.util.spec_from_file_location("torch_grouped_mm", script)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    p = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    check(p.returncode == 0 and "--shape" in p.stdout, f"--help failed: {p.returncode} {p.stderr[-300:]}")

    # Formulas against a committed bench moe result (glm-4.5-air, NVFP4): T=1 touches 8 routed + 1 shared.
    with open(os.path.join(src, "bench/results/cpu/glm-4.5-air.json")) as f:
        doc = json.load(f)
    p_air = peer.PRESETS["glm-4.5-air"]
    check(peer.desc_string(p_air, "nvfp4") == doc["meta"]["desc"],
          f'desc {peer.desc_string(p_air, "nvfp4")!r} != {doc["meta"]["desc"]!r}')
    for r in doc["rows"]:
        if r["tokens"] == 1 and r.get("bytes"):
            nbytes, flops = peer.block_cost(p_air, 1, 9, "nvfp4")
            check(nbytes == r["bytes"] and flops == r["flops"],
                  f'block_cost(T=1, 9 experts) = {nbytes}, {flops}; bench moe: {r["bytes"]}, {r["flops"]}')
        if r.get("flops"):
            check(peer.block_cost(p_air, r["tokens"], 0, "nvfp4")[1] == r["flops"], f'flops at T={r["tokens"]}')
    check(peer.expert_bytes(p_air, "bf16") == 6 * 4096 * 1408, "bf16 expert bytes")

    # Every preset against the CLI (when built): bench moe with bf16 weights at T=1 (k + S experts touched)
    # must describe the same layer and count the same bytes and flops as the peer.
    if args.fp4moe and os.path.exists(args.fp4moe):
        with tempfile.TemporaryDirectory() as tmp:
            for name, p in peer.PRESETS.items():
                out = os.path.join(tmp, name + ".json")
                r = subprocess.run([args.fp4moe, "bench", "moe", "--shape", name, "--weights", "bf16", "--tokens", "1",
                                    "--runners", "cpu.fast", "--tactics", "default", "--no-auto", "--warmup", "0",
                                    "--iters", "1", "--pool-gib", "0.05", "--threads", "2", "--json", out],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append(f"fp4moe bench moe --shape {name}: exit {r.returncode} {r.stderr[-300:]}")
                    continue
                with open(out) as f:
                    cli = json.load(f)
                check(cli["meta"]["desc"] == peer.desc_string(p, "bf16"),
                      f'{name}: CLI desc {cli["meta"]["desc"]!r}, peer {peer.desc_string(p, "bf16")!r}')
                row = cli["rows"][0]
                want = peer.block_cost(p, 1, p["k"] + p["S"], "bf16")
                check((row["bytes"], row["flops"]) == want, f'{name}: CLI bytes/flops {row["bytes"]}, {row["flops"]}, '
                                                            f'peer {want}')
    else:
        print("note: no fp4moe binary (--fp4moe): presets not compared with the CLI")

    # Routing transcription: softmax top-2 with renormalization; sigmoid with bias, groups and scaling.
    p = dict(peer.PRESETS["qwen3-30b-a3b"], E=4, k=2)
    ids, w = peer.route_token_reference(p, [0.0, 2.0, 1.0, 2.0], None)
    check(ids == [1, 3] and all(abs(v - 0.5) < 1e-12 for v in w), f"softmax tie to lower index: {ids} {w}")
    p = dict(peer.PRESETS["deepseek-v3"], E=8, k=2, n_group=4, topk_group=2, scale=2.5)
    logits = [3.0, -3.0, 0.5, 0.4, 2.0, 1.9, -1.0, 5.0]
    bias = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.9]
    sig = [1 / (1 + math.exp(-v)) for v in logits]
    # groups (pairs): sums of biased scores: g0 .953+.047, g1 .622+.599, g2 .881+.870, g3 .269+.093 -> keep g2, g1
    ids, w = peer.route_token_reference(p, logits, bias)
    s = sig[4] + sig[5] + 1e-20
    check(ids == [4, 5] and abs(w[0] - 2.5 * sig[4] / s) < 1e-12 and abs(w[1] - 2.5 * sig[5] / s) < 1e-12,
          f"group-limited sigmoid routing: {ids} {w}")

    # Without PyTorch: a clear error, not a traceback.
    try:
        import torch  # noqa: F401
    except ImportError:
        p = subprocess.run([sys.executable, script, "--shape", "glm-4.5-air", "--tokens", "1", "--json",
                            os.devnull], capture_output=True, text=True)
        check(p.returncode == 2 and "needs PyTorch" in p.stderr and "Traceback" not in p.stderr,
              f"without torch: exit {p.returncode}, {p.stderr[-300:]!r}")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
