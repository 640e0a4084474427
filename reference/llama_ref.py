"""Float64 reference forward pass of Llama / Mistral / Qwen2 (HF layout).

Sources of the formulas:
  * Llama: Touvron et al., "LLaMA: Open and Efficient Foundation Language Models"
    (arXiv 2302.13971): pre-norm RMSNorm, SwiGLU MLP, rotary embeddings.
  * Grouped-query attention: Ainslie et al., "GQA" (arXiv 2305.13245): query head
    h uses key/value head h // (n_heads / n_head_kv); MQA (Shazeer, arXiv
    1911.02150) is n_head_kv = 1.
  * RoPE (arXiv 2104.09864) in the Hugging Face "rotate_half" layout: pairs
    (x[i], x[i + head_dim/2]) rotated by position * theta^(-2i/head_dim).
    Optional rope_scaling "linear" (frequencies / factor) and "llama3" (Meta
    Llama 3.1); any other type is rejected.
  * Mistral 7B (arXiv 2310.06825): sliding-window attention, query t sees
    t - W < s <= t.
  * Qwen2 (arXiv 2407.10671): biases on q/k/v projections; its sliding window
    applies only when `use_sliding_window` is true.

All arithmetic is float64. Cache rows per token: [n_head_kv, 2, head_dim] =
(K after RoPE at its true position, V) for every key/value head.
"""

import math

import numpy as np

from common_np import (default_inv_freq, llama3_inv_freq, rms_norm, rope_angles,
                       rope_rotate_half, softmax, swiglu_mlp)
from kv_policy import FULL, BoundedCache, gather_entries, with_model_window

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
MODEL_TYPES = ("llama", "mistral", "qwen2")
_ARCH_TO_TYPE = dict(zip(ARCHITECTURES, MODEL_TYPES))


class LlamaConfig:
    def __init__(self, cfg):
        model_type = cfg.get("model_type")
        if model_type not in MODEL_TYPES:
            model_type = _ARCH_TO_TYPE.get((cfg.get("architectures") or ["?"])[0])
            if model_type is None:
                raise ValueError(f"not a Llama-family config: model_type={cfg.get('model_type')!r}")
        self.model_type = model_type
        self.vocab_size = int(cfg["vocab_size"])
        self.hidden_size = int(cfg["hidden_size"])
        self.n_layers = int(cfg["num_hidden_layers"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.n_head_kv = int(cfg.get("num_key_value_heads") or self.n_heads)
        if self.n_heads % self.n_head_kv:
            raise ValueError(f"num_attention_heads={self.n_heads} not divisible by "
                             f"num_key_value_heads={self.n_head_kv}")
        self.head_dim = int(cfg.get("head_dim") or self.hidden_size // self.n_heads)
        self.intermediate_size = int(cfg["intermediate_size"])
        self.rms_norm_eps = float(cfg.get("rms_norm_eps") or 1e-6)
        self.rope_theta = float(cfg.get("rope_theta") or 10000.0)
        self.tie_word_embeddings = bool(cfg.get("tie_word_embeddings", False))
        self.qkv_bias = model_type == "qwen2" or bool(cfg.get("attention_bias", False))
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"unsupported hidden_act {cfg.get('hidden_act')!r} (only silu)")
        if cfg.get("mlp_bias"):
            raise ValueError("mlp_bias=true is not supported")
        window = cfg.get("sliding_window")
        if model_type == "llama" or (model_type == "qwen2" and not cfg.get("use_sliding_window", False)):
            window = None
        self.sliding_window = int(window) if window is not None else None
        self.inv_freq = llama_inv_freq(self.head_dim, self.rope_theta, cfg.get("rope_scaling"))
        self.softmax_scale = 1.0 / math.sqrt(self.head_dim)


def llama_inv_freq(head_dim, theta, rope_scaling):
    if not rope_scaling:
        return default_inv_freq(head_dim, theta)
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind == "default":
        return default_inv_freq(head_dim, theta)
    if kind == "linear":
        return default_inv_freq(head_dim, theta) / float(rope_scaling["factor"])
    if kind == "llama3":
        return llama3_inv_freq(head_dim, theta, rope_scaling)
    raise ValueError(f"unsupported rope_scaling type {kind!r} (supported: default, linear, llama3)")


class LlamaModel:
    """forward(): whole sequence at once (prefill); decode(): token by token with
    an explicit per-layer K/V cache."""

    def __init__(self, config, weights):
        self.cfg = LlamaConfig(config)
        self.w = weights
        c = self.cfg
        self.embed = self._get("model.embed_tokens.weight", (c.vocab_size, c.hidden_size))
        lm_name = "model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"
        self.lm_head = self._get(lm_name, (c.vocab_size, c.hidden_size))
        self.final_norm = self._get("model.norm.weight", (c.hidden_size,))
        self.layers = [self._load_layer(i) for i in range(c.n_layers)]

    def _get(self, name, shape):
        if name not in self.w:
            raise KeyError(f"missing tensor {name!r}")
        tensor = self.w[name]
        if tuple(tensor.shape) != tuple(shape):
            raise ValueError(f"tensor {name!r} has shape {tuple(tensor.shape)}, expected {tuple(shape)}")
        return tensor

    def _load_layer(self, i):
        c, p = self.cfg, f"model.layers.{i}."
        a = p + "self_attn."
        hidden, q_width, kv_width = c.hidden_size, c.n_heads * c.head_dim, c.n_head_kv * c.head_dim
        layer = {"input_norm": self._get(p + "input_layernorm.weight", (hidden,)),
                 "post_norm": self._get(p + "post_attention_layernorm.weight", (hidden,))}
        for proj, width in (("q", q_width), ("k", kv_width), ("v", kv_width)):
            layer[proj] = self._get(f"{a}{proj}_proj.weight", (width, hidden))
            bias_name = f"{a}{proj}_proj.bias"
            if c.qkv_bias:
                layer[proj + "_bias"] = self._get(bias_name, (width,))
            elif bias_name in self.w:
                raise ValueError(f"unexpected {bias_name!r} "
                                 f"(model_type {c.model_type}, attention_bias false)")
            else:
                layer[proj + "_bias"] = np.zeros(width)
        layer["o"] = self._get(a + "o_proj.weight", (hidden, q_width))
        o_bias = a + "o_proj.bias"        # HF Llama adds it when attention_bias is true
        layer["o_bias"] = self._get(o_bias, (hidden,)) if o_bias in self.w else np.zeros(hidden)
        m = p + "mlp."
        layer["mlp"] = (self._get(m + "gate_proj.weight", (c.intermediate_size, hidden)),
                        self._get(m + "up_proj.weight", (c.intermediate_size, hidden)),
                        self._get(m + "down_proj.weight", (hidden, c.intermediate_size)))
        return layer

    def _rope(self, x, positions):
        """x [n_tokens, n_heads_any, head_dim]."""
        angles = rope_angles(positions, self.cfg.inv_freq)[:, None, :]  # [n_tokens, 1, head_dim/2]
        return rope_rotate_half(x, np.cos(angles), np.sin(angles))

    def _queries_and_cache_rows(self, layer, x, positions):
        """x [n_tokens, hidden] (normed) -> q [n_tokens, n_heads, head_dim] (roped),
        rows [n_tokens, n_head_kv, 2, head_dim] (roped K, V)."""
        c, n = self.cfg, len(x)
        q = (x @ layer["q"].T + layer["q_bias"]).reshape(n, c.n_heads, c.head_dim)
        k = (x @ layer["k"].T + layer["k_bias"]).reshape(n, c.n_head_kv, c.head_dim)
        v = (x @ layer["v"].T + layer["v_bias"]).reshape(n, c.n_head_kv, c.head_dim)
        q, k = self._rope(q, positions), self._rope(k, positions)
        return q, np.stack([k, v], axis=2)

    def _attend(self, q, rows, bias):
        """One query: q [n_heads, head_dim]; rows [n_entries, n_head_kv, 2, head_dim];
        bias [n_entries] -> [n_heads, head_dim]."""
        c = self.cfg
        group = c.n_heads // c.n_head_kv
        out = np.empty((c.n_heads, c.head_dim))
        for h in range(c.n_heads):
            kv = h // group
            keys, values = rows[:, kv, 0, :], rows[:, kv, 1, :]         # [n_entries, head_dim]
            probs = softmax(c.softmax_scale * (keys @ q[h]) + bias)
            out[h] = probs @ values
        return out

    def _layer(self, layer, x, positions, entries_for):
        c = self.cfg
        h = rms_norm(x, layer["input_norm"], c.rms_norm_eps)
        q, rows = self._queries_and_cache_rows(layer, h, positions)
        heads = np.stack([self._attend(q[t], *entries) for t, entries in enumerate(entries_for(rows))])
        x = x + heads.reshape(len(x), -1) @ layer["o"].T + layer["o_bias"]
        h = rms_norm(x, layer["post_norm"], c.rms_norm_eps)
        return x + swiglu_mlp(h, *layer["mlp"])

    def _check(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= self.cfg.vocab_size:
            raise ValueError(f"token ids must be a non-empty list in [0, {self.cfg.vocab_size})")
        return ids

    def _logits(self, x):
        return rms_norm(x, self.final_norm, self.cfg.rms_norm_eps) @ self.lm_head.T

    def forward(self, ids, policy=FULL, attention="naive"):
        """Full-sequence forward -> logits [n_tokens, vocab]. `attention` is accepted
        for interface symmetry with DeepseekModel; both values compute the same."""
        ids = self._check(ids)
        policy = with_model_window(policy, self.cfg.sliding_window)
        positions = np.arange(len(ids))
        x = self.embed[ids]
        for layer in self.layers:
            x = self._layer(layer, x, positions,
                            lambda rows: [gather_entries(rows, t, policy) for t in positions])
        return self._logits(x)

    def decode(self, ids, policy=FULL, attention="naive"):
        ids = self._check(ids)
        policy = with_model_window(policy, self.cfg.sliding_window)
        caches = [BoundedCache(policy) for _ in self.layers]
        logits = []
        for position, token in enumerate(ids):
            x = self.embed[[token]]
            for layer, cache in zip(self.layers, caches):
                def entries_for(rows, cache=cache, position=position):
                    cache.append(position, rows[0])
                    return [cache.entries()]
                x = self._layer(layer, x, np.array([position]), entries_for)
            logits.append(self._logits(x)[0])
        self.last_cache_rows = [cache.n_rows() for cache in caches]
        return np.stack(logits)
