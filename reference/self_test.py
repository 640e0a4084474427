"""Self-tests of the mlarun NumPy reference (run: /usr/bin/python3 reference/self_test.py).

Checks, with expected values computed by hand here (not by the code under test):
  * bf16 / e4m3fn bit patterns (OCP OFP8 spec), FP8 block dequantisation
    (DeepSeek-V3, arXiv 2412.19437 sec. 3.3.2), safetensors round trip, sharded
    loading == single-file loading;
  * YaRN inv_freq / cos-sin factor / softmax scale (arXiv 2309.00071 with the
    DeepSeek-V2 parameterisation), interleaved and rotate_half RoPE;
  * MoE gates (arXiv 2405.04434 sec. 2.2, arXiv 2412.19437 sec. 2.1.2): greedy,
    group_limited_greedy, noaux_tc (bias for selection only), v2/v3 weight rules;
  * MLA (arXiv 2405.04434 sec. 2.1): naive == absorbed (1e-10), token-by-token
    decode with an explicit bounded latent cache == full forward, for every
    KV-cache policy;
  * KV policies: window >= n_tokens == full, hand-checked compress case, streaming
    cache == definition;
  * Llama family: GQA/MQA == MHA with repeated K/V heads, Mistral window, Qwen2 bias.
Exits non-zero on the first failing group (all groups are run and reported).
"""

import math
import os
import subprocess
import sys
import tempfile
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_test_model as mtm  # noqa: E402
from common_np import (rope_interleaved, rope_rotate_half, softmax, yarn_correction_dim,  # noqa: E402
                       yarn_inv_freq)
from deepseek_ref import DeepseekConfig, DeepseekModel, select_experts  # noqa: E402
from kv_policy import BoundedCache, KVPolicy, gather_entries, parse_kv_policy, visible_entries  # noqa: E402
from llama_ref import LlamaModel  # noqa: E402
from run_reference import model_class_for  # noqa: E402
from safetensors_np import (decode_bf16, decode_e4m3, dequantize_fp8_blockwise, encode_bf16,  # noqa: E402
                            encode_e4m3, load_model_dir, read_safetensors_raw, write_safetensors)

DS_PRESETS = ("ds-v2-lite", "ds-v2", "ds-v3", "ds-v3-misc")
LLAMA_PRESETS = ("llama-mha", "llama-gqa", "llama-mqa", "llama3-misc", "mistral-swa", "qwen2-bias")
POLICIES = ("window:4", "window:4,sinks:2", "window:3,sinks:2,compress:3",
            "window:5,compress:2", "window:2,sinks:1,compress:4")
IDS = [3, 17, 42, 8, 8, 65, 1, 0, 77, 23, 5, 60, 31, 14, 9, 2]


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def close(a, b, atol, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    check(a.shape == b.shape, f"{what}: shape {a.shape} vs {b.shape}")
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    check(diff <= atol, f"{what}: max abs diff {diff:.3e} > {atol:g}")
    return diff


def model_of(preset, seed=0, **overrides):
    config = mtm.preset_config(preset)
    config.update(overrides)
    weights = mtm.random_weights(config, seed)
    return model_class_for(config)(config, weights), config, weights


# ----------------------------------------------------------------------------
# formats
# ----------------------------------------------------------------------------

def test_bf16_fp8_bits():
    bf16 = {0x3F80: 1.0, 0xC000: -2.0, 0x4049: 3.140625, 0x0000: 0.0, 0x3E80: 0.25,
            0x0001: 2.0 ** -133, 0x7F80: math.inf, 0x4780: 65536.0}
    for bits, value in bf16.items():
        check(decode_bf16(np.array([bits]))[0] == value, f"bf16 0x{bits:04X} != {value}")
    check(np.isnan(decode_bf16(np.array([0x7FC0]))[0]), "bf16 0x7FC0 must be NaN")
    # round to nearest even: 1 + 2^-8 is halfway between 0x3F80 and 0x3F81 -> 0x3F80
    check(list(encode_bf16(np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, -2.0]))) ==
          [0x3F80, 0x3F82, 0xC000], "bf16 encode rounding")
    e4m3 = {0x00: 0.0, 0x01: 2.0 ** -9, 0x07: 7 / 8 * 2.0 ** -6, 0x08: 2.0 ** -6, 0x38: 1.0,
            0x3C: 1.5, 0x40: 2.0, 0x7E: 448.0, 0xB8: -1.0, 0xFE: -448.0, 0x30: 0.5,
            0x57: 15.0, 0x5F: 30.0}
    for code, value in e4m3.items():
        check(decode_e4m3(np.array([code]))[0] == value, f"e4m3 0x{code:02X} != {value}")
    for code in (0x7F, 0xFF):
        check(np.isnan(decode_e4m3(np.array([code]))[0]), f"e4m3 0x{code:02X} must be NaN")
    finite = [c for c in range(256) if c not in (0x7F, 0xFF, 0x80)]
    check(list(encode_e4m3(decode_e4m3(np.array(finite)))) == finite, "e4m3 encode(decode(c)) != c")
    # ties to even code: 1.0625 between 0x38 and 0x39; 1.1875 between 0x39 and 0x3A; saturation
    check(list(encode_e4m3(np.array([1.0625, 1.1875, 1000.0, -1000.0]))) == [0x38, 0x3A, 0x7E, 0xFE],
          "e4m3 encode rounding/saturation")


def test_fp8_block_dequant():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 0x7E, size=(20, 36)).astype(np.uint8)   # finite positive codes
    scale_inv = rng.uniform(0.5, 2.0, size=(2, 3))                    # ceil(20/16), ceil(36/16)
    w = dequantize_fp8_blockwise(codes, scale_inv, (16, 16))
    for r, c in ((0, 0), (15, 15), (16, 15), (17, 33), (19, 35), (3, 32)):
        expected = decode_e4m3(np.array([codes[r, c]]))[0] * scale_inv[r // 16, c // 16]
        check(w[r, c] == expected, f"fp8 block dequant at ({r},{c})")
    try:
        dequantize_fp8_blockwise(codes, scale_inv[:, :2], (16, 16))
        check(False, "wrong scale_inv shape must raise")
    except ValueError:
        pass


def test_safetensors_roundtrip(tmp):
    path = os.path.join(tmp, "t.safetensors")
    a32 = np.arange(6, dtype=np.float64).reshape(2, 3) / 4
    codes = np.array([[0x38, 0x40], [0xB8, 0x7E]], dtype=np.uint8)
    write_safetensors(path, {"a": ("F32", a32), "b": ("BF16", np.array([1.0, -2.0, 0.25])),
                             "c": ("F16", np.array([0.5, 3.0])), "d": ("F8_E4M3", codes)},
                      {"format": "pt"})
    raw = read_safetensors_raw(path)
    with open(path, "rb") as handle:
        header_len = int.from_bytes(handle.read(8), "little")
    check(header_len % 8 == 0, "header should be padded to 8 bytes")
    check(raw["a"][0] == "F32" and np.array_equal(raw["a"][1], a32), "F32 round trip")
    check(list(raw["b"][1]) == [0x3F80, 0xC000, 0x3E80], "BF16 bit patterns on disk")
    check(list(raw["c"][1]) == [0.5, 3.0] and raw["d"][1].tolist() == codes.tolist(), "F16/F8 round trip")


def test_sharded_and_dtypes(tmp):
    config = mtm.preset_config("ds-v3")
    weights = mtm.random_weights(config, 3)
    loaded = {}
    for name, dtype, shards in (("f32", "f32", 1), ("f32x3", "f32", 3), ("fp8", "fp8", 1),
                                ("fp8x4", "fp8", 4), ("bf16", "bf16", 1), ("bf16x2", "bf16", 2)):
        out = os.path.join(tmp, name)
        mtm.write_model(out, config, weights, dtype, shards, fp8_block=16)
        check(os.path.exists(os.path.join(out, "model.safetensors.index.json")) == (shards > 1),
              f"{name}: index file presence")
        loaded[name] = load_model_dir(out)[1]
    for single, sharded in (("f32", "f32x3"), ("fp8", "fp8x4"), ("bf16", "bf16x2")):
        check(sorted(loaded[single]) == sorted(loaded[sharded]), f"{sharded}: tensor names differ")
        for key in loaded[single]:
            check(np.array_equal(loaded[single][key], loaded[sharded][key]), f"{sharded}: {key} differs")
    for key, value in weights.items():
        check(np.array_equal(loaded["f32"][key], value), f"f32 load of {key}")
        check(np.max(np.abs(loaded["bf16"][key] - value)) <= np.max(np.abs(value)) * 2 ** -8,
              f"bf16 load of {key} too far")
    check(not any(k.endswith("_scale_inv") for k in loaded["fp8"]), "scale_inv must be consumed")
    w = weights["model.layers.1.self_attn.kv_b_proj.weight"]
    wq = loaded["fp8"]["model.layers.1.self_attn.kv_b_proj.weight"]
    check(np.max(np.abs(wq - w)) <= np.max(np.abs(w)) * 2 ** -3, "fp8 dequantised weight too far")
    raw = read_safetensors_raw(os.path.join(tmp, "fp8", "model.safetensors"))
    dtype, codes = raw["model.layers.1.self_attn.kv_b_proj.weight"]
    scale = raw["model.layers.1.self_attn.kv_b_proj.weight_scale_inv"][1]
    check(dtype == "F8_E4M3" and scale.shape == (math.ceil(w.shape[0] / 16), math.ceil(w.shape[1] / 16)),
          "fp8 tensor/scale layout")
    check(wq[20, 5] == decode_e4m3(np.array([codes[20, 5]]))[0] * float(scale[1, 0]), "fp8 element formula")
    for dtype in ("bf16", "fp8"):
        model = model_class_for(config)(*load_model_dir(os.path.join(tmp, dtype)))
        check(np.all(np.isfinite(model.forward(IDS[:6]))), f"{dtype} model forward not finite")


# ----------------------------------------------------------------------------
# RoPE / YaRN
# ----------------------------------------------------------------------------

def test_yarn_by_hand():
    base = dict(mtm.preset_config("ds-v2"), qk_nope_head_dim=12, qk_rope_head_dim=8)
    # rope_dim 8, theta 1e4 -> freq_extra = 10^-i, i = 0..3.
    # correction_dim(32) = 8 ln(64/(64 pi)) / (2 ln 1e4) = -0.497 -> low = max(-1, 0) = 0
    # correction_dim(1)  = 8 ln(64/(2 pi))  / (2 ln 1e4) =  1.008 -> high = min(2, 7) = 2
    # ramp = [0, 0.5, 1, 1]; inv_freq = extra*(1-ramp) + extra/4*ramp
    expected_inv_freq = [1.0, 0.1 * 0.5 + 0.1 / 4 * 0.5, 0.01 / 4, 0.001 / 4]
    ln4 = 1.3862943611198906
    cases = [  # (mscale, mscale_all_dim, cos/sin factor, softmax scale)
        (0.707, 0.707, 1.0, (0.1 * 0.707 * ln4 + 1) ** 2 / math.sqrt(20)),
        (1.0, 0.0, 0.1 * ln4 + 1, 1 / math.sqrt(20)),
        (1.0, 1.0, 1.0, (0.1 * ln4 + 1) ** 2 / math.sqrt(20)),
    ]
    for mscale, mscale_all_dim, cos_factor, scale in cases:
        cfg = DeepseekConfig(dict(base, rope_scaling=dict(type="yarn", factor=4.0,
                                                          original_max_position_embeddings=64,
                                                          beta_fast=32, beta_slow=1, mscale=mscale,
                                                          mscale_all_dim=mscale_all_dim)))
        close(cfg.inv_freq, expected_inv_freq, 1e-15, "yarn inv_freq")
        close(cfg.rope_mscale, cos_factor, 1e-15, f"yarn cos/sin factor (mscale {mscale}/{mscale_all_dim})")
        close(cfg.softmax_scale, scale, 1e-15, f"yarn softmax scale (mscale {mscale}/{mscale_all_dim})")
    cfg = DeepseekConfig(dict(base, rope_scaling=None))
    close(cfg.inv_freq, [1.0, 0.1, 0.01, 0.001], 1e-15, "plain inv_freq")
    close(cfg.softmax_scale, 1 / math.sqrt(20), 0, "plain softmax scale")
    # DeepSeek-V2 release (rope dim 64, factor 40, original 4096): ramp from dim 10 to 23.
    check(math.floor(yarn_correction_dim(32, 64, 10000, 4096)) == 10 and
          math.ceil(yarn_correction_dim(1, 64, 10000, 4096)) == 23, "DeepSeek-V2 YaRN range")
    ramp = [min(max((i - 10) / 13, 0.0), 1.0) for i in range(32)]
    extra = [10000.0 ** (-2 * i / 64) for i in range(32)]
    close(yarn_inv_freq(64, 10000.0, 40.0, 4096, 32, 1),
          [e * (1 - r) + e / 40 * r for e, r in zip(extra, ramp)], 1e-15, "DeepSeek-V2 YaRN inv_freq")
    try:
        DeepseekConfig(dict(base, rope_scaling=dict(type="dynamic", factor=2.0)))
        check(False, "non-yarn rope_scaling must raise for DeepSeek")
    except ValueError as err:
        check("dynamic" in str(err), "error should name the rope_scaling type")


def test_rope_layouts():
    c, s = math.cos(1.0), math.sin(1.0)
    c2, s2 = math.cos(0.0625), math.sin(0.0625)
    x = np.array([1.0, 2.0, 3.0, 4.0])
    cos, sin = np.array([c, c2]), np.array([s, s2])
    # interleaved pairs (1,2) and (3,4)
    close(rope_interleaved(x, cos, sin), [c - 2 * s, s + 2 * c, 3 * c2 - 4 * s2, 3 * s2 + 4 * c2], 1e-15,
          "interleaved rope")
    # rotate_half pairs (1,3) and (2,4)
    close(rope_rotate_half(x, cos, sin), [c - 3 * s, 2 * c2 - 4 * s2, s + 3 * c, 2 * s2 + 4 * c2], 1e-15,
          "rotate_half rope")


# ----------------------------------------------------------------------------
# MoE gates
# ----------------------------------------------------------------------------

def gate(logits, **kw):
    args = dict(scoring_func="softmax", topk_method="greedy", top_k=2, n_group=None, topk_group=None,
                correction_bias=None, norm_topk_prob=False, routed_scaling_factor=1.0,
                model_type="deepseek_v2")
    args.update(kw)
    idx, w = select_experts(np.asarray(logits, dtype=np.float64), **args)
    return list(int(i) for i in idx), w


def test_gates():
    logits = np.log([1.0, 2.0, 4.0, 1.0])                # softmax -> [1, 2, 4, 1] / 8
    idx, w = gate(logits, routed_scaling_factor=1.5)
    check(idx == [2, 1], "greedy picks"), close(w, [0.75, 0.375], 1e-15, "v2 no-norm: scaled")
    idx, w = gate(logits, norm_topk_prob=True, routed_scaling_factor=1.5)
    close(w, [2 / 3, 1 / 3], 1e-15, "v2 norm: normalised, NOT scaled")
    idx, w = gate(logits, norm_topk_prob=True, routed_scaling_factor=2.5, model_type="deepseek_v3")
    close(w, [5 / 3, 5 / 6], 1e-15, "v3 norm: normalised then scaled")
    idx, w = gate(logits, top_k=1, norm_topk_prob=True, routed_scaling_factor=2.0)
    check(idx == [2], "top-1"), close(w, [1.0], 1e-15, "v2 top-1 with norm flag: scaled")
    idx, w = gate(logits, top_k=1, norm_topk_prob=True, routed_scaling_factor=2.5, model_type="deepseek_v3")
    close(w, [1.25], 1e-15, "v3 top-1: not normalised, scaled")
    idx, _ = gate(np.zeros(4))
    check(idx == [0, 1], f"ties must pick lower indices, got {idx}")
    idx, _ = gate([0.0, 1.0, 1.0, 1.0], top_k=2)
    check(idx == [1, 2], f"ties must pick lower indices, got {idx}")
    # group_limited_greedy: 4 groups of 2; group max = [5, 2, 6, 1] -> keep groups 2, 0
    p = np.array([5.0, 1.0, 2.0, 2.0, 6.0, 0.5, 1.0, 1.0])
    idx, w = gate(np.log(p), topk_method="group_limited_greedy", top_k=3, n_group=4, topk_group=2)
    check(idx == [4, 0, 1], f"group_limited_greedy picks {idx} (experts 2,3 are in dropped groups)")
    close(w, p[[4, 0, 1]] / p.sum(), 1e-15, "group_limited_greedy weights")
    # noaux_tc: sigmoid scores s, bias changes the choice only.
    s = np.array([0.9, 0.1, 0.2, 0.3, 0.6, 0.55, 0.5, 0.4])
    bias = np.array([0.0, 0.0, 0.5, 0.5, 0.0, 0.0, -0.3, 0.0])
    # choice = [.9 .1 .7 .8 .6 .55 .2 .4]; top-2 sums per group = [1.0, 1.5, 1.15, 0.6] -> groups 1, 2
    # (max per group would give groups 0, 1; unbiased sums would give groups 2, 0)
    # among experts 2..5 by choice: 3 (.8), 2 (.7); weights = unbiased [.3, .2] -> norm -> * 2.5
    idx, w = gate(np.log(s / (1 - s)), scoring_func="sigmoid", topk_method="noaux_tc", n_group=4,
                  topk_group=2, correction_bias=bias, norm_topk_prob=True, routed_scaling_factor=2.5,
                  model_type="deepseek_v3")
    check(idx == [3, 2], f"noaux_tc picks {idx}")
    close(w, [1.5, 1.0], 1e-14, "noaux_tc weights use unbiased scores")
    idx, w = gate(np.log(s / (1 - s)), scoring_func="sigmoid", topk_method="noaux_tc", n_group=4,
                  topk_group=2, correction_bias=np.zeros(8), norm_topk_prob=False,
                  routed_scaling_factor=2.5, model_type="deepseek_v3")
    check(idx == [0, 4], f"noaux_tc without bias picks {idx}")
    close(w, [2.25, 1.5], 1e-14, "noaux_tc no-norm weights scaled")


# ----------------------------------------------------------------------------
# KV policies
# ----------------------------------------------------------------------------

def test_policy_parsing():
    check(parse_kv_policy(None) == KVPolicy() and parse_kv_policy("full") == KVPolicy(), "full")
    check(parse_kv_policy("compress:16, sinks:4,window:512") == KVPolicy(512, 4, 16), "order free")
    for bad, word in (("window:0", "window"), ("window:4,compress:1", "compress"), ("compress:4", "compress"),
                      ("sink:2", "sink"), ("window:x", "window"), ("window:3,window:4", "window"),
                      ("sinks:-1", "sinks")):
        try:
            parse_kv_policy(bad)
            check(False, f"{bad!r} must raise")
        except ValueError as err:
            check(word in str(err), f"error for {bad!r} should name {word!r}: {err}")


def test_visible_sets_by_hand():
    # i=12, W=3, S=2, K=3: out-of-window non-sink [2..9] (m=8) -> groups {2,3,4}, {5,6,7}, raw 8, 9
    raw, groups = visible_entries(12, KVPolicy(3, 2, 3))
    check(raw == [0, 1, 8, 9, 10, 11, 12] and groups == [2, 5], f"compress case: {raw} {groups}")
    check(visible_entries(4, KVPolicy(3, 2, 3)) == ([0, 1, 2, 3, 4], []), "nothing out of window yet")
    check(visible_entries(1, KVPolicy(1, 4, None)) == ([0, 1], []), "sinks never past i")
    check(visible_entries(6, KVPolicy(2, 0, None)) == ([5, 6], []), "plain window")
    check(visible_entries(6, KVPolicy(2, 0, 2)) == ([4, 5, 6], [0, 2]), "compress, no sinks")
    # scalar rows [key, value], q = 1: i=5, W=2, S=1, K=2 -> sink 0, group {1,2} (mean k=2, v=3,
    # + ln 2), leftover 3, window 4, 5
    rows = np.array([[0.0, 1.0], [1.0, 2.0], [3.0, 4.0], [2.0, 8.0], [0.0, 16.0], [1.0, 32.0]])
    entries, bias = gather_entries(rows, 5, KVPolicy(2, 1, 2))
    out = softmax(entries[:, 0] + bias) @ entries[:, 1]
    e = math.e
    expected = (1 + 2 * e ** 2 * 3 + e ** 2 * 8 + 16 + e * 32) / (1 + 2 * e ** 2 + e ** 2 + 1 + e)
    close(out, expected, 1e-14, "hand-computed compressed attention")
    # identical rows inside every group: compression changes nothing
    rng = np.random.default_rng(5)
    rows = np.repeat(rng.standard_normal((6, 2)), 3, axis=0)          # groups of 3 equal rows
    rows = np.concatenate([rng.standard_normal((1, 2)), rows])        # one sink first
    for i in range(len(rows)):
        full_e, full_b = gather_entries(rows, i, KVPolicy())
        comp_e, comp_b = gather_entries(rows, i, KVPolicy(3, 1, 3))
        close(softmax(comp_e[:, 0] + comp_b) @ comp_e[:, 1], softmax(full_e[:, 0] + full_b) @ full_e[:, 1],
              1e-14, f"equal-row groups at i={i}")


def test_streaming_cache_matches_definition():
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((30, 3))
    for text in POLICIES + ("full", "window:1", "window:1,sinks:3,compress:2", "window:7,sinks:40"):
        policy = parse_kv_policy(text)
        cache = BoundedCache(policy)
        for i in range(len(rows)):
            cache.append(i, rows[i])
            got_rows, got_bias = cache.entries()
            want_rows, want_bias = gather_entries(rows, i, policy)
            key = lambda r, b: sorted(map(tuple, np.column_stack([r, b]).round(12)))  # noqa: E731
            check(key(got_rows, got_bias) == key(want_rows, want_bias),
                  f"{text}: cache != definition at i={i}")
            if policy.window is not None:
                k = policy.compress or 1
                bound = policy.sinks + policy.window + (k - 1) + (i // k if policy.compress else 0)
                check(cache.n_rows() <= bound, f"{text}: cache holds {cache.n_rows()} rows at i={i}")


# ----------------------------------------------------------------------------
# whole models
# ----------------------------------------------------------------------------

def test_mla_paths_and_decode():
    for preset in DS_PRESETS:
        model, config, _ = model_of(preset)
        reference = model.forward(IDS, KVPolicy(), "naive")
        for text in ("full",) + POLICIES:
            policy = parse_kv_policy(text)
            naive = model.forward(IDS, policy, "naive")
            close(model.forward(IDS, policy, "absorbed"), naive, 1e-10, f"{preset} {text}: absorbed vs naive")
            for attention in ("naive", "absorbed"):
                close(model.decode(IDS, policy, attention), naive, 1e-10,
                      f"{preset} {text}: decode ({attention}) vs prefill")
            if text == "full":
                check(model.last_cache_rows == [len(IDS)] * config["num_hidden_layers"], "full cache size")
                row_width = model.last_caches[0].entries()[0].shape[1:]
                check(row_width == (config["kv_lora_rank"] + config["qk_rope_head_dim"],),
                      f"{preset}: latent cache row shape {row_width}")
            else:
                check(np.max(np.abs(naive - reference)) > 1e-6, f"{preset} {text}: policy had no effect")
        n = len(IDS)
        for text in (f"window:{n}", f"window:{n + 5},sinks:3", f"window:{n},sinks:2,compress:4"):
            close(model.forward(IDS, parse_kv_policy(text)), reference, 1e-12, f"{preset}: {text} == full")
        check(np.all(np.isfinite(reference)) and np.std(reference) > 0.1, f"{preset}: degenerate logits")


def test_deepseek_structure():
    cfg = DeepseekConfig(mtm.preset_config("ds-v2"))
    check([cfg.is_moe_layer(i) for i in range(4)] == [False, False, True, False], "ds-v2 MoE layer pattern")
    cfg = DeepseekConfig(mtm.preset_config("ds-v3"))
    check([cfg.is_moe_layer(i) for i in range(3)] == [False, True, True], "ds-v3 MoE layer pattern")
    # MTP layers (index >= num_hidden_layers) are ignored
    model, config, weights = model_of("ds-v3-misc")
    extra = dict(weights, **{"model.layers.3.input_layernorm.weight": np.ones(config["hidden_size"])})
    close(DeepseekModel(config, extra).forward(IDS[:5]), model.forward(IDS[:5]), 0, "MTP layer ignored")
    # tie_word_embeddings uses embed_tokens as lm_head
    x = model.forward(IDS[:3])
    check(np.array_equal(model.lm_head, weights["model.embed_tokens.weight"]), "tied lm_head")
    check(x.shape == (3, config["vocab_size"]), "logits shape")


def repeat_kv_weights(config, weights):
    """GQA/MQA weights -> equivalent MHA weights (each query head gets its own copy)."""
    c = config
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    n_rep = c["num_attention_heads"] // c["num_key_value_heads"]
    out = dict(weights)
    for i in range(c["num_hidden_layers"]):
        for proj in ("k", "v"):
            for kind in ("weight", "bias"):
                name = f"model.layers.{i}.self_attn.{proj}_proj.{kind}"
                if name in weights:
                    w = weights[name].reshape(c["num_key_value_heads"], head_dim, -1)
                    out[name] = np.repeat(w, n_rep, axis=0).reshape((-1,) + weights[name].shape[1:])
    return dict(c, num_key_value_heads=c["num_attention_heads"]), out


def test_llama_family():
    for preset in LLAMA_PRESETS:
        model, config, weights = model_of(preset)
        full = model.forward(IDS)
        for text in ("full",) + POLICIES:
            policy = parse_kv_policy(text)
            close(model.decode(IDS, policy), model.forward(IDS, policy), 1e-10, f"{preset} {text}: decode")
        mha_config, mha_weights = repeat_kv_weights(config, weights)
        close(LlamaModel(mha_config, mha_weights).forward(IDS), full, 1e-12, f"{preset}: GQA vs repeated MHA")
        check(np.all(np.isfinite(full)) and np.std(full) > 0.1, f"{preset}: degenerate logits")
    # GQA code path with n_head_kv == n_heads equals an explicit MHA model
    model, config, weights = model_of("llama-mha")
    close(LlamaModel(dict(config, num_key_value_heads=None), weights).forward(IDS), model.forward(IDS), 0,
          "default num_key_value_heads")
    # Mistral's own window == policy window on an unwindowed model; min() with a policy window
    model, config, weights = model_of("mistral-swa")
    plain = LlamaModel(dict(config, model_type="llama", architectures=["LlamaForCausalLM"]), weights)
    swa = model.forward(IDS)
    close(plain.forward(IDS, parse_kv_policy("window:5")), swa, 1e-12, "mistral sliding_window")
    close(model.forward(IDS, parse_kv_policy("window:9")), swa, 1e-12, "min(policy, config) window")
    close(plain.forward(IDS, parse_kv_policy("window:3")), model.forward(IDS, parse_kv_policy("window:3")),
          1e-12, "policy window smaller than config window")
    check(np.max(np.abs(plain.forward(IDS) - swa)) > 1e-6, "sliding window had no effect")
    # Qwen2: window ignored unless use_sliding_window; biases are used
    model, config, weights = model_of("qwen2-bias")
    on = LlamaModel(dict(config, use_sliding_window=True), weights).forward(IDS)
    close(on, model.forward(IDS, parse_kv_policy("window:4")), 1e-12, "qwen2 use_sliding_window")
    check(np.max(np.abs(on - model.forward(IDS))) > 1e-6, "qwen2 window should be off by default")
    zero_bias = {k: (np.zeros_like(v) if k.endswith("_proj.bias") else v) for k, v in weights.items()}
    check(np.max(np.abs(LlamaModel(config, zero_bias).forward(IDS) - model.forward(IDS))) > 1e-6,
          "qwen2 biases had no effect")
    try:
        LlamaModel(dict(config, rope_scaling={"rope_type": "longrope", "factor": 2.0}), weights)
        check(False, "unsupported rope_scaling must raise")
    except ValueError as err:
        check("longrope" in str(err), "error should name the rope_scaling type")


def test_cli(tmp):
    model_dir = os.path.join(tmp, "cli-model")
    mtm.make_model("ds-v2-lite", model_dir, "f32", seed=4)
    script = os.path.join(HERE, "run_reference.py")
    outs = []
    for mode, attention in (("prefill", "naive"), ("decode", "absorbed")):
        out = os.path.join(tmp, f"cli-{mode}.npy")
        subprocess.run([sys.executable, script, "logits", "--model", model_dir, "--ids", "1,2,3,50",
                        "--out", out, "--mode", mode, "--attention", attention,
                        "--kv-policy", "window:2,sinks:1"], check=True, capture_output=True)
        outs.append(out)
    arr = np.load(outs[0])
    check(arr.dtype == np.float32 and arr.shape == (4, 96), f"CLI logits {arr.dtype} {arr.shape}")
    ok = subprocess.run([sys.executable, script, "compare", *outs, "--atol", "1e-5"], capture_output=True)
    check(ok.returncode == 0, "compare of equal files must pass")
    np.save(outs[1], arr + 1e-3)
    bad = subprocess.run([sys.executable, script, "compare", *outs, "--atol", "1e-4"], capture_output=True)
    check(bad.returncode == 1, "compare over tolerance must exit 1")
    config = mtm.preset_config("llama-mha")
    config["architectures"] = ["GPT2LMHeadModel"]
    config["model_type"] = "gpt2"
    mtm.write_model(os.path.join(tmp, "gpt2"), config, {"x": np.zeros(2)})
    res = subprocess.run([sys.executable, script, "logits", "--model", os.path.join(tmp, "gpt2"),
                          "--ids", "1", "--out", os.path.join(tmp, "x.npy")], capture_output=True, text=True)
    check(res.returncode != 0 and "GPT2LMHeadModel" in res.stderr, "unsupported architecture must be named")


def main():
    tests = [test_bf16_fp8_bits, test_fp8_block_dequant, test_safetensors_roundtrip,
             test_sharded_and_dtypes, test_yarn_by_hand, test_rope_layouts, test_gates,
             test_policy_parsing, test_visible_sets_by_hand, test_streaming_cache_matches_definition,
             test_deepseek_structure, test_mla_paths_and_decode, test_llama_family, test_cli]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for test in tests:
            try:
                if "tmp" in test.__code__.co_varnames[:test.__code__.co_argcount]:
                    test(tmp)
                else:
                    test()
                print(f"PASS {test.__name__}")
            except Exception:                                  # noqa: BLE001 - report every group
                failures += 1
                print(f"FAIL {test.__name__}")
                traceback.print_exc()
    print(f"{len(tests) - failures}/{len(tests)} test groups passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
