"""Held-out perplexity of an exported checkpoint, with the protocol mlarun's `perplexity` uses.

Protocol (also in README.md):
  1. ids = encode(file text) with the model's tokenizer.json, no BOS or other special
     tokens added (the file is read as UTF-8 and used verbatim).
  2. ids are split into consecutive, non-overlapping chunks of `context` tokens; the last
     chunk is kept if it has at least 2 tokens.
  3. Each chunk is evaluated independently from position 0 (fresh cache).
  4. In a chunk of length L, token j (1 <= j < L) is predicted from tokens 0..j-1 of the
     same chunk: NLL_j = -log softmax(logits[j-1])[id_j] (natural log).
  5. perplexity = exp(sum of all NLL_j / number of predicted tokens), the number of
     predicted tokens being sum over chunks of (L - 1).
The checkpoint's bf16 weights are widened to float32 and the model computes in float32,
as the engine does.

With --mlarun PATH the same protocol is also computed from `mlarun logits` (one call per
chunk, float32), as an independent check of the engine's numbers.

Usage: /usr/bin/python3 tools/train/evaluate.py --model DIR --file TEXT --context N [--json]
           [--mlarun build/bin/mlarun]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import export  # noqa: E402
from model import kv_cache_values_per_token  # noqa: E402


def chunks_of(ids, context):
    chunks = [ids[i:i + context] for i in range(0, len(ids), context)]
    return [c for c in chunks if len(c) >= 2]


@torch.no_grad()
def chunked_nll(model, ids, context, batch=16):
    """(total NLL in nats as a Python float, number of predicted tokens)."""
    was_training = model.training
    model.eval()
    chunks = chunks_of(list(ids), context)
    total, count = 0.0, 0
    by_len = {}
    for c in chunks:
        by_len.setdefault(len(c), []).append(c)
    for length, group in sorted(by_len.items()):
        for i in range(0, len(group), batch):
            x = torch.tensor(group[i:i + batch], dtype=torch.long)
            logp = torch.log_softmax(model(x[:, :-1]).double(), dim=-1)
            nll = -logp.gather(-1, x[:, 1:, None]).squeeze(-1)
            total += float(nll.sum())
            count += nll.numel()
    model.train(was_training)
    return total, count


def mlarun_nll(mlarun, model_dir, ids, context, threads):
    """Protocol above with logits from `mlarun logits` (prefill, float32) for every chunk."""
    total, count = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        for chunk in chunks_of(list(ids), context):
            subprocess.run([mlarun, "logits", "--model", model_dir, "--ids", ",".join(map(str, chunk)),
                            "--out", out, "-t", str(threads)], check=True, capture_output=True)
            logits = np.load(out).astype(np.float64)[:-1]
            logits -= logits.max(axis=-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
            total -= float(logp[np.arange(len(chunk) - 1), chunk[1:]].sum())
            count += len(chunk) - 1
    return total, count


def evaluate_dir(model_dir, text_file, context):
    model = export.load_exported(model_dir)
    tok = bpe.Tokenizer(model_dir)
    with open(text_file, encoding="utf-8") as f:
        ids = tok.encode(f.read())
    moes = model.moe_layers()
    loads = [torch.zeros(m.c["n_routed_experts"], dtype=torch.long) for m in moes]
    hooks = []

    def accumulate(acc):
        def hook(module, inputs, output):
            acc.add_(module.last_load)          # returns None: the output is unchanged
        return hook
    for m, acc in zip(moes, loads):
        hooks.append(m.register_forward_hook(accumulate(acc)))
    nll, n = chunked_nll(model, ids, context)
    for h in hooks:
        h.remove()
    result = {"model": model_dir, "file": text_file, "context": context, "tokens": len(ids),
              "predicted_tokens": n, "nll": nll / n, "perplexity": math.exp(nll / n),
              "kv_cache_values_per_token": kv_cache_values_per_token(model.config)}
    if moes:
        result["expert_load_cv"] = [round(float(l.double().std(unbiased=False) / l.double().mean()), 4)
                                    for l in loads]
        result["expert_load"] = [l.tolist() for l in loads]
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description="held-out perplexity of an exported checkpoint")
    p.add_argument("--model", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument("--mlarun", help="also compute the perplexity with this mlarun binary")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    r = evaluate_dir(args.model, args.file, args.context)
    if args.mlarun:
        with open(args.file, encoding="utf-8") as f:
            ids = bpe.Tokenizer(args.model).encode(f.read())
        nll, n = mlarun_nll(args.mlarun, args.model, ids, args.context, args.threads)
        r["mlarun_perplexity"] = math.exp(nll / n)
        r["mlarun_predicted_tokens"] = n
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        print(f"perplexity {r['perplexity']:.4f} tokens {r['tokens']} predicted {r['predicted_tokens']} "
              f"nll {r['nll']:.6f} context {args.context}")
        if "mlarun_perplexity" in r:
            print(f"mlarun logits: perplexity {r['mlarun_perplexity']:.4f} "
                  f"predicted {r['mlarun_predicted_tokens']}")
        if "expert_load_cv" in r:
            print("expert-load CV per MoE layer: " + " ".join(f"{v:.3f}" for v in r["expert_load_cv"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
