#!/usr/bin/env python3
"""make-model's generated tokenizer.json loads in Hugging Face `tokenizers` and round-trips text.

For every tokenizer family (tiny = GLM, tiny-qwen3 = Qwen, tiny-deepseek-v3 = DeepSeek): run
`fp4moe make-model --preset P --format bf16`, load tokenizer.json with tokenizers.Tokenizer.from_file, check that
encode/decode round-trips a varied text set, that every special token of tokenizer_config.json / config.json encodes
to the single id config.json names, and that no id reaches config.json's vocab_size.
Exit 77 (skipped) when `tokenizers` is not importable. CTest runs:
    python3 SCRIPT --fp4moe <binary> --build-dir <dir> --source-dir <repo>
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    from tokenizers import Tokenizer
except ImportError:
    print("skipped: python module 'tokenizers' is not installed (pip install tokenizers)")
    sys.exit(77)

TEXTS = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "    ctx = 12345;\n\tif (x) { return y; }\n\n",
    "I'm here, you're there, it's DONE'S. We'LL see.",
    "你好，世界！ こんにちは、カタカナ。 안녕하세요",
    "Größe déjà vu — “quotes” … €100 ± 5 °C",
    "Emoji 🙂🚀👍🏽 ❤️ mixed123abc 3.14159",
    "Привет, мир! Γεια σου κόσμε. مرحبا",
    "   leading and trailing spaces   ",
    "line one\r\nline two\n\n\nline three",
    "",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--source-dir")
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ["tiny", "tiny-qwen3", "tiny-deepseek-v3"]:
            out = os.path.join(tmp, preset)
            subprocess.run([args.fp4moe, "make-model", "--preset", preset, "--format", "bf16", "--no-progress",
                            "--out", out], check=True, stdout=subprocess.DEVNULL)
            tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
            with open(os.path.join(out, "config.json")) as f:
                cfg = json.load(f)
            with open(os.path.join(out, "tokenizer_config.json")) as f:
                tcfg = json.load(f)

            def check(cond, what):
                nonlocal failures
                if not cond:
                    failures += 1
                    print(f"FAIL {preset}: {what}")

            check(tok.get_vocab_size(with_added_tokens=True) <= cfg["vocab_size"],
                  f"tokenizer size {tok.get_vocab_size()} > vocab_size {cfg['vocab_size']}")
            for text in TEXTS:
                enc = tok.encode(text, add_special_tokens=False)
                dec = tok.decode(enc.ids, skip_special_tokens=False)
                check(dec == text, f"round trip of {text!r} gave {dec!r}")
                check(all(i < cfg["vocab_size"] for i in enc.ids), f"id out of range in {text!r}")
            common = tok.encode("the model and the experts", add_special_tokens=False).ids
            check(len(common) < 12, f"merges do not fire: {len(common)} tokens for common words")

            # Special tokens: config.json ids == tokenizer ids, and they encode as single tokens.
            def ids_of(v):
                return v if isinstance(v, list) else [v]
            named = {}
            for key in ["bos_token", "eos_token", "pad_token"]:
                if tcfg.get(key):
                    named[key] = tcfg[key]
            for key, content in named.items():
                tid = tok.token_to_id(content)
                check(tid is not None, f"{key} {content!r} not in the tokenizer")
                check(tok.encode(content, add_special_tokens=False).ids == [tid], f"{content!r} is not one token")
                check(tok.decode([tid], skip_special_tokens=False) == content, f"{content!r} decode")
            eos = ids_of(cfg["eos_token_id"])
            check(tok.token_to_id(tcfg["eos_token"]) in eos, "eos_token not in config eos_token_id")
            check(cfg["pad_token_id"] == tok.token_to_id(tcfg["pad_token"]), "pad_token_id mismatch")
            if "bos_token_id" in cfg:
                bos = {"tiny-qwen3": "<|endoftext|>"}.get(preset, tcfg.get("bos_token"))
                check(cfg["bos_token_id"] == tok.token_to_id(bos), "bos_token_id mismatch")
            for t in eos:
                check(tok.id_to_token(t) is not None, f"eos id {t} unknown")
            # A chat-shaped string: special tokens stay whole, text between them round-trips.
            chat = {"tiny": "[gMASK]<sop><|user|>\nHi there<|assistant|>\n<think></think>\nHello!",
                    "tiny-qwen3": "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
                    "tiny-deepseek-v3": "<｜begin▁of▁sentence｜><｜User｜>Hi there<｜Assistant｜>"}[preset]
            enc = tok.encode(chat, add_special_tokens=False)
            check(tok.decode(enc.ids, skip_special_tokens=False) == chat, "chat round trip")
            print(f"ok {preset}: {tok.get_vocab_size()} tokens, vocab_size {cfg['vocab_size']}")
    if failures:
        print(f"{failures} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
