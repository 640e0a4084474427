#!/usr/bin/env python3
"""The embedded default model is the trained MLA+MoE model: its held-out perplexity computed by
`mlarun perplexity` equals the value the training script's own evaluation recorded in
tools/train/results.json within 0.5%, and `generate` produces readable text.
Run: default_model_test.py --mlarun BIN"""
import argparse
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlarun", required=True)
    args = ap.parse_args()
    results = json.load(open(os.path.join(REPO, "tools/train/results.json")))
    recorded = results["models"]["mla_moe"]
    out = subprocess.run([args.mlarun, "perplexity", "--model", "models/default", "--file", recorded["heldout_file"],
                          "--context", str(recorded["context"]), "--json"],
                         cwd=REPO, capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        print(out.stderr)
        return 1
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    rel = abs(measured["perplexity"] - recorded["heldout_perplexity"]) / recorded["heldout_perplexity"]
    print("perplexity: mlarun %.4f, training evaluation %.4f (relative difference %.5f%%); tokens %d vs %d" % (
        measured["perplexity"], recorded["heldout_perplexity"], 100 * rel, measured["tokens_scored"],
        recorded["heldout_predicted_tokens"]))
    ok = rel <= 0.005 and measured["tokens_scored"] == recorded["heldout_predicted_tokens"]
    gen = subprocess.run([args.mlarun, "generate", "--prompt", "And the king said", "-n", "40", "--seed", "1"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    words = re.findall(r"[A-Za-z]+", gen.stdout)
    readable = gen.returncode == 0 and len(words) >= 15
    print("generate (default model): %r" % gen.stdout.strip())
    print(("PASS" if ok else "FAIL") + " perplexity within 0.5% of the recorded value")
    print(("PASS" if readable else "FAIL") + " generate prints English-like words")
    return 0 if ok and readable else 1


if __name__ == "__main__":
    sys.exit(main())
