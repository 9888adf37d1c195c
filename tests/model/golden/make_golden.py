#!/usr/bin/env python3
"""Golden fixtures for the model tests, written by Hugging Face transformers.

For each supported GQA MoE family it builds a tiny random model with transformers, saves it as a real
checkpoint (config.json + model.safetensors with per-expert tensors, as checkpoints on the Hub are laid out),
reloads that checkpoint with transformers to prove it reads back identically, and records in golden.json:
prompt token ids, fp32 logits at every position, the final-norm hidden state of the last position, and the
greedy continuation of 32 tokens.

With --fp4moe BIN it also runs `BIN quantize` on each checkpoint, dequantizes the NVFP4 tensors in numpy
(e2m1 x e4m3 x weight_scale_2, low nibble first), loads them into the transformers model and records the same
outputs in golden_nvfp4.json: the reference for fp4moe's NVFP4 path.

Needs torch and transformers (run on the GPU machine: `python3 tests/model/golden/make_golden.py --out DIR`).
The outputs are committed under tests/model/fixtures/golden/; CI only reads them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

FAMILIES = {
    "glm4_moe": dict(
        cls="Glm4MoeConfig",
        kw=dict(vocab_size=320, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                partial_rotary_factor=0.5, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
                first_k_dense_replace=1, n_group=1, topk_group=1, norm_topk_prob=True,
                routed_scaling_factor=2.5, attention_bias=True, use_qk_norm=True, rms_norm_eps=1e-5,
                max_position_embeddings=256, tie_word_embeddings=False, rope_theta=10000.0,
                eos_token_id=[0], bos_token_id=None, pad_token_id=0),
    ),
    "qwen3_moe": dict(
        cls="Qwen3MoeConfig",
        kw=dict(vocab_size=320, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1,
                mlp_only_layers=[], rms_norm_eps=1e-6, max_position_embeddings=256, tie_word_embeddings=False,
                rope_theta=1000000.0, attention_bias=False, eos_token_id=0, bos_token_id=None, pad_token_id=0),
    ),
}
PROMPT_LENS = [1, 5, 11]
GREEDY_TOKENS = 32
TIE = 0.1           # top-2 logit gap under which a greedy step counts as a near-tie (see test_model_golden.cpp)
CANDIDATES = 40     # random prompts tried per length; the one with the longest tie-free greedy run is kept


def perturb(model, gen):
    """transformers' init (std 0.02, norms 1, bias 0) gives near-uniform logits; widen it so every weight matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p.shape[-1] if p.dim() >= 2 else 1
                p.copy_(torch.randn(p.shape, generator=gen) * (1.0 / fan_in) ** 0.5)
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=gen))


def to_per_expert(state, cfg_kw):
    """Rewrites fused 3-D expert parameters (transformers >= 5 layout) into the per-expert tensor names real
    checkpoints use: mlp.experts.{j}.{gate,up,down}_proj.weight."""
    out = {}
    for name, t in state.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            base = name[: -len("gate_up_proj")]
            e, two_i, h = t.shape
            assert two_i == 2 * cfg_kw["moe_intermediate_size"] and h == cfg_kw["hidden_size"], t.shape
            for j in range(e):
                out[f"{base}{j}.gate_proj.weight"] = t[j, : two_i // 2].contiguous()
                out[f"{base}{j}.up_proj.weight"] = t[j, two_i // 2 :].contiguous()
        elif name.endswith("mlp.experts.down_proj"):
            base = name[: -len("down_proj")]
            e, h, i = t.shape
            assert h == cfg_kw["hidden_size"] and i == cfg_kw["moe_intermediate_size"], t.shape
            for j in range(e):
                out[f"{base}{j}.down_proj.weight"] = t[j].contiguous()
        else:
            out[name] = t
    return out


def save_checkpoint(model, cfg_kw, path):
    os.makedirs(path, exist_ok=True)
    model.config.save_pretrained(path)
    # Weights in bf16 as released checkpoints hold them; the router's correction bias in fp32 (models.md 4.3).
    state = {k: v.detach().to(torch.float32 if k.endswith("e_score_correction_bias") else torch.bfloat16).contiguous()
             for k, v in model.state_dict().items()}
    state = to_per_expert(state, cfg_kw)
    from safetensors.torch import save_file as save_torch

    save_torch(state, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    return sorted(state)


@torch.no_grad()
def outputs(model, prompts):
    res = []
    for ids in prompts:
        x = torch.tensor([ids], device=model.device)
        out = model(x, output_hidden_states=True)
        logits = out.logits[0].float().cpu().numpy()
        hidden = out.hidden_states[-1][0, -1].float().cpu().numpy()
        gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                             min_new_tokens=GREEDY_TOKENS, eos_token_id=None, pad_token_id=0)
        cont = gen[0, len(ids):].tolist()
        # The smallest top-1 margin along the greedy path: a tie-prone fixture would make the test flaky.
        seq = gen[0].unsqueeze(0)
        all_logits = model(seq).logits[0].float()
        margins = []
        for k in range(len(ids) - 1, seq.shape[1] - 1):
            top2 = torch.topk(all_logits[k], 2).values
            margins.append(float(top2[0] - top2[1]))
        res.append(dict(prompt=ids, logits=logits.tolist(), final_hidden=hidden.tolist(), greedy=cont,
                        greedy_margins=margins, min_greedy_margin=min(margins)))
    return res


@torch.no_grad()
def tie_free_steps(model, ids):
    x = torch.tensor([ids], device=model.device)
    gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                         min_new_tokens=GREEDY_TOKENS, eos_token_id=None, pad_token_id=0)
    logits = model(gen).logits[0]
    for n, k in enumerate(range(len(ids) - 1, gen.shape[1] - 1)):
        top2 = torch.topk(logits[k], 2).values
        if float(top2[0] - top2[1]) <= TIE:
            return n
    return GREEDY_TOKENS


def choose_prompt(model, rng, length, vocab):
    """Random prompts are cheap; keep the one whose greedy path stays clear of near-ties the longest, so the
    free-running comparison covers as many steps as possible."""
    best, best_n = None, -1
    for _ in range(CANDIDATES):
        ids = rng.integers(1, vocab, size=length).tolist()
        n = tie_free_steps(model, ids)
        if n > best_n:
            best, best_n = ids, n
        if n == GREEDY_TOKENS:
            break
    return best


E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


def dequantized_state(path):
    """fp32 state dict of a ModelOpt NVFP4 checkpoint written by fp4moe quantize: every NVFP4 group dequantized
    as e2m1(code) * float(e4m3 scale) * weight_scale_2 (low nibble = even k), everything else upcast."""
    from safetensors.torch import load_file as load_torch

    tensors = {}
    for f in sorted(os.listdir(path)):
        if f.endswith(".safetensors"):
            tensors.update(load_torch(os.path.join(path, f)))
    out = {}
    for name, t in tensors.items():
        if name.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        prefix = name[: -len(".weight")] if name.endswith(".weight") else None
        if prefix and prefix + ".weight_scale" in tensors:
            q = t.to(torch.int64)
            codes = torch.stack([q & 0xF, q >> 4], dim=-1).reshape(q.shape[0], q.shape[1] * 2)
            sc = tensors[prefix + ".weight_scale"].float()
            g = tensors[prefix + ".weight_scale_2"].float().reshape(())
            out[name] = E2M1[codes] * sc.repeat_interleave(16, dim=1) * g
        else:
            out[name] = t.float()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--fp4moe", help="fp4moe binary: also write NVFP4 goldens through `fp4moe quantize`")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import transformers

    # The reference runs in float64 on the CPU: exact enough that fp4moe's error is what the test measures,
    # and the same on every machine (GPU kernels differ in reduction order between implementations).
    device = "cpu"
    ref_dtype = torch.float64
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("transformers", transformers.__version__, "torch", torch.__version__, "device", device)
    for fam, spec in FAMILIES.items():
        cfg = getattr(transformers, spec["cls"])(**spec["kw"])
        gen = torch.Generator().manual_seed(args.seed)
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", experts_implementation="eager").float()
        perturb(model, gen)
        with torch.no_grad():  # parameters hold bf16 values; buffers (rotary inv_freq) keep full precision
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).to(p.dtype))
        model = model.to(ref_dtype)
        path = os.path.join(args.out, fam)
        names = save_checkpoint(model, spec["kw"], path)
        # Reading our per-expert checkpoint back with transformers must give the same model.
        reloaded, info = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=ref_dtype, attn_implementation="eager", experts_implementation="eager", output_loading_info=True)
        bad = {k: v for k, v in info.items() if v}
        assert not bad, f"{fam}: transformers reports while loading our checkpoint: {bad}"
        ref_sd, new_sd = model.state_dict(), reloaded.state_dict()
        for k in ref_sd:
            d = (ref_sd[k].float() - new_sd[k].float()).abs().max().item() if k in new_sd else float("inf")
            if d != 0.0:
                print(f"  {fam}: parameter {k} differs after reload (max {d})")
        reloaded = reloaded.to(device).eval()
        model = model.to(device).eval()
        rng = np.random.default_rng(args.seed)
        prompts = [choose_prompt(reloaded, rng, n, spec["kw"]["vocab_size"]) for n in PROMPT_LENS]
        with torch.no_grad():
            x = torch.tensor([prompts[-1]], device=device)
            diff = (model(x).logits - reloaded(x).logits).abs().max().item()
        if diff >= 1e-9:
            rb = dict(reloaded.named_buffers())
            for k, b in model.named_buffers():
                d = (b.double() - rb[k].double()).abs().max().item() if k in rb else float("inf")
                print(f"  buffer {k} {b.dtype} vs {rb.get(k, b).dtype}: max diff {d}")
            with torch.no_grad():
                ha = model(x, output_hidden_states=True).hidden_states
                hb = reloaded(x, output_hidden_states=True).hidden_states
            for i, (p_, q_) in enumerate(zip(ha, hb)):
                print(f"  hidden {i}: max diff {(p_ - q_).abs().max().item()}")
            for (k, p_), (k2, q_) in zip(model.named_parameters(), reloaded.named_parameters()):
                if p_.dtype != q_.dtype:
                    print(f"  param {k} {p_.dtype} vs {q_.dtype}")
        assert diff < 1e-9, f"{fam}: checkpoint does not read back identically (max diff {diff})"
        res = outputs(reloaded, prompts)
        meta = dict(family=fam, transformers=transformers.__version__, torch=torch.__version__, seed=args.seed,
                    dtype="float64 compute on bf16 weights (CPU)", tensors=len(names))
        with open(os.path.join(path, "golden.json"), "w") as f:
            json.dump(dict(meta=meta, cases=res), f)
        print(fam, "min greedy margins", [round(r["min_greedy_margin"], 4) for r in res])

        if args.fp4moe:
            qpath = os.path.join(args.out, fam + "-nvfp4")
            shutil.rmtree(qpath, ignore_errors=True)
            subprocess.run([args.fp4moe, "quantize", "--in", path, "--out", qpath], check=True)
            state = dequantized_state(qpath)
            qmodel = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=ref_dtype, attn_implementation="eager", experts_implementation="eager")
            # Load the dequantized per-expert tensors through transformers' own checkpoint loader: write them as
            # a bf16-free fp32 checkpoint beside the config and reload.
            tmp = qpath + "-dequant"
            os.makedirs(tmp, exist_ok=True)
            qmodel.config.save_pretrained(tmp)
            from safetensors.torch import save_file as save_torch

            save_torch({k: v.contiguous() for k, v in state.items()}, os.path.join(tmp, "model.safetensors"),
                       metadata={"format": "pt"})
            qmodel = transformers.AutoModelForCausalLM.from_pretrained(
                tmp, dtype=ref_dtype, attn_implementation="eager", experts_implementation="eager").to(device).eval()
            qres = outputs(qmodel, prompts)
            with open(os.path.join(qpath, "golden_nvfp4.json"), "w") as f:
                json.dump(dict(meta=dict(meta, quantized_by="fp4moe quantize"), cases=qres), f)
            shutil.rmtree(tmp)
            print(fam, "nvfp4 min greedy margins", [round(r["min_greedy_margin"], 4) for r in qres])


if __name__ == "__main__":
    sys.exit(main())
