"""End-to-end cross-check of mlarun's GGUF support against llama.cpp on the same files.

  /usr/bin/python3 tests/e2e/llamacpp_gguf_crosscheck.py --mlarun build/bin/mlarun \
      --workdir build/e2e/llamacpp_gguf --npm-dir build/llamacpp-npm [--types q4_k_m,q8_0]

For each preset, mlarun writes a random model (`make-model`) and then each GGUF type of
`mlarun quantize --type` (tensor names, metadata and tokenizer as llama.cpp's converter writes
them; the 4-6-bit mixes as llama.cpp mixes them). llama.cpp (node-llama-cpp's prebuilt CPU
library, the version pinned in bench/llamacpp/compare.sh) loads each file and gives the logits
after each of 20 fixed ids (one batch, float32 KV cache, flash attention off); mlarun gives them
from the same file (`logits --model FILE.gguf`, prefill and decode). Also: mlarun reads the
float32 GGUF that bench/llamacpp/gguf_from_safetensors.py (an independent Python writer) makes of
the same model, and the older attn_kv_b layout of DeepSeek's MLA gives the logits of the split
layout.

Tolerances (the largest |logit difference| over all positions and the vocabulary, relative to
the largest |logit|): the two engines multiply the same stored weights, but quantise the
activations differently: llama.cpp rounds them to bfloat16 against BF16 weights, to Q8_0 blocks
(float16 scales) against Q8_0, Q4_0, Q5_0 and Q5_1 weights and to Q8_K (blocks of 256) against the
K-quants; mlarun keeps float32 activations for F32, F16 and BF16 weights and quantises them to
8-bit blocks of 32 with float32 scales for the block types. TOLERANCE below is per type; argmax
must agree at every position where llama.cpp's two largest logits are further apart than twice
the measured difference (a smaller gap is a tie at this precision).
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

from llamacpp_setup import SOURCE, install_llamacpp, run

# (name, preset, config patch): the tiny presets, whose rows of 16-128 values take the 32-value
# types (Q8_0, Q5_0, Q5_1, Q4_0) and F16, and the same with rows of 256 (hidden 256) for the
# K-quants. The wide MoE ones route each token to all experts (a random model's near-equal
# experts flip with any rounding, moving a position's logits by tens of percent).
WIDE = '"hidden_size": 256, "intermediate_size": 512'
WIDE_MLA = WIDE + ', "moe_intermediate_size": 256, "kv_lora_rank": 256, "qk_nope_head_dim": 32, ' \
    '"v_head_dim": 32'
PRESETS = (
    ("tiny-v2-lite", "tiny-v2-lite", None),
    ("tiny-v3", "tiny-v3", None),
    ("tiny-llama-gqa", "tiny-llama-gqa", None),
    ("wide-v2-lite", "tiny-v2-lite", "{" + WIDE_MLA + ', "num_experts_per_tok": 8}'),
    ("wide-v3", "tiny-v3", "{" + WIDE_MLA + ', "num_experts_per_tok": 16, "topk_group": 4}'),
    ("wide-llama-gqa", "tiny-llama-gqa", "{" + WIDE + "}"),
)
# llama.cpp's CPU backend in the pinned build cannot multiply DeepSeek's split MLA tensors in most
# formats on the Intel Xeon VM it was tried on (AVX-512 VNNI, AMX): with attn_k_b in F16, Q8_0 or
# Q4_0 it aborts with "GGML_ASSERT(*cur_backend_id != -1) failed" (no backend takes the product
# with the permuted query; the files of bench/llamacpp/gguf_from_safetensors.py, an independent
# writer, abort the same way), and with attn_v_b in a K-quant its logits are far off (107% RMS
# from the float32 model, where mlarun's are 12%, on wide-v2-lite q5_k_m; a file with only
# attn_v_b quantised crashes it). So the DeepSeek files compared here keep those two small
# tensors in BF16 (`quantize --tensor-type`, as llama-quantize's option of the same name); every
# other tensor has the mix's type, and the Llama presets cover every type in every role.
MLA_BF16 = ["--tensor-type", "attn_k_b=bf16", "--tensor-type", "attn_v_b=bf16"]
TYPES = ("f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0")
IDS = [1, 17, 300, 42, 511, 7, 256, 99, 3, 480, 123, 64, 200, 5, 333, 77, 410, 12, 250, 9]
# Measured (2026-12, wide and Llama presets): f32 4e-7-8e-7, f16 5e-7 (llama.cpp's F16 product
# keeps float32 activations here too), bf16 4e-3-7e-3, the 8-bit and smaller types 1.3e-2-4.1e-2
# (llama.cpp's Q8_K activations for the K-quants are coarser than its Q8_0 ones).
TOLERANCE = {
    "f32": 1e-5,
    "f16": 1e-5,
    "bf16": 2e-2,
    "q8_0": 6e-2,
    "q6_k": 6e-2,
    "q5_k_m": 6e-2,
    "q4_k_m": 6e-2,
    "q4_0": 6e-2,
}
# The tiny MoE presets route each token to 2 of 8 (tiny-v2-lite) or 4 of 16 experts in groups
# (tiny-v3): with random weights, near-equal experts flip with the engines' different activation
# rounding, moving a position's logits by 20-55%. They are compared in float32 only; their shapes
# are compared in every type as the wide presets, which route to every expert.
FLOAT32_ONLY = ("tiny-v2-lite", "tiny-v3")


class Checker:
    def __init__(self, args, script):
        self.args = args
        self.script = script
        self.failures = 0

    def llamacpp_logits(self, gguf):
        out = run(["node", self.script, gguf, "--logits", ",".join(map(str, IDS)),
                   "--cache-type", "f32", "--flash-attn", "off", "-t", "1"])
        return np.array(json.loads(out)["logits"], dtype=np.float64)

    def mlarun_logits(self, model, mode):
        out = os.path.join(self.args.workdir, "logits.npy")
        run([self.args.mlarun, "logits", "--model", model, "--ids", ",".join(map(str, IDS)),
             "--out", out, "--mode", mode, "--isa", "auto", "-t", "1"])
        return np.load(out).astype(np.float64)

    def compare(self, name, ours, theirs, tolerance):
        if ours.shape != theirs.shape:
            print(f"FAIL {name}: shapes {ours.shape} (mlarun) vs {theirs.shape} (other)")
            self.failures += 1
            return
        diff = np.abs(ours - theirs)
        scale = max(1.0, np.abs(theirs).max())
        relative = diff.max() / scale
        top2 = np.sort(theirs, axis=1)[:, -2:]
        decided = (top2[:, 1] - top2[:, 0]) > 2 * diff.max()
        same = ours.argmax(axis=1) == theirs.argmax(axis=1)
        ok = relative <= tolerance and bool(np.all(same[decided]))
        self.failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: max |logit diff| {diff.max():.2e} = "
              f"{relative:.2e} of max |logit| {scale:.3g} (tolerance {tolerance:g}); same argmax "
              f"at {int(same.sum())} of {len(IDS)} positions ({int(decided.sum())} decided, "
              f"{int(same[decided].sum())} agree)")


def main():
    parser = argparse.ArgumentParser(description="mlarun vs llama.cpp on mlarun-written GGUF files")
    parser.add_argument("--mlarun", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--npm-dir", required=True)
    parser.add_argument("--types", default=",".join(TYPES))
    parser.add_argument("--presets", default=",".join(name for name, _, _ in PRESETS))
    args = parser.parse_args()
    script = install_llamacpp(args.npm_dir)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    check = Checker(args, script)
    wanted = set(args.presets.split(","))
    for name, preset, patch in PRESETS:
        if name not in wanted:
            continue
        model = os.path.join(args.workdir, name)
        make = [args.mlarun, "make-model", "--preset", preset, "--out", model, "--seed", "3"]
        run(make + (["--config-patch", patch] if patch else []))
        for gguf_type in args.types.split(","):
            if name in FLOAT32_ONLY and gguf_type != "f32":
                continue
            gguf = f"{model}.{gguf_type}.gguf"
            mla = MLA_BF16 if "llama" not in name and gguf_type not in ("f32", "bf16") else []
            run([args.mlarun, "quantize", "--model", model, "--type", gguf_type, "--out", gguf] +
                mla)
            theirs = check.llamacpp_logits(gguf)
            # F16 files with BF16 MLA tensors: llama.cpp rounds those products' activations to
            # bfloat16.
            tolerance = TOLERANCE["bf16" if mla and gguf_type == "f16" else gguf_type]
            for mode in ("prefill", "decode"):
                check.compare(f"{name} {gguf_type}{' (MLA bf16)' if mla else ''} ({mode})",
                              check.mlarun_logits(gguf, mode), theirs, tolerance)
            if name.startswith("wide-v") and gguf_type in ("f32", "q8_0"):
                old = f"{model}.{gguf_type}.kv_b.gguf"
                run([args.mlarun, "quantize", "--model", model, "--type", gguf_type,
                     "--mla-layout", "kv_b", "--out", old])
                check.compare(f"{name} {gguf_type} attn_kv_b layout vs split (mlarun)",
                              check.mlarun_logits(old, "prefill"),
                              check.mlarun_logits(gguf, "prefill"),
                              1e-5 if gguf_type == "f32" else TOLERANCE[gguf_type])
        # The same model written by the independent Python writer.
        py_gguf = f"{model}.python-f32.gguf"
        run([sys.executable, os.path.join(SOURCE, "bench", "llamacpp", "gguf_from_safetensors.py"),
             model, py_gguf, "--type", "f32"])
        check.compare(f"{name} Python-written f32 GGUF (mlarun vs llama.cpp)",
                      check.mlarun_logits(py_gguf, "prefill"), check.llamacpp_logits(py_gguf),
                      TOLERANCE["f32"])
    if check.failures:
        sys.exit(f"FAIL: {check.failures} case(s) differ from llama.cpp beyond their tolerance")
    print("all cases agree with llama.cpp")


if __name__ == "__main__":
    main()
