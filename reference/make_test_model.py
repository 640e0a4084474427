"""Write small random Hugging Face-layout models for the reference's self-tests.

This is the reference's OWN generator (independent of `mlarun make-model`). The
tensor names and shapes follow the Hugging Face DeepSeek-V2/V3 layout
(arXiv 2405.04434 / 2412.19437 releases) and the Llama/Mistral/Qwen2 layout; the
FP8 variant follows DeepSeek-V3's block-wise e4m3 weights with `_scale_inv`
companions (arXiv 2412.19437, sec. 3.3.2) and the config key
`quantization_config.weight_block_size`.

  /usr/bin/python3 reference/make_test_model.py --preset ds-v3 --out DIR \
      [--dtype f32|bf16|fp8] [--seed 0] [--shards 1] [--fp8-block 128]
  /usr/bin/python3 reference/make_test_model.py --list
"""

import argparse
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from safetensors_np import encode_weights, save_model_dir  # noqa: E402

_DS_BASE = dict(vocab_size=96, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=4, kv_lora_rank=24, qk_nope_head_dim=12,
                qk_rope_head_dim=8, v_head_dim=10, intermediate_size=80,
                moe_intermediate_size=20, n_routed_experts=8, num_experts_per_tok=2,
                n_shared_experts=1, first_k_dense_replace=1, moe_layer_freq=1,
                rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=256,
                hidden_act="silu", tie_word_embeddings=False, attention_bias=False,
                num_nextn_predict_layers=0, torch_dtype="float32")
_YARN = dict(type="yarn", factor=4.0, original_max_position_embeddings=64,
             beta_fast=32, beta_slow=1, mscale=0.707, mscale_all_dim=0.707)
_LLAMA_BASE = dict(vocab_size=80, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=4, intermediate_size=56, rms_norm_eps=1e-5,
                   rope_theta=10000.0, max_position_embeddings=256, hidden_act="silu",
                   tie_word_embeddings=False, torch_dtype="float32")

PRESETS = {
    # DeepSeek-V2-Lite-like: no q LoRA, softmax + greedy, no normalisation (scaling applies).
    "ds-v2-lite": dict(_DS_BASE, architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2",
                       q_lora_rank=None, n_shared_experts=2, topk_method="greedy",
                       scoring_func="softmax", norm_topk_prob=False, routed_scaling_factor=1.5,
                       n_group=1, topk_group=1, rope_scaling=dict(_YARN, mscale=1.0)),
    # DeepSeek-V2-like: q LoRA, group_limited_greedy, normalised (then no scaling), MoE every 2nd layer.
    "ds-v2": dict(_DS_BASE, architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2",
                  q_lora_rank=40, num_hidden_layers=4, moe_layer_freq=2, topk_method="group_limited_greedy",
                  n_group=4, topk_group=2, num_experts_per_tok=3, scoring_func="softmax",
                  norm_topk_prob=True, routed_scaling_factor=2.0, rope_scaling=dict(_YARN)),
    # DeepSeek-V3-like: sigmoid + noaux_tc with correction bias, normalised AND scaled.
    "ds-v3": dict(_DS_BASE, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                  q_lora_rank=40, topk_method="noaux_tc", n_group=4, topk_group=2,
                  num_experts_per_tok=3, scoring_func="sigmoid", norm_topk_prob=True,
                  routed_scaling_factor=2.5,
                  rope_scaling=dict(_YARN, mscale=1.0, mscale_all_dim=1.0)),
    # DeepSeek-V3 odds and ends: top-1 greedy sigmoid, no shared experts, tied embeddings, no rope_scaling.
    "ds-v3-misc": dict(_DS_BASE, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                       q_lora_rank=None, topk_method="greedy", n_group=None, topk_group=None,
                       num_experts_per_tok=1, n_shared_experts=0, scoring_func="sigmoid",
                       norm_topk_prob=True, routed_scaling_factor=2.5, tie_word_embeddings=True,
                       first_k_dense_replace=0, rope_scaling=None),
    "llama-mha": dict(_LLAMA_BASE, architectures=["LlamaForCausalLM"], model_type="llama"),
    "llama-gqa": dict(_LLAMA_BASE, architectures=["LlamaForCausalLM"], model_type="llama",
                      num_key_value_heads=2),
    "llama-mqa": dict(_LLAMA_BASE, architectures=["LlamaForCausalLM"], model_type="llama",
                      num_key_value_heads=1),
    "llama3-misc": dict(_LLAMA_BASE, architectures=["LlamaForCausalLM"], model_type="llama",
                        head_dim=12, num_key_value_heads=2, tie_word_embeddings=True,
                        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                          high_freq_factor=4.0, original_max_position_embeddings=16)),
    "mistral-swa": dict(_LLAMA_BASE, architectures=["MistralForCausalLM"], model_type="mistral",
                        num_key_value_heads=2, sliding_window=5),
    "qwen2-bias": dict(_LLAMA_BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                       num_key_value_heads=2, sliding_window=4, use_sliding_window=False,
                       tie_word_embeddings=True),
}


def preset_config(name):
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])


def tensor_shapes(config):
    """{name: shape} of every tensor of the model described by config."""
    c = config
    hidden, vocab = c["hidden_size"], c["vocab_size"]
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    if not c.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (vocab, hidden)

    def swiglu(prefix, inter):
        shapes[prefix + "gate_proj.weight"] = (inter, hidden)
        shapes[prefix + "up_proj.weight"] = (inter, hidden)
        shapes[prefix + "down_proj.weight"] = (hidden, inter)

    deepseek = c["model_type"].startswith("deepseek")
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = p + "self_attn."
        shapes[p + "input_layernorm.weight"] = (hidden,)
        shapes[p + "post_attention_layernorm.weight"] = (hidden,)
        n_heads = c["num_attention_heads"]
        if deepseek:
            qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
            if c.get("q_lora_rank") is None:
                shapes[a + "q_proj.weight"] = (n_heads * qk, hidden)
            else:
                shapes[a + "q_a_proj.weight"] = (c["q_lora_rank"], hidden)
                shapes[a + "q_a_layernorm.weight"] = (c["q_lora_rank"],)
                shapes[a + "q_b_proj.weight"] = (n_heads * qk, c["q_lora_rank"])
            shapes[a + "kv_a_proj_with_mqa.weight"] = (c["kv_lora_rank"] + c["qk_rope_head_dim"], hidden)
            shapes[a + "kv_a_layernorm.weight"] = (c["kv_lora_rank"],)
            shapes[a + "kv_b_proj.weight"] = (n_heads * (c["qk_nope_head_dim"] + c["v_head_dim"]),
                                              c["kv_lora_rank"])
            shapes[a + "o_proj.weight"] = (hidden, n_heads * c["v_head_dim"])
            moe = (c.get("n_routed_experts") and i >= c["first_k_dense_replace"]
                   and i % c["moe_layer_freq"] == 0)
            if moe:
                n_exp = c["n_routed_experts"]
                shapes[p + "mlp.gate.weight"] = (n_exp, hidden)
                if c.get("topk_method") == "noaux_tc":
                    shapes[p + "mlp.gate.e_score_correction_bias"] = (n_exp,)
                for e in range(n_exp):
                    swiglu(f"{p}mlp.experts.{e}.", c["moe_intermediate_size"])
                if c.get("n_shared_experts"):
                    swiglu(p + "mlp.shared_experts.", c["moe_intermediate_size"] * c["n_shared_experts"])
            else:
                swiglu(p + "mlp.", c["intermediate_size"])
        else:
            head_dim = c.get("head_dim") or hidden // n_heads
            n_kv = c.get("num_key_value_heads") or n_heads
            for proj, width in (("q", n_heads * head_dim), ("k", n_kv * head_dim), ("v", n_kv * head_dim)):
                shapes[f"{a}{proj}_proj.weight"] = (width, hidden)
                if c["model_type"] == "qwen2" or c.get("attention_bias"):
                    shapes[f"{a}{proj}_proj.bias"] = (width,)
            shapes[a + "o_proj.weight"] = (hidden, n_heads * head_dim)
            swiglu(p + "mlp.", c["intermediate_size"])
    return shapes


def random_weights(config, seed=0):
    """float64 weights, already rounded to float32 precision (so F32 files round-trip)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in tensor_shapes(config).items():
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            w = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith("e_score_correction_bias"):
            w = 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            w = 0.2 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            w = rng.standard_normal(shape)
        elif name.endswith("mlp.gate.weight"):
            w = 2.0 * rng.standard_normal(shape) / np.sqrt(shape[1])
        else:
            w = rng.standard_normal(shape) / np.sqrt(shape[1])
        weights[name] = w.astype(np.float32).astype(np.float64)
    return weights


def is_fp8_candidate(name, array):
    """Projection matrices become FP8 (as in DeepSeek-V3's release); embeddings,
    lm_head, router, norms and biases stay BF16."""
    return (array.ndim == 2 and name.endswith(".weight") and "embed_tokens" not in name
            and "lm_head" not in name and not name.endswith("mlp.gate.weight"))


def write_model(out_dir, config, weights, dtype="f32", n_shards=1, fp8_block=128):
    config = dict(config)
    if dtype == "f32":
        def dtype_of(name, array):
            return "F32"
    elif dtype == "bf16":
        config["torch_dtype"] = "bfloat16"

        def dtype_of(name, array):
            return "F32" if name.endswith("e_score_correction_bias") else "BF16"
    elif dtype == "fp8":
        config["torch_dtype"] = "bfloat16"
        config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3",
                                         "activation_scheme": "dynamic",
                                         "weight_block_size": [fp8_block, fp8_block]}

        def dtype_of(name, array):
            if name.endswith("e_score_correction_bias"):
                return "F32"
            return "F8_E4M3" if is_fp8_candidate(name, array) else "BF16"
    else:
        raise ValueError(f"unknown dtype {dtype!r} (f32, bf16, fp8)")
    entries = encode_weights(weights, dtype_of, (fp8_block, fp8_block))
    save_model_dir(out_dir, config, entries, n_shards=n_shards)
    return config


def make_model(preset, out_dir, dtype="f32", seed=0, n_shards=1, fp8_block=128):
    config = preset_config(preset)
    return write_model(out_dir, config, random_weights(config, seed), dtype, n_shards, fp8_block)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset")
    parser.add_argument("--out")
    parser.add_argument("--dtype", default="f32", choices=("f32", "bf16", "fp8"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--fp8-block", type=int, default=128)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(PRESETS))
        return 0
    if not args.preset or not args.out:
        parser.error("--preset and --out are required")
    make_model(args.preset, args.out, args.dtype, args.seed, args.shards, args.fp8_block)
    print(f"wrote {args.preset} ({args.dtype}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
