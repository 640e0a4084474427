"""Checks that an exported checkpoint gives the same logits in PyTorch, mlarun and the NumPy reference.

Token ids: the first --n-tokens ids of the tokenized --text file (default: the held-out
evaluation file). Runs
  * our PyTorch model on the exported checkpoint (bf16 weights widened to f32), in float32
    and in float64;
  * `mlarun logits` (float32) in prefill mode with naive attention, and in decode mode with
    absorbed attention (MLA) — the engine's two MLA paths;
  * `reference/run_reference.py logits` (NumPy, float64, output stored as float32);
and prints the max |difference| of every pair against PyTorch f32 and against the
reference, plus the max |logit| for scale. --json FILE stores the numbers, --results FILE
--name NAME stores them in results.json; --atol makes the script exit 1 when any
difference against the reference is larger.

Usage: /usr/bin/python3 tools/train/compare_logits.py --model DIR [--mlarun build/bin/mlarun]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import export  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def main(argv=None):
    p = argparse.ArgumentParser(description="PyTorch vs mlarun vs NumPy reference logits")
    p.add_argument("--model", required=True)
    p.add_argument("--mlarun", default=os.path.join(REPO, "build", "bin", "mlarun"))
    p.add_argument("--text", default=os.path.join(REPO, "tests", "testdata", "heldout.txt"))
    p.add_argument("--n-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="write the numbers here")
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--results", help="also store the numbers in this results.json ...")
    p.add_argument("--name", help="... under models.<name>.logits_check")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    with open(args.text, encoding="utf-8") as f:
        ids = bpe.Tokenizer(args.model).encode(f.read())[:args.n_tokens]
    ids_arg = ",".join(map(str, ids))
    model = export.load_exported(args.model)
    is_mla = model.config["model_type"] == "deepseek_v3"
    with torch.no_grad():
        x = torch.tensor([ids])
        torch32 = model(x)[0].numpy().astype(np.float64)
        torch64 = model.double()(x)[0].numpy()

    out = {"model": args.model, "n_tokens": len(ids), "max_abs_logit": float(np.abs(torch64).max())}
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"mlarun_prefill_naive": ["--mode", "prefill", "--attention", "naive"],
                "mlarun_decode_absorbed": ["--mode", "decode", "--attention", "absorbed" if is_mla else "naive"]}
        logits = {}
        for name, extra in runs.items():
            path = os.path.join(tmp, name + ".npy")
            run([args.mlarun, "logits", "--model", args.model, "--ids", ids_arg, "--out", path,
                 "-t", str(args.threads)] + extra)
            logits[name] = np.load(path).astype(np.float64)
        ref_path = os.path.join(tmp, "ref.npy")
        run([sys.executable, os.path.join(REPO, "reference", "run_reference.py"), "logits",
             "--model", args.model, "--ids", ids_arg, "--out", ref_path])
        logits["reference_f64"] = np.load(ref_path).astype(np.float64)
    logits["torch_f32"] = torch32
    logits["torch_f64"] = torch64

    def diff(a, b):
        return float(np.abs(logits[a] - logits[b]).max())

    pairs = [("torch_f32", "mlarun_prefill_naive"), ("torch_f32", "mlarun_decode_absorbed"),
             ("torch_f32", "reference_f64"), ("mlarun_prefill_naive", "reference_f64"),
             ("mlarun_decode_absorbed", "reference_f64"), ("torch_f64", "reference_f64")]
    out["max_abs_diff"] = {f"{a} vs {b}": diff(a, b) for a, b in pairs}
    print(f"{args.model}: {len(ids)} tokens, max |logit| {out['max_abs_logit']:.2f}")
    for k, v in out["max_abs_diff"].items():
        print(f"  {k:48s} {v:.3e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    if args.results and args.name:
        with open(args.results) as f:
            results = json.load(f)
        results.setdefault("models", {}).setdefault(args.name, {})["logits_check"] = {
            "n_tokens": out["n_tokens"], "max_abs_logit": round(out["max_abs_logit"], 3),
            "max_abs_diff": {k: float(f"{v:.3g}") for k, v in out["max_abs_diff"].items()}}
        with open(args.results, "w") as f:
            json.dump(results, f, indent=2, sort_keys=True)
            f.write("\n")
    if args.atol is not None:
        worst = max(v for k, v in out["max_abs_diff"].items() if "reference" in k)
        if worst > args.atol:
            print(f"FAIL: {worst:.3e} > atol {args.atol:g}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
