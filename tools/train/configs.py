"""Hugging Face config.json contents of the trained models (the single source of their sizes).

mla_moe: DeepseekV3ForCausalLM (MLA with q LoRA + DeepSeekMoE, sigmoid noaux_tc routing).
mla_dense: the same MLA attention (8 query heads) with a dense SwiGLU (320) in every layer.
mha / gqa / mqa: LlamaForCausalLM baselines with 8 / 4 / 1 key-value heads (8 query heads of
32; GQA = 4 kv groups of 2 query heads), same hidden size, layers, vocabulary, context and
tied embeddings; their MLP width (320) is chosen so that their parameters per token are close to the MoE model's ACTIVE parameters
(same compute per token); the MoE model has more parameters in total (README.md has the counts).
"""

VOCAB_SIZE = 4096
BOS_ID, EOS_ID = 0, 1
HIDDEN = 256
LAYERS = 4
HEADS = 4                # MLA query heads
BASELINE_HEADS = 8       # Llama query heads (head_dim 32), so that GQA can have 4 kv groups
MAX_POSITIONS = 2048
ROPE_THETA = 10000.0


def mla_moe():
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN,
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "q_lora_rank": 128,
        "kv_lora_rank": 64,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "n_routed_experts": 8,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "topk_method": "noaux_tc",
        "n_group": 4,
        "topk_group": 2,
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.5,
        "hidden_act": "silu",
        "attention_bias": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "max_position_embeddings": MAX_POSITIONS,
        "tie_word_embeddings": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "initializer_range": 0.02,
        "num_nextn_predict_layers": 0,
        "torch_dtype": "bfloat16",
    }


def mla_dense():
    """MLA attention without MoE: separates what MLA costs from what DeepSeekMoE gains. 8 query
    heads and the baselines' dense SwiGLU (320) in every layer, so its parameters per token are
    those of the GQA baseline."""
    c = mla_moe()
    c.update({"num_attention_heads": BASELINE_HEADS, "num_key_value_heads": BASELINE_HEADS,
              "intermediate_size": 320, "first_k_dense_replace": LAYERS})
    return c


def llama(n_kv_heads, intermediate=320):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN,
        "intermediate_size": intermediate,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": BASELINE_HEADS,
        "num_key_value_heads": n_kv_heads,
        "head_dim": HIDDEN // BASELINE_HEADS,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "rms_norm_eps": 1e-6,
        "rope_theta": ROPE_THETA,
        "rope_scaling": None,
        "max_position_embeddings": MAX_POSITIONS,
        "tie_word_embeddings": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "initializer_range": 0.02,
        "torch_dtype": "bfloat16",
    }


CONFIGS = {
    "mla_moe": mla_moe,
    "mla_dense": mla_dense,
    "mha": lambda: llama(BASELINE_HEADS),
    "gqa": lambda: llama(4),
    "mqa": lambda: llama(1),
}
