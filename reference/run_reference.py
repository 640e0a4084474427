"""Command-line entry point of the mlarun NumPy reference.

  /usr/bin/python3 reference/run_reference.py logits --model DIR --ids 1,2,3 --out FILE.npy \
      [--kv-policy P] [--attention naive|absorbed] [--mode prefill|decode]
  /usr/bin/python3 reference/run_reference.py compare A.npy B.npy [--atol 1e-4]

`logits` writes float32 logits [n_tokens, vocab] with np.save. The model family is
chosen from config.json `architectures[0]` (then `model_type`): DeepSeek-V2/V3
(deepseek_ref.py, formulas from arXiv 2405.04434 / 2412.19437 / 2309.00071) or
Llama/Mistral/Qwen2 (llama_ref.py). KV-cache policies: kv_policy.py.
`compare` prints the max abs difference and exits 1 when it exceeds --atol (or
when shapes differ or a value is not finite).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deepseek_ref  # noqa: E402
import llama_ref  # noqa: E402
from kv_policy import parse_kv_policy  # noqa: E402
from safetensors_np import load_model_dir  # noqa: E402


def model_class_for(config):
    """Pick the reference implementation for a config dict, or raise ValueError."""
    arch = (config.get("architectures") or [None])[0]
    model_type = config.get("model_type")
    if arch in deepseek_ref.ARCHITECTURES or (arch is None and model_type in deepseek_ref.MODEL_TYPES):
        return deepseek_ref.DeepseekModel
    if arch in llama_ref.ARCHITECTURES or (arch is None and model_type in llama_ref.MODEL_TYPES):
        return llama_ref.LlamaModel
    raise ValueError(f"unsupported architecture {arch!r} (model_type {model_type!r}); supported: "
                     f"{', '.join(deepseek_ref.ARCHITECTURES + llama_ref.ARCHITECTURES)}")


def load_model(model_dir):
    config, weights = load_model_dir(model_dir)
    return model_class_for(config)(config, weights)


def compute_logits(model_dir, ids, kv_policy=None, attention="naive", mode="prefill"):
    """float64 logits [n_tokens, vocab] for token ids."""
    model = load_model(model_dir)
    policy = parse_kv_policy(kv_policy)
    if mode == "prefill":
        return model.forward(ids, policy, attention)
    if mode == "decode":
        return model.decode(ids, policy, attention)
    raise ValueError(f"mode must be prefill or decode, got {mode!r}")


def parse_ids(text):
    try:
        return [int(tok) for tok in text.replace(" ", "").split(",") if tok]
    except ValueError:
        raise ValueError(f"--ids must be comma-separated integers, got {text!r}") from None


def max_abs_diff(a, b):
    if a.shape != b.shape:
        return None
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def cmd_logits(args):
    logits = compute_logits(args.model, parse_ids(args.ids), args.kv_policy, args.attention, args.mode)
    np.save(args.out, logits.astype(np.float32))
    print(f"wrote {args.out}: logits {list(logits.shape)}")
    return 0


def cmd_compare(args):
    a, b = np.load(args.a), np.load(args.b)
    diff = max_abs_diff(a, b)
    if diff is None:
        print(f"shape mismatch: {args.a} {list(a.shape)} vs {args.b} {list(b.shape)}")
        return 1
    print(f"max abs diff {diff:.3e} (atol {args.atol:g}) over {list(a.shape)}")
    if not np.isfinite(diff) or diff > args.atol:
        print("FAIL: difference over tolerance")
        return 1
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description="mlarun NumPy reference")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("logits", help="compute float32 logits [n_tokens, vocab]")
    p.add_argument("--model", required=True, help="Hugging Face model directory")
    p.add_argument("--ids", required=True, help="comma-separated token ids, e.g. 1,2,3")
    p.add_argument("--out", required=True, help="output .npy file")
    p.add_argument("--kv-policy", default=None, help="e.g. window:512,sinks:4,compress:16")
    p.add_argument("--attention", default="naive", choices=("naive", "absorbed"))
    p.add_argument("--mode", default="prefill", choices=("prefill", "decode"))
    p.set_defaults(func=cmd_logits)
    c = sub.add_parser("compare", help="max abs diff of two .npy files")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--atol", type=float, default=1e-4)
    c.set_defaults(func=cmd_compare)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, KeyError, FileNotFoundError) as err:
        print(f"run_reference: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
