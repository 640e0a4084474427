"""Float64 reference forward pass of DeepSeek-V2 / DeepSeek-V3 (HF layout).

Sources of the formulas:
  * Multi-head Latent Attention (MLA): DeepSeek-AI, "DeepSeek-V2: A Strong,
    Economical, and Efficient Mixture-of-Experts Language Model" (arXiv 2405.04434),
    section 2.1 (eqs. 9-19): low-rank joint KV compression c_kv = W_dkv h, keys and
    values up-projected per head k_C = W_uk c_kv, v_C = W_uv c_kv, optional query
    compression c_q = W_dq h, decoupled RoPE key k_R shared by all heads, and the
    "absorb W_uk into the query / W_uv into the output" inference form (sec. 2.1.2).
    The cache per token per layer is [c_kv ; k_R] (kv_lora_rank + qk_rope_head_dim).
  * DeepSeekMoE: same paper, section 2.2 (shared + routed experts, softmax gate,
    device/group-limited routing = `group_limited_greedy`).
  * DeepSeek-V3 (arXiv 2412.19437), section 2.1.2: sigmoid affinities, top-k
    normalisation of the selected affinities, auxiliary-loss-free balancing bias
    used ONLY for selection (`noaux_tc`, node-limited group choice by the sum of
    the two highest affinities per group), routed_scaling_factor.
  * YaRN (arXiv 2309.00071) for rope_scaling {"type": "yarn", ...}: see common_np.
  * Config semantics (tensor names, norms' eps, the v2/v3 weight normalisation
    difference, tie-breaking to the lower index) as fixed by the mlarun brief,
    matching the published DeepSeek-V2/V3 Hugging Face code.

All arithmetic is float64. RoPE on the 64-wide (qk_rope_head_dim) parts rotates
interleaved pairs (x[2i], x[2i+1]).
"""

import math

import numpy as np

from common_np import (default_inv_freq, rms_norm, rope_angles, rope_interleaved, sigmoid,
                       softmax, swiglu_mlp, yarn_get_mscale, yarn_inv_freq)
from kv_policy import FULL, BoundedCache, gather_entries

LATENT_NORM_EPS = 1e-6      # q_a_layernorm and kv_a_layernorm
ARCHITECTURES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
MODEL_TYPES = ("deepseek_v2", "deepseek_v3")

# Behavioural defaults of the HF DeepseekV2Config / DeepseekV3Config classes,
# used only when a key is absent from config.json.
_DEFAULTS = {
    "deepseek_v2": dict(rms_norm_eps=1e-6, rope_theta=10000.0, scoring_func="softmax",
                        topk_method="greedy", norm_topk_prob=False, routed_scaling_factor=1.0,
                        first_k_dense_replace=0, moe_layer_freq=1, tie_word_embeddings=False),
    "deepseek_v3": dict(rms_norm_eps=1e-6, rope_theta=10000.0, scoring_func="sigmoid",
                        topk_method="noaux_tc", norm_topk_prob=True, routed_scaling_factor=2.5,
                        first_k_dense_replace=3, moe_layer_freq=1, tie_word_embeddings=False),
}


class DeepseekConfig:
    def __init__(self, cfg):
        model_type = cfg.get("model_type")
        if model_type not in MODEL_TYPES:
            arch = (cfg.get("architectures") or ["?"])[0]
            model_type = "deepseek_v3" if arch == "DeepseekV3ForCausalLM" else \
                "deepseek_v2" if arch == "DeepseekV2ForCausalLM" else None
            if model_type is None:
                raise ValueError(f"not a DeepSeek-V2/V3 config: model_type={cfg.get('model_type')!r}")
        defaults = _DEFAULTS[model_type]

        def opt(key):
            value = cfg.get(key)
            return defaults[key] if value is None else value

        self.model_type = model_type
        self.vocab_size = int(cfg["vocab_size"])
        self.hidden_size = int(cfg["hidden_size"])
        self.n_layers = int(cfg["num_hidden_layers"])
        self.n_heads = int(cfg["num_attention_heads"])
        self.q_lora_rank = cfg.get("q_lora_rank")            # None -> plain q_proj
        self.kv_lora_rank = int(cfg["kv_lora_rank"])
        self.qk_nope_head_dim = int(cfg["qk_nope_head_dim"])
        self.qk_rope_head_dim = int(cfg["qk_rope_head_dim"])
        self.v_head_dim = int(cfg["v_head_dim"])
        self.head_dim_qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.intermediate_size = int(cfg["intermediate_size"])
        self.n_routed_experts = cfg.get("n_routed_experts")
        self.n_shared_experts = cfg.get("n_shared_experts") or 0
        self.moe_intermediate_size = cfg.get("moe_intermediate_size")
        self.num_experts_per_tok = cfg.get("num_experts_per_tok")
        self.first_k_dense_replace = int(opt("first_k_dense_replace"))
        self.moe_layer_freq = int(opt("moe_layer_freq"))
        self.topk_method = opt("topk_method")
        if self.topk_method == "gready":                     # spelling of the HF default
            self.topk_method = "greedy"
        self.n_group = cfg.get("n_group")
        self.topk_group = cfg.get("topk_group")
        self.scoring_func = opt("scoring_func")
        self.norm_topk_prob = bool(opt("norm_topk_prob"))
        self.routed_scaling_factor = float(opt("routed_scaling_factor"))
        self.rms_norm_eps = float(opt("rms_norm_eps"))
        self.rope_theta = float(opt("rope_theta"))
        self.rope_scaling = cfg.get("rope_scaling")
        self.tie_word_embeddings = bool(opt("tie_word_embeddings"))
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError(f"unsupported hidden_act {cfg.get('hidden_act')!r} (only silu)")
        if cfg.get("attention_bias"):
            raise ValueError("attention_bias=true is not supported for DeepSeek models")
        self.inv_freq, self.rope_mscale, self.softmax_scale = rope_parameters(self)

    def is_moe_layer(self, i):
        return (self.n_routed_experts is not None and i >= self.first_k_dense_replace
                and i % self.moe_layer_freq == 0)


def rope_parameters(cfg):
    """(inv_freq [rope_dim/2], factor on cos/sin, softmax scale)."""
    rope_dim = cfg.qk_rope_head_dim
    softmax_scale = 1.0 / math.sqrt(cfg.head_dim_qk)
    scaling = cfg.rope_scaling
    if not scaling:
        return default_inv_freq(rope_dim, cfg.rope_theta), 1.0, softmax_scale
    kind = scaling.get("type", scaling.get("rope_type"))
    if kind != "yarn":
        raise ValueError(f"unsupported rope_scaling type {kind!r} for DeepSeek (only yarn)")
    factor = float(scaling["factor"])
    # Defaults below are those of DeepseekV2YarnRotaryEmbedding.
    original_max = float(scaling.get("original_max_position_embeddings", 4096))
    beta_fast = float(scaling.get("beta_fast", 32))
    beta_slow = float(scaling.get("beta_slow", 1))
    mscale = float(scaling.get("mscale", 1))
    mscale_all_dim = float(scaling.get("mscale_all_dim", 0) or 0)
    inv_freq = yarn_inv_freq(rope_dim, cfg.rope_theta, factor, original_max, beta_fast, beta_slow)
    cos_sin_factor = yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
    if mscale_all_dim:
        softmax_scale *= yarn_get_mscale(factor, mscale_all_dim) ** 2
    return inv_freq, cos_sin_factor, softmax_scale


def top_k_indices(values, k):
    """Indices of the k largest values, ties broken towards the lower index."""
    return np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")[:k]


def select_experts(router_logits, *, scoring_func, topk_method, top_k, n_group, topk_group,
                   correction_bias, norm_topk_prob, routed_scaling_factor, model_type):
    """router_logits [n_routed_experts] -> (expert indices [top_k], weights [top_k])."""
    n_experts = router_logits.shape[0]
    if scoring_func == "softmax":
        scores = softmax(router_logits)
    elif scoring_func == "sigmoid":
        scores = sigmoid(router_logits)
    else:
        raise ValueError(f"unsupported scoring_func {scoring_func!r}")

    if topk_method == "greedy":
        chosen = top_k_indices(scores, top_k)
    elif topk_method in ("group_limited_greedy", "noaux_tc"):
        n_group = int(n_group or 1)
        topk_group = int(topk_group or n_group)
        if n_experts % n_group:
            raise ValueError(f"n_routed_experts={n_experts} not divisible by n_group={n_group}")
        group_size = n_experts // n_group
        if topk_method == "noaux_tc":
            if correction_bias is None:
                raise ValueError("topk_method noaux_tc needs mlp.gate.e_score_correction_bias")
            choice = scores + correction_bias
            grouped = np.sort(choice.reshape(n_group, group_size), axis=-1)[:, ::-1]
            group_scores = grouped[:, :min(2, group_size)].sum(axis=-1)
        else:
            choice = scores
            group_scores = scores.reshape(n_group, group_size).max(axis=-1)
        kept_groups = top_k_indices(group_scores, topk_group)
        if top_k > len(kept_groups) * group_size:
            raise ValueError(f"num_experts_per_tok={top_k} exceeds the experts of topk_group groups")
        kept = np.zeros(n_experts, dtype=bool)
        for g in kept_groups:
            kept[g * group_size:(g + 1) * group_size] = True
        chosen = top_k_indices(np.where(kept, choice, -np.inf), top_k)
    else:
        raise ValueError(f"unsupported topk_method {topk_method!r}")

    weights = scores[chosen]            # noaux_tc: unbiased scores of the chosen experts
    normalise = top_k > 1 and norm_topk_prob
    if normalise:
        weights = weights / (weights.sum() + 1e-20)
    if model_type == "deepseek_v3" or not normalise:
        weights = weights * routed_scaling_factor
    return chosen, weights


class DeepseekModel:
    """forward(): whole sequence at once (prefill); decode(): token by token with
    an explicit per-layer latent cache. attention = 'naive' | 'absorbed'."""

    def __init__(self, config, weights):
        self.cfg = DeepseekConfig(config)
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

    def _swiglu_weights(self, prefix, intermediate):
        h = self.cfg.hidden_size
        return (self._get(prefix + "gate_proj.weight", (intermediate, h)),
                self._get(prefix + "up_proj.weight", (intermediate, h)),
                self._get(prefix + "down_proj.weight", (h, intermediate)))

    def _load_layer(self, i):
        c, p = self.cfg, f"model.layers.{i}."
        a = p + "self_attn."
        hidden, n_heads = c.hidden_size, c.n_heads
        layer = {"input_norm": self._get(p + "input_layernorm.weight", (hidden,)),
                 "post_norm": self._get(p + "post_attention_layernorm.weight", (hidden,))}
        q_out = n_heads * c.head_dim_qk
        if c.q_lora_rank is None:
            if a + "q_a_proj.weight" in self.w:
                raise ValueError("config q_lora_rank is null but q_a_proj.weight exists")
            layer["q_proj"] = self._get(a + "q_proj.weight", (q_out, hidden))
        else:
            r = int(c.q_lora_rank)
            layer["q_a_proj"] = self._get(a + "q_a_proj.weight", (r, hidden))
            layer["q_a_norm"] = self._get(a + "q_a_layernorm.weight", (r,))
            layer["q_b_proj"] = self._get(a + "q_b_proj.weight", (q_out, r))
        layer["kv_a_proj"] = self._get(a + "kv_a_proj_with_mqa.weight",
                                       (c.kv_lora_rank + c.qk_rope_head_dim, hidden))
        layer["kv_a_norm"] = self._get(a + "kv_a_layernorm.weight", (c.kv_lora_rank,))
        kv_b = self._get(a + "kv_b_proj.weight",
                         (n_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank))
        kv_b = kv_b.reshape(n_heads, c.qk_nope_head_dim + c.v_head_dim, c.kv_lora_rank)
        layer["w_uk"] = kv_b[:, :c.qk_nope_head_dim, :]      # [n_heads, qk_nope, kv_lora_rank]
        layer["w_uv"] = kv_b[:, c.qk_nope_head_dim:, :]      # [n_heads, v_head_dim, kv_lora_rank]
        layer["o_proj"] = self._get(a + "o_proj.weight", (hidden, n_heads * c.v_head_dim))
        if c.is_moe_layer(i):
            m = p + "mlp."
            n_exp = int(c.n_routed_experts)
            layer["router"] = self._get(m + "gate.weight", (n_exp, hidden))
            bias_name = m + "gate.e_score_correction_bias"
            layer["router_bias"] = self._get(bias_name, (n_exp,)) if bias_name in self.w else None
            layer["experts"] = [self._swiglu_weights(f"{m}experts.{e}.", c.moe_intermediate_size)
                                for e in range(n_exp)]
            layer["shared"] = (self._swiglu_weights(m + "shared_experts.",
                                                    c.moe_intermediate_size * c.n_shared_experts)
                               if c.n_shared_experts else None)
        else:
            layer["mlp"] = self._swiglu_weights(p + "mlp.", c.intermediate_size)
        return layer

    # -- attention -----------------------------------------------------------

    def _rope(self, x, positions):
        """x [n_tokens, ..., rope_dim] rotated at the given positions (YaRN mscale applied)."""
        angles = rope_angles(positions, self.cfg.inv_freq)            # [n_tokens, rope_dim/2]
        shape = (len(positions),) + (1,) * (x.ndim - 2) + (angles.shape[-1],)
        cos = (np.cos(angles) * self.cfg.rope_mscale).reshape(shape)
        sin = (np.sin(angles) * self.cfg.rope_mscale).reshape(shape)
        return rope_interleaved(x, cos, sin)

    def _queries_and_cache_rows(self, layer, x, positions):
        """x [n_tokens, hidden] (already input-normed) -> q_nope [n_tokens, n_heads, qk_nope],
        q_pe [n_tokens, n_heads, qk_rope] (roped), rows [n_tokens, kv_lora_rank + qk_rope]."""
        c = self.cfg
        if "q_proj" in layer:
            q = x @ layer["q_proj"].T
        else:
            q = rms_norm(x @ layer["q_a_proj"].T, layer["q_a_norm"], LATENT_NORM_EPS) @ layer["q_b_proj"].T
        q = q.reshape(len(x), c.n_heads, c.head_dim_qk)               # [n_tokens, n_heads, head_dim_qk]
        q_nope = q[..., :c.qk_nope_head_dim]
        q_pe = self._rope(q[..., c.qk_nope_head_dim:], positions)
        kv_a = x @ layer["kv_a_proj"].T                                # [n_tokens, kv_lora + rope]
        c_kv = rms_norm(kv_a[:, :c.kv_lora_rank], layer["kv_a_norm"], LATENT_NORM_EPS)
        k_pe = self._rope(kv_a[:, c.kv_lora_rank:], positions)         # [n_tokens, qk_rope]
        return q_nope, q_pe, np.concatenate([c_kv, k_pe], axis=-1)

    def _attend_naive(self, layer, q_nope, q_pe, rows, bias):
        """One query: q_nope [n_heads, qk_nope], q_pe [n_heads, qk_rope];
        rows [n_entries, kv_lora + rope], bias [n_entries] -> [n_heads, v_head_dim].
        Keys and values are expanded per head from the latent."""
        L = self.cfg.kv_lora_rank
        c_kv, k_pe = rows[:, :L], rows[:, L:]
        k_nope = np.einsum("hdc,nc->nhd", layer["w_uk"], c_kv)        # [n_entries, n_heads, qk_nope]
        values = np.einsum("hdc,nc->nhd", layer["w_uv"], c_kv)        # [n_entries, n_heads, v_head_dim]
        scores = np.einsum("hd,nhd->hn", q_nope, k_nope) + q_pe @ k_pe.T   # [n_heads, n_entries]
        probs = softmax(self.cfg.softmax_scale * scores + bias[None, :])
        return np.einsum("hn,nhd->hd", probs, values)

    def _attend_absorbed(self, layer, q_nope, q_pe, rows, bias):
        """Same result with W_uk absorbed into the query and W_uv applied after the
        weighted sum of latents: scores use the (kv_lora + rope)-wide cache rows."""
        L = self.cfg.kv_lora_rank
        q_latent = np.einsum("hdc,hd->hc", layer["w_uk"], q_nope)      # [n_heads, kv_lora_rank]
        q_abs = np.concatenate([q_latent, q_pe], axis=-1)              # [n_heads, kv_lora + rope]
        probs = softmax(self.cfg.softmax_scale * (q_abs @ rows.T) + bias[None, :])
        out_latent = probs @ rows[:, :L]                               # [n_heads, kv_lora_rank]
        return np.einsum("hdc,hc->hd", layer["w_uv"], out_latent)

    # -- MLP -----------------------------------------------------------------

    def _moe(self, layer, x):
        c = self.cfg
        router_logits = x @ layer["router"].T                          # [n_tokens, n_routed_experts]
        out = np.zeros_like(x)
        for t in range(len(x)):
            chosen, weights = select_experts(
                router_logits[t], scoring_func=c.scoring_func, topk_method=c.topk_method,
                top_k=int(c.num_experts_per_tok), n_group=c.n_group, topk_group=c.topk_group,
                correction_bias=layer["router_bias"], norm_topk_prob=c.norm_topk_prob,
                routed_scaling_factor=c.routed_scaling_factor, model_type=c.model_type)
            for expert, weight in zip(chosen, weights):
                out[t] += weight * swiglu_mlp(x[t:t + 1], *layer["experts"][expert])[0]
        if layer["shared"] is not None:
            out += swiglu_mlp(x, *layer["shared"])
        return out

    # -- blocks --------------------------------------------------------------

    def _layer(self, layer, x, positions, entries_for, attention):
        """entries_for(rows) -> list (one per token of x) of (entry_rows, entry_bias)."""
        c = self.cfg
        h = rms_norm(x, layer["input_norm"], c.rms_norm_eps)
        q_nope, q_pe, rows = self._queries_and_cache_rows(layer, h, positions)
        attend = self._attend_absorbed if attention == "absorbed" else self._attend_naive
        heads = np.stack([attend(layer, q_nope[t], q_pe[t], *entries)
                          for t, entries in enumerate(entries_for(rows))])  # [n_tokens, n_heads, v]
        x = x + heads.reshape(len(x), -1) @ layer["o_proj"].T
        h = rms_norm(x, layer["post_norm"], c.rms_norm_eps)
        mlp_out = self._moe(layer, h) if "router" in layer else swiglu_mlp(h, *layer["mlp"])
        return x + mlp_out

    def _check(self, ids, attention):
        if attention not in ("naive", "absorbed"):
            raise ValueError(f"attention must be 'naive' or 'absorbed', got {attention!r}")
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0 or ids.min() < 0 or ids.max() >= self.cfg.vocab_size:
            raise ValueError(f"token ids must be a non-empty list in [0, {self.cfg.vocab_size})")
        return ids

    def _logits(self, x):
        return rms_norm(x, self.final_norm, self.cfg.rms_norm_eps) @ self.lm_head.T

    def forward(self, ids, policy=FULL, attention="naive"):
        """Full-sequence forward; returns logits [n_tokens, vocab] (float64)."""
        ids = self._check(ids, attention)
        positions = np.arange(len(ids))
        x = self.embed[ids]                                            # [n_tokens, hidden]
        for layer in self.layers:
            x = self._layer(layer, x, positions,
                            lambda rows: [gather_entries(rows, t, policy) for t in positions],
                            attention)
        return self._logits(x)

    def decode(self, ids, policy=FULL, attention="naive"):
        """Token-by-token decoding with one BoundedCache of [c_kv ; k_pe] rows per layer."""
        ids = self._check(ids, attention)
        caches = [BoundedCache(policy) for _ in self.layers]
        logits = []
        for position, token in enumerate(ids):
            x = self.embed[[token]]                                    # [1, hidden]
            for layer, cache in zip(self.layers, caches):
                def entries_for(rows, cache=cache, position=position):
                    cache.append(position, rows[0])
                    return [cache.entries()]
                x = self._layer(layer, x, np.array([position]), entries_for, attention)
            logits.append(self._logits(x)[0])
        self.last_caches = caches
        self.last_cache_rows = [cache.n_rows() for cache in caches]
        return np.stack(logits)
