#!/usr/bin/env python3
"""Held-out perplexity of the trained models with their weights in each GGUF type.

For every trained model (the MLA + MoE default model and the attention baselines), writes the
checkpoint as GGUF in each type (`mlarun quantize --type T`), runs `mlarun perplexity` on the
held-out text (context 256, full bf16 KV cache) for the bf16 checkpoint and each file, and prints
a Markdown table: perplexity, change against bf16, and the file's size. Every command is printed.

Usage: /usr/bin/python3 tools/quality/weights_table.py [--mlarun build/bin/mlarun] [--threads 2]
       [--workdir build/quality_weights]
"""
import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELDOUT = "tests/testdata/heldout.txt"
MODELS = [  # (label, model dir)
    ("MLA + MoE (default)", "models/default"),
    ("MLA dense", "models/baselines/mla_dense"),
    ("MHA", "models/baselines/mha"),
    ("GQA", "models/baselines/gqa"),
    ("MQA", "models/baselines/mqa"),
]
TYPES = ["q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"]


def run(cmd):
    print("$ " + " ".join(cmd), file=sys.stderr)
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


def perplexity(mlarun, model, threads):
    out = run([mlarun, "perplexity", "--model", model, "--file", HELDOUT, "--context", "256",
               "--kv-dtype", "bf16", "-t", str(threads), "--json"])
    return json.loads(out)["perplexity"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlarun", default="build/bin/mlarun")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workdir", default="build/quality_weights")
    args = parser.parse_args()
    os.makedirs(os.path.join(REPO, args.workdir), exist_ok=True)
    header = "| model | bf16 | " + " | ".join(TYPES) + " |"
    rows = [header, "|" + "---|" * (len(TYPES) + 2)]
    for label, model in MODELS:
        base = perplexity(args.mlarun, model, args.threads)
        size = sum(os.path.getsize(os.path.join(REPO, model, f))
                   for f in os.listdir(os.path.join(REPO, model)) if f.endswith(".safetensors"))
        cells = [f"{base:.2f} ({size / 1e6:.1f} MB)"]
        for t in TYPES:
            gguf = os.path.join(args.workdir, os.path.basename(model) + f".{t}.gguf")
            run([args.mlarun, "quantize", "--model", model, "--type", t, "--out", gguf])
            p = perplexity(args.mlarun, gguf, args.threads)
            mb = os.path.getsize(os.path.join(REPO, gguf)) / 1e6
            cells.append(f"{p:.2f} ({(p / base - 1) * 100:+.1f}%, {mb:.1f} MB)")
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
