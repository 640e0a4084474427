"""End-to-end cross-check: mlarun's logits against llama.cpp's on the same weights.

  /usr/bin/python3 tests/e2e/llamacpp_crosscheck.py --mlarun build/bin/mlarun \
      --workdir build/e2e/llamacpp --npm-dir build/llamacpp-npm

llama.cpp is a second implementation of these architectures, written apart from this project (and
from reference/, the NumPy model): its prebuilt CPU library comes from the npm registry
(node-llama-cpp, pinned in bench/llamacpp/compare.sh's NODE_LLAMA_CPP), driven by
bench/llamacpp/llamacpp_bench.mjs. For each preset, mlarun writes a random float32 model
(`make-model`), bench/llamacpp/gguf_from_safetensors.py writes it as a float32 GGUF, and both
engines give the logits after every token of a fixed id sequence (mlarun: `logits`, exact
float32, prefill and decode; llama.cpp: one batch, float32 KV cache, flash attention off: its CPU
flash attention rounds to float16 whatever the cache type, 1e-3 to 7e-3 off). Checked: the
largest absolute logit difference over all positions and the vocabulary, and the same argmax at
every position. Presets: tiny-v2-lite (MLA without q_lora, softmax gate, YaRN), tiny-v3 (q_lora,
sigmoid gate with the noaux_tc bias and group-limited routing, normalised and scaled weights),
the Llama MHA / GQA / MQA ones and tiny-qwen2 (q/k/v biases, tied embeddings). Left out:
tiny-v2, whose group_limited_greedy ranks groups by their top score, which llama.cpp does not
implement (it ranks them as noaux_tc does), and tiny-mistral-swa, whose sliding window llama.cpp's
llama architecture does not apply.
Needs node/npm and the npm registry (like TokenizerReferenceE2E); fails loudly without them.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

from llamacpp_setup import SOURCE, install_llamacpp, run

PRESETS = ("tiny-v2-lite", "tiny-v3", "tiny-llama-mha", "tiny-llama-gqa", "tiny-llama-mqa",
           "tiny-qwen2")
# Fixed ids below the tiny presets' vocabulary of 512 (the GGUF's ids 0-255 are byte tokens, but
# ids are fed directly, so any id is valid).
IDS = [1, 17, 300, 42, 511, 7, 256, 99, 3, 480, 123, 64, 200, 5, 333, 77, 410, 12, 250, 9]
# float32 on both sides, differing in summation order: the presets' logits (up to ~4, tiny-qwen2's
# up to ~24) agree to 1.4e-6-5.7e-6 (measured). A float16 rounding anywhere gives ~1e-3, a wrong
# RoPE, YaRN scale or routing choice more.
ATOL = 1e-4


def main():
    parser = argparse.ArgumentParser(description="mlarun vs llama.cpp logits")
    parser.add_argument("--mlarun", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--npm-dir", required=True)
    args = parser.parse_args()
    script = install_llamacpp(args.npm_dir)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    failures = 0
    for preset in PRESETS:
        model = os.path.join(args.workdir, preset)
        gguf = model + ".gguf"
        run([args.mlarun, "make-model", "--preset", preset, "--out", model, "--seed", "3"])
        run([sys.executable, os.path.join(SOURCE, "bench", "llamacpp", "gguf_from_safetensors.py"),
             model, gguf, "--type", "f32"])
        theirs = np.array(json.loads(run(["node", script, gguf, "--logits",
                                          ",".join(map(str, IDS)), "--cache-type", "f32",
                                          "--flash-attn", "off", "-t", "1"]))["logits"],
                          dtype=np.float64)
        for mode in ("prefill", "decode"):
            out = os.path.join(args.workdir, f"{preset}-{mode}.npy")
            run([args.mlarun, "logits", "--model", model, "--ids", ",".join(map(str, IDS)),
                 "--out", out, "--mode", mode, "--isa", "auto", "-t", "1"])
            ours = np.load(out).astype(np.float64)
            name = f"{preset} ({mode})"
            if ours.shape != theirs.shape:
                print(f"FAIL {name}: shapes {ours.shape} (mlarun) vs {theirs.shape} (llama.cpp)")
                failures += 1
                continue
            diff = np.abs(ours - theirs)
            worst = np.unravel_index(np.argmax(diff), diff.shape)
            same_argmax = int((ours.argmax(axis=1) == theirs.argmax(axis=1)).sum())
            ok = diff.max() <= ATOL and same_argmax == len(IDS)
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: max |logit diff| {diff.max():.2e} at "
                  f"[{worst[0]}, {worst[1]}] (mlarun {ours[worst]:.6g}, llama.cpp "
                  f"{theirs[worst]:.6g}; |logits| up to {np.abs(theirs).max():.3g}); same argmax "
                  f"at {same_argmax} of {len(IDS)} positions")
    if failures:
        sys.exit(f"FAIL: {failures} case(s) differ from llama.cpp by more than {ATOL}")
    print("all cases agree with llama.cpp")


if __name__ == "__main__":
    main()
