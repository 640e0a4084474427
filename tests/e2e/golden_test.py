"""End-to-end golden test: mlarun's logits against the independent NumPy reference.

  /usr/bin/python3 tests/e2e/golden_test.py --mlarun build/bin/mlarun --workdir DIR

For every preset, mlarun writes a random Hugging Face-layout model
(`mlarun make-model --preset NAME --out DIR --dtype D --seed N`); both mlarun
(`mlarun logits --model DIR --ids ... --out F.npy --mode M --attention A
[--kv-policy P]`) and reference/run_reference.py's float64 implementation
(DeepSeek-V2 arXiv 2405.04434, DeepSeek-V3 arXiv 2412.19437, YaRN arXiv
2309.00071, Llama/Mistral/Qwen2; see reference/README.md) compute logits for the
same token ids, and the max abs difference must be <= --atol (default 1e-4).

Presets whose make-model fails with "unknown preset" are skipped (SKIP); a
kv-policy case that mlarun rejects as unsupported is skipped too. Any other
error or difference over tolerance is a FAIL naming preset/dtype/mode/case, and
the script exits 1.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "reference"))

from kv_policy import parse_kv_policy  # noqa: E402
from run_reference import load_model  # noqa: E402

PRESETS = ["tiny-v2-lite", "tiny-v2", "tiny-v3", "tiny-llama-mha", "tiny-llama-gqa",
           "tiny-llama-mqa", "tiny-mistral-swa", "tiny-qwen2"]
BF16_PRESETS = ["tiny-v3"]   # also checked with --dtype bf16 and f16 (and fp8 with --with-fp8)
# 16-bit weights are also read through `--load copy`, which packs them into 16-row groups for the
# SIMD kernels (kernels/packed_bf16.h) where the CPU's kernel table reads that layout fastest.
PACKED_DTYPES = ["bf16", "f16"]
POLICY_PRESETS = ["tiny-v3", "tiny-v2", "tiny-v2-lite"]   # the first one that exists is used
EXTRA_POLICY_PRESETS = ["tiny-llama-gqa", "tiny-mistral-swa"]  # policies on the GQA family too
POLICIES = ["window:8", "window:8,sinks:2", "window:6,sinks:2,compress:3"]
MODES = ["prefill", "decode"]
ATTENTIONS = ["naive", "absorbed"]
N_IDS, N_POLICY_IDS = 24, 40
SEED = 1
TIMEOUT_S = 600


_REFERENCE_MODELS = {}


def reference_logits(model_dir, ids, policy, attention, mode):
    """float64 reference logits; each model directory is loaded once."""
    if model_dir not in _REFERENCE_MODELS:
        _REFERENCE_MODELS[model_dir] = load_model(model_dir)
    model = _REFERENCE_MODELS[model_dir]
    run_model = model.forward if mode == "prefill" else model.decode
    return run_model(ids, parse_kv_policy(policy), attention)


class Results:
    def __init__(self):
        self.passed, self.skipped, self.failed = [], [], []

    def ok(self, name, detail):
        self.passed.append(name)
        print(f"PASS {name}: {detail}", flush=True)

    def skip(self, name, why):
        self.skipped.append(name)
        print(f"SKIP {name}: {why}", flush=True)

    def fail(self, name, why):
        self.failed.append(name)
        print(f"FAIL {name}: {why}", flush=True)


def run(cmd):
    """Run a command; returns (returncode, stdout, stderr)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {TIMEOUT_S}s: {' '.join(cmd)}"
    return proc.returncode, proc.stdout, proc.stderr


def tail(text, n=600):
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def token_ids(vocab_size, count, salt):
    """Deterministic ids in [0, vocab_size): a fixed LCG, plus a repeated token
    and the extreme ids 0 and vocab_size-1."""
    ids, state = [], 12345 + salt
    for _ in range(count):
        state = (state * 1103515245 + 12345) % (2 ** 31)
        ids.append(state % vocab_size)
    ids[1], ids[-1], ids[count // 2] = 0, vocab_size - 1, ids[2]
    return ids


def is_unknown_preset(stderr):
    return "unknown preset" in stderr.lower()


def is_unsupported_policy(stderr):
    text = stderr.lower()
    mentions = any(word in text for word in ("kv-policy", "kv_policy", "kv policy"))
    return mentions and any(word in text for word in ("unsupported", "not supported", "not implemented"))


def make_model(mlarun, preset, dtype, out_dir):
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    _REFERENCE_MODELS.pop(out_dir, None)
    return run([mlarun, "make-model", "--preset", preset, "--out", out_dir,
                "--dtype", dtype, "--seed", str(SEED)])


def mlarun_logits(mlarun, model_dir, ids, out_file, mode, attention, policy, load=None):
    cmd = [mlarun, "logits", "--model", model_dir, "--ids", ",".join(map(str, ids)),
           "--out", out_file, "--mode", mode, "--attention", attention]
    if policy:
        cmd += ["--kv-policy", policy]
    if load:
        cmd += ["--load", load]
    if os.path.exists(out_file):
        os.remove(out_file)
    return run(cmd)


def compare_case(results, name, mlarun, model_dir, ids, vocab, mode, attention, policy, atol, work,
                 load=None):
    """Run one mlarun configuration and compare it with the reference."""
    tag = name.replace("/", "_").replace(" ", "_").replace(":", "").replace(",", "_")
    out_file = os.path.join(work, f"{tag}.npy")
    try:
        expected = reference_logits(model_dir, ids, policy, attention, mode)
    except Exception as err:                                # noqa: BLE001 - report and go on
        results.fail(name, f"reference failed: {type(err).__name__}: {err}")
        return
    code, _, err = mlarun_logits(mlarun, model_dir, ids, out_file, mode, attention, policy, load)
    if code != 0:
        if policy and is_unsupported_policy(err):
            results.skip(name, f"mlarun: {tail(err, 200)}")
        else:
            results.fail(name, f"mlarun logits exited {code}: {tail(err)}")
        return
    try:
        got = np.load(out_file)
    except Exception as load_err:                           # noqa: BLE001
        results.fail(name, f"cannot read {out_file}: {load_err}")
        return
    if got.shape != (len(ids), vocab):
        results.fail(name, f"logits shape {list(got.shape)}, expected {[len(ids), vocab]}")
        return
    if got.dtype != np.float32:
        results.fail(name, f"logits dtype {got.dtype}, expected float32")
        return
    diff = np.abs(got.astype(np.float64) - expected)
    worst = float(np.max(diff))
    if not np.isfinite(worst) or worst > atol:
        worst_index = int(np.argmax(np.where(np.isfinite(diff), diff, np.inf)))
        token, column = np.unravel_index(worst_index, diff.shape)
        results.fail(name, f"max abs diff {worst:.3e} > atol {atol:g} (token {token}, vocab id {column}: "
                           f"mlarun {got[token, column]:.6g}, reference {expected[token, column]:.6g})")
    else:
        results.ok(name, f"max abs diff {worst:.3e} (max |logit| {float(np.max(np.abs(expected))):.3g})")


def read_vocab(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as handle:
        return int(json.load(handle)["vocab_size"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="mlarun vs NumPy reference logits")
    parser.add_argument("--mlarun", required=True, help="path to the mlarun binary")
    parser.add_argument("--workdir", required=True, help="scratch directory for models and logits")
    parser.add_argument("--atol", type=float, default=1e-4, help="max abs logit difference")
    parser.add_argument("--presets", default=None, help="comma-separated subset of presets")
    parser.add_argument("--with-fp8", action="store_true",
                        help=f"also check --dtype fp8 for {', '.join(BF16_PRESETS)} (opt-in)")
    args = parser.parse_args(argv)

    mlarun = os.path.abspath(args.mlarun)
    if not os.access(mlarun, os.X_OK):
        print(f"FAIL: mlarun binary not found or not executable: {mlarun}")
        return 1
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    presets = args.presets.split(",") if args.presets else PRESETS
    results = Results()
    made = {}
    start = time.time()

    for preset in presets:
        extra = (["bf16", "f16"] + (["fp8"] if args.with_fp8 else [])) if preset in BF16_PRESETS else []
        for dtype in ["f32"] + extra:
            model_dir = os.path.join(work, f"{preset}-{dtype}")
            code, _, err = make_model(mlarun, preset, dtype, model_dir)
            if code != 0:
                if is_unknown_preset(err):
                    results.skip(f"{preset}/{dtype}", "make-model: unknown preset")
                else:
                    results.fail(f"{preset}/{dtype} make-model", f"exited {code}: {tail(err)}")
                continue
            try:
                vocab = read_vocab(model_dir)
            except Exception as read_err:                   # noqa: BLE001
                results.fail(f"{preset}/{dtype} make-model", f"bad config.json: {read_err}")
                continue
            made[(preset, dtype)] = (model_dir, vocab)
            ids = token_ids(vocab, N_IDS, salt=len(preset))
            for load in [None] + (["copy"] if dtype in PACKED_DTYPES else []):
                suffix = f"/load-{load}" if load else ""
                for mode in MODES:
                    for attention in ATTENTIONS:
                        compare_case(results, f"{preset}/{dtype}/{mode}/{attention}/full{suffix}",
                                     mlarun, model_dir, ids, vocab, mode, attention, None, args.atol,
                                     work, load)

    policy_preset = next((p for p in POLICY_PRESETS if (p, "f32") in made), None)
    if policy_preset is None:
        results.skip("kv-policies", "no DeepSeek preset available")
    policy_presets = ([policy_preset] if policy_preset else []) + [
        p for p in EXTRA_POLICY_PRESETS if (p, "f32") in made]
    for preset in policy_presets:
        model_dir, vocab = made[(preset, "f32")]
        ids = token_ids(vocab, N_POLICY_IDS, salt=7)
        # The GQA family has a single attention path; the MLA flag is ignored there.
        attentions = ATTENTIONS if preset == policy_preset else ATTENTIONS[:1]
        for policy in POLICIES:
            for mode in MODES:
                for attention in attentions:
                    compare_case(results, f"{preset}/f32/{mode}/{attention}/{policy}", mlarun,
                                 model_dir, ids, vocab, mode, attention, policy, args.atol, work)

    print(f"\n{len(results.passed)} passed, {len(results.skipped)} skipped, {len(results.failed)} failed "
          f"({time.time() - start:.1f}s)")
    if not results.passed and not results.failed:
        print("FAIL: nothing was compared (every preset skipped)")
        return 1
    for name in results.failed:
        print(f"  failed: {name}")
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main())
