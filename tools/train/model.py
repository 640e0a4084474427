"""PyTorch models in the Hugging Face DeepSeek-V3 and Llama layouts, for training on CPU.

Module and parameter names equal the HF tensor names (model.embed_tokens.weight,
model.layers.{i}.self_attn.kv_a_proj_with_mqa.weight, model.layers.{i}.mlp.experts.{e}.
gate_proj.weight, model.layers.{i}.mlp.gate.e_score_correction_bias, lm_head.weight, ...),
so state_dict() is the checkpoint. The forward semantics are those of mlarun's NumPy
reference (reference/deepseek_ref.py, reference/llama_ref.py), which the exported
checkpoints are checked against.

Formula sources:
  * MLA (DeepSeek-V2, arXiv 2405.04434, sec. 2.1, eqs. 9-19): c_q = W_dq h (q_a_proj),
    RMSNorm (q_a_layernorm, eps 1e-6), [q_nope ; q_pe] = W_uq c_q (q_b_proj);
    [c_kv ; k_pe] = kv_a_proj_with_mqa h, c_kv RMSNorm'd (kv_a_layernorm, eps 1e-6),
    [k_nope ; v] per head = kv_b_proj c_kv; k_pe is one RoPE key shared by all heads;
    softmax scale 1/sqrt(qk_nope + qk_rope); output o_proj.
  * RoPE (RoFormer, arXiv 2104.09864), inv_freq[i] = theta^(-2i/d): DeepSeek rotates
    interleaved pairs (x[2i], x[2i+1]) as mlarun specifies; Llama rotates the HF
    "rotate_half" pairs (x[i], x[i+d/2]).
  * DeepSeekMoE (arXiv 2405.04434 sec. 2.2; DeepSeek-V3 arXiv 2412.19437 sec. 2.1.2):
    shared experts always on; routed affinities s = sigmoid(u W_gate); selection by
    s + b (b = e_score_correction_bias, selection only), restricted to the topk_group
    groups with the largest sum of their two best biased affinities (noaux_tc); gate
    values = the unbiased s of the chosen experts, normalised to sum 1
    (norm_topk_prob) and multiplied by routed_scaling_factor.
  * Auxiliary-loss-free balancing (DeepSeek-V3 sec. 2.1.2): after each step
    b_i += gamma * sign(mean_load - load_i), see MoE.update_bias.
  * RMSNorm (arXiv 1910.07467), SwiGLU (arXiv 2002.05202), GQA/MQA (arXiv 2305.13245,
    1911.02150): kv head of query head h is h // (n_heads / n_kv_heads).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LATENT_NORM_EPS = 1e-6


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(n_positions, dim, theta, device=None):
    """cos, sin [n_positions, dim/2] for angles position * theta^(-2i/dim)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rope_interleaved(x, cos, sin):
    """x [..., T, d]; pairs (x[2i], x[2i+1]) -> (a cos - b sin, a sin + b cos)."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def rope_rotate_half(x, cos, sin):
    """x [..., T, d]; pairs (x[i], x[i + d/2])."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def causal_attention(q, k, v, scale):
    """q, k [B, H, T, dk]; v [B, H, T, dv] -> [B, T, H*dv]."""
    T = q.shape[2]
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    probs = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
    out = torch.matmul(probs, v)                                     # [B, H, T, dv]
    return out.transpose(1, 2).reshape(q.shape[0], T, -1)


class SwiGLU(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MLAttention(nn.Module):
    """DeepSeek-V2/V3 multi-head latent attention (naive form: keys/values expanded per head)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        h, nh = c["hidden_size"], c["num_attention_heads"]
        self.qk_dim = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
        self.q_a_proj = nn.Linear(h, c["q_lora_rank"], bias=False)
        self.q_a_layernorm = RMSNorm(c["q_lora_rank"], LATENT_NORM_EPS)
        self.q_b_proj = nn.Linear(c["q_lora_rank"], nh * self.qk_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, c["kv_lora_rank"] + c["qk_rope_head_dim"], bias=False)
        self.kv_a_layernorm = RMSNorm(c["kv_lora_rank"], LATENT_NORM_EPS)
        self.kv_b_proj = nn.Linear(c["kv_lora_rank"],
                                   nh * (c["qk_nope_head_dim"] + c["v_head_dim"]), bias=False)
        self.o_proj = nn.Linear(nh * c["v_head_dim"], h, bias=False)
        self.scale = 1.0 / math.sqrt(self.qk_dim)

    def forward(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        nh, dn, dr, dv = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                          c["v_head_dim"])
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(B, T, nh, self.qk_dim).transpose(1, 2)             # [B, nh, T, dn+dr]
        q_nope, q_pe = q[..., :dn], rope_interleaved(q[..., dn:], cos, sin)
        kv_a = self.kv_a_proj_with_mqa(x)                              # [B, T, L + dr]
        c_kv = self.kv_a_layernorm(kv_a[..., :c["kv_lora_rank"]])
        k_pe = rope_interleaved(kv_a[..., c["kv_lora_rank"]:], cos, sin)  # [B, T, dr]
        kv = self.kv_b_proj(c_kv).view(B, T, nh, dn + dv).transpose(1, 2)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        k = torch.cat([k_nope, k_pe[:, None].expand(B, nh, T, dr)], dim=-1)
        q = torch.cat([q_nope, q_pe], dim=-1)
        return self.o_proj(causal_attention(q, k, v, self.scale))


class LlamaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = h // nh
        self.q_proj = nn.Linear(h, nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(nh * self.hd, h, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        nh, nkv = self.c["num_attention_heads"], self.c["num_key_value_heads"]
        q = self.q_proj(x).view(B, T, nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, nkv, self.hd).transpose(1, 2)
        q, k = rope_rotate_half(q, cos, sin), rope_rotate_half(k, cos, sin)
        if nkv != nh:
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
        return self.o_proj(causal_attention(q, k, v, 1.0 / math.sqrt(self.hd)))


class Gate(nn.Module):
    def __init__(self, hidden, n_experts):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_experts, hidden))
        self.register_buffer("e_score_correction_bias", torch.zeros(n_experts))


class MoE(nn.Module):
    """DeepSeekMoE with sigmoid scoring and noaux_tc routing (see module docstring)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        h, n = c["hidden_size"], c["n_routed_experts"]
        self.gate = Gate(h, n)
        self.experts = nn.ModuleList(SwiGLU(h, c["moe_intermediate_size"]) for _ in range(n))
        self.shared_experts = (SwiGLU(h, c["moe_intermediate_size"] * c["n_shared_experts"])
                               if c["n_shared_experts"] else None)
        self.last_load = None

    def route(self, x):
        """x [N, h] -> chosen [N, k] expert ids, weights [N, k]."""
        c = self.c
        n, k = c["n_routed_experts"], c["num_experts_per_tok"]
        G, kg = c["n_group"], c["topk_group"]
        scores = torch.sigmoid(x @ self.gate.weight.t())               # [N, n]
        choice = scores.detach() + self.gate.e_score_correction_bias
        gsize = n // G
        group_scores = choice.view(-1, G, gsize).topk(min(2, gsize), dim=-1).values.sum(-1)
        kept_groups = group_scores.topk(kg, dim=-1).indices           # [N, kg]
        kept = torch.zeros(x.shape[0], G, dtype=torch.bool, device=x.device)
        kept.scatter_(1, kept_groups, True)
        kept = kept[:, :, None].expand(-1, G, gsize).reshape(-1, n)
        chosen = choice.masked_fill(~kept, float("-inf")).topk(k, dim=-1).indices
        weights = scores.gather(1, chosen)
        if k > 1 and c["norm_topk_prob"]:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return chosen, weights * c["routed_scaling_factor"]

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        chosen, weights = self.route(x)
        out = torch.zeros_like(x)
        flat = chosen.reshape(-1)
        token_of_slot = torch.arange(x.shape[0], device=x.device).repeat_interleave(chosen.shape[1])
        flat_w = weights.reshape(-1)
        for e, expert in enumerate(self.experts):
            slots = (flat == e).nonzero(as_tuple=True)[0]
            if slots.numel() == 0:
                continue
            tokens = token_of_slot[slots]
            out.index_add_(0, tokens, expert(x[tokens]) * flat_w[slots, None])
        self.last_load = torch.bincount(flat, minlength=len(self.experts)).detach()
        if self.shared_experts is not None:
            out = out + self.shared_experts(x)
        return out.view(shape)

    @torch.no_grad()
    def update_bias(self, load, gamma):
        """b_i += gamma * sign(mean_load - load_i) (DeepSeek-V3, arXiv 2412.19437, sec. 2.1.2)."""
        load = load.float()
        self.gate.e_score_correction_bias += gamma * torch.sign(load.mean() - load)


class DecoderLayer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
        if c["model_type"] == "deepseek_v3":
            self.self_attn = MLAttention(c)
            moe = (c["n_routed_experts"] and i >= c["first_k_dense_replace"]
                   and i % c["moe_layer_freq"] == 0)
            self.mlp = MoE(c) if moe else SwiGLU(h, c["intermediate_size"])
        else:
            self.self_attn = LlamaAttention(c)
            self.mlp = SwiGLU(h, c["intermediate_size"])

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, i) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class CausalLM(nn.Module):
    """model.* + lm_head, HF names. forward(ids [B, T]) -> logits [B, T, vocab]."""

    def __init__(self, config):
        super().__init__()
        self.config = dict(config)
        c = self.config
        self.model = Backbone(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        if c.get("tie_word_embeddings"):
            self.lm_head.weight = self.model.embed_tokens.weight
        if c["model_type"] == "deepseek_v3":
            self.rope_dim = c["qk_rope_head_dim"]
        else:
            self.rope_dim = c["hidden_size"] // c["num_attention_heads"]
        self._rope_cache = {}

    def init_weights(self, seed, std=0.02):
        """N(0, std) for matrices, output projections scaled by 1/sqrt(2 n_layers) (GPT-2)."""
        g = torch.Generator().manual_seed(seed)
        out_std = std / math.sqrt(2 * self.config["num_hidden_layers"])
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                else:
                    s = out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else std
                    p.copy_(torch.randn(p.shape, generator=g) * s)
            for m in self.moe_layers():
                m.gate.e_score_correction_bias.zero_()

    def moe_layers(self):
        return [layer.mlp for layer in self.model.layers if isinstance(layer.mlp, MoE)]

    def rope(self, T, device):
        key = (T, str(device))
        if key not in self._rope_cache:
            self._rope_cache[key] = rope_cos_sin(T, self.rope_dim, float(self.config["rope_theta"]),
                                                 device)
        return self._rope_cache[key]

    def hidden_states(self, ids):
        cos, sin = self.rope(ids.shape[1], ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.model.norm(x)

    def forward(self, ids):
        return self.lm_head(self.hidden_states(ids))

    def param_counts(self):
        """(total, active per token, total without embeddings/lm_head, active without them)."""
        c = self.config
        total = sum(p.numel() for p in self.parameters())
        embed = self.model.embed_tokens.weight.numel()
        if not c.get("tie_word_embeddings"):
            embed += self.lm_head.weight.numel()
        inactive = 0
        for m in self.moe_layers():
            per_expert = sum(p.numel() for p in m.experts[0].parameters())
            inactive += per_expert * (c["n_routed_experts"] - c["num_experts_per_tok"])
        return total, total - inactive, total - embed, total - inactive - embed


def kv_cache_values_per_token(c):
    """Cached numbers per token over all layers (MLA: kv_lora_rank + qk_rope_head_dim)."""
    if c["model_type"] == "deepseek_v3":
        return c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"])
    hd = c["hidden_size"] // c["num_attention_heads"]
    return c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * hd
