#!/usr/bin/python3
"""Writes a Hugging Face checkpoint (config.json + *.safetensors; DeepSeek-V2/V3, Llama or Qwen2)
as a GGUF file that llama.cpp's `deepseek2`, `llama` or `qwen2` architecture loads, so both
engines can be timed and compared on the same weights: a second, independent GGUF writer (mlarun
writes its own with `mlarun quantize --type`), which the e2e cross-checks also feed to mlarun.

Usage: gguf_from_safetensors.py MODEL_DIR OUT.gguf [--type bf16|q8_0|f32]

Format facts used (GGUF v3, from the ggml documentation of the format): little-endian header
"GGUF", version 3, tensor count and metadata count (uint64); metadata as (string key, uint32 type,
value); tensor infos as (name, n_dims, dims innermost first, ggml type, offset from the aligned
data start); data aligned to 32 bytes. ggml types: F32 0, F16 1, Q8_0 8, BF16 30. Q8_0 is blocks
of 32 values: a float16 scale d = max|x| / 127 and 32 int8 round(x / d).
Tensor names and keys follow llama.cpp's deepseek2 loader (MLA split: attn_k_b [n_head, rank,
nope] and attn_v_b [n_head, v, rank] cut from kv_b_proj; experts stacked per layer; one KV head).
The vocabulary is a stand-in (the 256 byte tokens, then placeholders) since the benchmark feeds
token ids directly.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

GGUF_ALIGN = 32
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32, GGML_Q8_0, GGML_BF16 = 0, 8, 30


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    if isinstance(v, bool):
        return struct.pack("<I?", T_BOOL, v)
    if isinstance(v, int):
        return struct.pack("<Ii", T_INT32, v) if v < 0 else struct.pack("<II", T_UINT32, v)
    if isinstance(v, float):
        return struct.pack("<If", T_FLOAT32, v)
    if isinstance(v, str):
        return struct.pack("<I", T_STRING) + gguf_string(v)
    if isinstance(v, tuple) and v[0] == "i32[]":
        return struct.pack("<IIQ", T_ARRAY, T_INT32, len(v[1])) + np.asarray(v[1], "<i4").tobytes()
    if isinstance(v, list):  # list of strings
        return struct.pack("<IIQ", T_ARRAY, T_STRING, len(v)) + b"".join(gguf_string(s) for s in v)
    raise TypeError(f"unsupported metadata value {v!r}")


class SafetensorsDir:
    """The tensors of every *.safetensors file in a directory, memory-mapped."""

    def __init__(self, model_dir):
        self.entries = {}
        for name in sorted(os.listdir(model_dir)):
            if not name.endswith(".safetensors"):
                continue
            path = os.path.join(model_dir, name)
            with open(path, "rb") as f:
                header_len = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(header_len))
            data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
            for key, info in header.items():
                if key != "__metadata__":
                    self.entries[key] = (data, info)
        if not self.entries:
            sys.exit(f"error: no *.safetensors in {model_dir}")

    def has(self, key):
        return key in self.entries

    def f32(self, key):
        """The tensor as float32 (bf16 / f16 / f32 stored)."""
        data, info = self.entries[key]
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        shape = info["shape"]
        if info["dtype"] == "BF16":
            return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
        if info["dtype"] == "F16":
            return raw.view("<f2").astype(np.float32).reshape(shape)
        if info["dtype"] == "F32":
            return raw.view("<f4").reshape(shape).copy()
        sys.exit(f"error: tensor {key}: dtype {info['dtype']} not supported (bf16, f16, f32)")


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even (as torch / numpy-free converters do)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype("<u2")


def to_q8_0(x):
    """float32 [..., n] (n % 32 == 0) -> Q8_0 blocks, bytes."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0).astype(np.float32)
    q = np.rint(blocks * inv[:, None]).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


class GgufWriter:
    def __init__(self, weight_type):
        self.weight_type = weight_type
        self.metadata = []
        self.tensors = []  # (name, dims innermost first, ggml type, producer of bytes)

    def add(self, key, value):
        self.metadata.append((key, value))

    def tensor(self, name, array_fn, shape, quantizable=True):
        """shape outermost first, as numpy; array_fn() gives float32 of that shape."""
        dims = list(reversed(shape))
        if len(shape) == 1 or not quantizable or self.weight_type == "f32":
            ggml_type = GGML_F32
        elif self.weight_type == "q8_0" and dims[0] % 32 == 0:
            ggml_type = GGML_Q8_0
        else:
            ggml_type = GGML_BF16
        self.tensors.append((name, dims, ggml_type, array_fn))

    @staticmethod
    def encode(ggml_type, x):
        if ggml_type == GGML_F32:
            return np.ascontiguousarray(x, dtype="<f4").tobytes()
        if ggml_type == GGML_BF16:
            return to_bf16(x).tobytes()
        return to_q8_0(x).tobytes()

    @staticmethod
    def nbytes(ggml_type, dims):
        n = int(np.prod(dims))
        return {GGML_F32: 4 * n, GGML_BF16: 2 * n, GGML_Q8_0: n // 32 * 34}[ggml_type]

    def write(self, path):
        header = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.metadata)))
        for key, value in self.metadata:
            header += gguf_string(key) + gguf_value(value)
        offset = 0
        for name, dims, ggml_type, _ in self.tensors:
            header += gguf_string(name) + struct.pack("<I", len(dims))
            header += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", ggml_type, offset)
            offset += -(-self.nbytes(ggml_type, dims) // GGUF_ALIGN) * GGUF_ALIGN
        header += b"\0" * (-len(header) % GGUF_ALIGN)
        with open(path, "wb") as f:
            f.write(header)
            for name, dims, ggml_type, array_fn in self.tensors:
                data = self.encode(ggml_type, array_fn())
                if len(data) != self.nbytes(ggml_type, dims):
                    sys.exit(f"error: tensor {name}: {len(data)} bytes, expected "
                             f"{self.nbytes(ggml_type, dims)}")
                f.write(data + b"\0" * (-len(data) % GGUF_ALIGN))


def add_plain(w, st, gguf_name, key, quantizable=True):
    """A tensor stored as is (shape and layout of the safetensors one)."""
    shape = st.entries[key][1]["shape"]
    w.tensor(gguf_name, lambda: st.f32(key), shape, quantizable)


def add_general(w, arch, args, cfg):
    w.add("general.architecture", arch)
    w.add("general.name", os.path.basename(os.path.normpath(args.model_dir)))
    w.add("general.alignment", GGUF_ALIGN)
    w.add("general.file_type", {"bf16": 32, "q8_0": 7, "f32": 0}[args.type])
    vocab = cfg["vocab_size"]
    byte_tokens = [chr(c) for c in range(0x21, 0x7F)] + [chr(c) for c in range(0xA1, 0xAD)] + \
        [chr(c) for c in range(0xAE, 0x100)]
    byte_tokens += [chr(0x100 + i) for i in range(256 - len(byte_tokens))]
    tokens = byte_tokens + [f"<t{i}>" for i in range(len(byte_tokens), vocab)]
    w.add("tokenizer.ggml.model", "gpt2")
    w.add("tokenizer.ggml.pre", "default")
    w.add("tokenizer.ggml.tokens", tokens)
    w.add("tokenizer.ggml.token_type", ("i32[]", [1] * vocab))
    w.add("tokenizer.ggml.merges", [])
    w.add("tokenizer.ggml.bos_token_id", cfg.get("bos_token_id", 0))
    w.add("tokenizer.ggml.eos_token_id", cfg.get("eos_token_id", 0))


def add_common(w, st, cfg, arch, n_head_kv):
    """The keys and tensors every architecture here shares: sizes, norms, embeddings, lm_head."""
    w.add(f"{arch}.block_count", cfg["num_hidden_layers"])
    w.add(f"{arch}.context_length", cfg["max_position_embeddings"])
    w.add(f"{arch}.embedding_length", cfg["hidden_size"])
    w.add(f"{arch}.feed_forward_length", cfg["intermediate_size"])
    w.add(f"{arch}.attention.head_count", cfg["num_attention_heads"])
    w.add(f"{arch}.attention.head_count_kv", n_head_kv)
    w.add(f"{arch}.rope.freq_base", float(cfg.get("rope_theta", 10000.0)))
    w.add(f"{arch}.attention.layer_norm_rms_epsilon", float(cfg.get("rms_norm_eps", 1e-6)))
    w.add(f"{arch}.vocab_size", cfg["vocab_size"])
    add_plain(w, st, "token_embd.weight", "model.embed_tokens.weight")
    add_plain(w, st, "output_norm.weight", "model.norm.weight")
    if st.has("lm_head.weight") and not cfg.get("tie_word_embeddings", False):
        add_plain(w, st, "output.weight", "lm_head.weight")
    for i in range(cfg["num_hidden_layers"]):
        add_plain(w, st, f"blk.{i}.attn_norm.weight", f"model.layers.{i}.input_layernorm.weight")
        add_plain(w, st, f"blk.{i}.ffn_norm.weight",
                  f"model.layers.{i}.post_attention_layernorm.weight")


def add_swiglu(w, st, source, target, suffix=""):
    """gate_proj / up_proj / down_proj under `source` as ffn_gate / ffn_up / ffn_down + suffix."""
    for proj, name in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
        add_plain(w, st, f"{target}{name}{suffix}.weight", f"{source}{proj}.weight")


def add_deepseek2(w, st, cfg):
    """DeepSeek-V2/V3 as llama.cpp's deepseek2 (MLA split into attn_k_b / attn_v_b)."""
    arch = "deepseek2"
    n_layer, n_head = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    nope, rope, v_dim = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    rank = cfg["kv_lora_rank"]
    add_common(w, st, cfg, arch, n_head_kv=1)  # absorbed MLA is MQA over the latent
    w.add(f"{arch}.expert_used_count", cfg["num_experts_per_tok"])
    w.add(f"{arch}.leading_dense_block_count", cfg.get("first_k_dense_replace", 0))
    # llama.cpp reads q_lora_rank unless the layer count is a Lite model's; 0 means a full q_proj.
    w.add(f"{arch}.attention.q_lora_rank", cfg.get("q_lora_rank") or 0)
    w.add(f"{arch}.attention.kv_lora_rank", rank)
    w.add(f"{arch}.attention.key_length", rank + rope)
    w.add(f"{arch}.attention.value_length", rank)
    w.add(f"{arch}.attention.key_length_mla", nope + rope)
    w.add(f"{arch}.attention.value_length_mla", v_dim)
    w.add(f"{arch}.expert_feed_forward_length", cfg["moe_intermediate_size"])
    w.add(f"{arch}.expert_count", cfg["n_routed_experts"])
    w.add(f"{arch}.expert_shared_count", cfg.get("n_shared_experts", 0))
    w.add(f"{arch}.expert_weights_scale", float(cfg.get("routed_scaling_factor", 1.0)))
    w.add(f"{arch}.expert_weights_norm", bool(cfg.get("norm_topk_prob", False)))
    w.add(f"{arch}.expert_gating_func", 2 if cfg.get("scoring_func") == "sigmoid" else 1)
    # A group limit that keeps every group limits nothing (and llama.cpp refuses it).
    if cfg.get("n_group", 1) > 1 and cfg.get("topk_group", 1) < cfg["n_group"]:
        # llama.cpp ranks groups by the sum of their top two (biased) scores, DeepSeek-V3's
        # noaux_tc; V2's group_limited_greedy ranks them by their top score, which it lacks.
        if cfg.get("topk_method") != "noaux_tc":
            print(f"warning: topk_method {cfg.get('topk_method')!r}: llama.cpp ranks expert groups "
                  "as noaux_tc does", file=sys.stderr)
        w.add(f"{arch}.expert_group_count", cfg["n_group"])
        w.add(f"{arch}.expert_group_used_count", cfg["topk_group"])
    w.add(f"{arch}.rope.dimension_count", rope)
    yarn = cfg.get("rope_scaling") or {}
    if yarn.get("type", yarn.get("rope_type")) == "yarn":
        w.add(f"{arch}.rope.scaling.type", "yarn")
        w.add(f"{arch}.rope.scaling.factor", float(yarn["factor"]))
        w.add(f"{arch}.rope.scaling.original_context_length",
              int(yarn["original_max_position_embeddings"]))
        w.add(f"{arch}.rope.scaling.yarn_beta_fast", float(yarn.get("beta_fast", 32)))
        w.add(f"{arch}.rope.scaling.yarn_beta_slow", float(yarn.get("beta_slow", 1)))
        # llama.cpp's converter writes 0.1 * mscale_all_dim here and its loader divides by 0.1.
        w.add(f"{arch}.rope.scaling.yarn_log_multiplier", 0.1 * float(yarn.get("mscale_all_dim", 0)))

    for i in range(n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        if st.has(p + "self_attn.q_proj.weight"):
            add_plain(w, st, b + "attn_q.weight", p + "self_attn.q_proj.weight")
        else:
            add_plain(w, st, b + "attn_q_a.weight", p + "self_attn.q_a_proj.weight")
            add_plain(w, st, b + "attn_q_a_norm.weight", p + "self_attn.q_a_layernorm.weight")
            add_plain(w, st, b + "attn_q_b.weight", p + "self_attn.q_b_proj.weight")
        add_plain(w, st, b + "attn_kv_a_mqa.weight", p + "self_attn.kv_a_proj_with_mqa.weight")
        add_plain(w, st, b + "attn_kv_a_norm.weight", p + "self_attn.kv_a_layernorm.weight")
        kv_b = p + "self_attn.kv_b_proj.weight"  # [n_head * (nope + v), rank]

        def k_b(key=kv_b):  # [n_head, rank, nope]
            return st.f32(key).reshape(n_head, nope + v_dim, rank)[:, :nope, :].transpose(0, 2, 1)

        def v_b(key=kv_b):  # [n_head, v, rank]
            return st.f32(key).reshape(n_head, nope + v_dim, rank)[:, nope:, :]

        w.tensor(b + "attn_k_b.weight", k_b, [n_head, rank, nope])
        w.tensor(b + "attn_v_b.weight", v_b, [n_head, v_dim, rank])
        add_plain(w, st, b + "attn_output.weight", p + "self_attn.o_proj.weight")
        if i < cfg.get("first_k_dense_replace", 0):
            add_swiglu(w, st, p + "mlp.", b)
            continue
        add_plain(w, st, b + "ffn_gate_inp.weight", p + "mlp.gate.weight", quantizable=False)
        if st.has(p + "mlp.gate.e_score_correction_bias"):
            add_plain(w, st, b + "exp_probs_b.bias", p + "mlp.gate.e_score_correction_bias")
        n_expert = cfg["n_routed_experts"]
        for proj, name in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"),
                           ("down_proj", "ffn_down_exps")):
            one = st.entries[f"{p}mlp.experts.0.{proj}.weight"][1]["shape"]

            def stacked(prefix=f"{p}mlp.experts.", proj=proj):
                return np.stack([st.f32(f"{prefix}{e}.{proj}.weight") for e in range(n_expert)])

            w.tensor(f"{b}{name}.weight", stacked, [n_expert] + one)
        if cfg.get("n_shared_experts"):
            add_swiglu(w, st, p + "mlp.shared_experts.", b, suffix="_shexp")


def permute_for_llama_rope(x, n_head):
    """HF Llama's q/k rows pair dimension i with i + d/2 (rotate_half); llama.cpp's llama
    architecture rotates adjacent pairs (2i, 2i+1), so its converter reorders each head's rows:
    [n_head, 2, d/2, in] -> [n_head, d/2, 2, in]."""
    return x.reshape(n_head, 2, x.shape[0] // n_head // 2, x.shape[1]).swapaxes(1, 2) \
        .reshape(x.shape)


def add_llama_like(w, st, cfg, arch):
    """Llama (MHA / GQA / MQA) as llama.cpp's llama architecture, Qwen2 as its qwen2 one (NEOX
    RoPE, no reordering; q/k/v biases)."""
    n_layer, n_head = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    n_head_kv = cfg.get("num_key_value_heads", n_head)
    add_common(w, st, cfg, arch, n_head_kv)
    w.add(f"{arch}.rope.dimension_count", cfg.get("head_dim", cfg["hidden_size"] // n_head))
    for i in range(n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        for proj, name, heads in (("q_proj", "attn_q", n_head), ("k_proj", "attn_k", n_head_kv)):
            key = f"{p}self_attn.{proj}.weight"
            if arch == "llama":
                w.tensor(f"{b}{name}.weight",
                         lambda key=key, heads=heads: permute_for_llama_rope(st.f32(key), heads),
                         st.entries[key][1]["shape"])
            else:
                add_plain(w, st, f"{b}{name}.weight", key)
        add_plain(w, st, b + "attn_v.weight", p + "self_attn.v_proj.weight")
        add_plain(w, st, b + "attn_output.weight", p + "self_attn.o_proj.weight")
        for proj, name in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v")):
            if st.has(f"{p}self_attn.{proj}.bias"):
                if arch == "llama":
                    sys.exit(f"error: {p}self_attn.{proj}.bias: attention biases need qwen2")
                add_plain(w, st, f"{b}{name}.bias", f"{p}self_attn.{proj}.bias")
        add_swiglu(w, st, p + "mlp.", b)


ARCHS = {"deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2", "llama": "llama",
         "qwen2": "qwen2"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--type", choices=["bf16", "q8_0", "f32"], default="bf16")
    args = parser.parse_args()
    with open(os.path.join(args.model_dir, "config.json")) as f:
        cfg = json.load(f)
    arch = ARCHS.get(cfg.get("model_type"))
    if arch is None:
        sys.exit(f"error: {args.model_dir}/config.json: model_type {cfg.get('model_type')!r} "
                 f"not supported (one of {', '.join(ARCHS)}; sliding-window Mistral is not)")
    st = SafetensorsDir(args.model_dir)
    w = GgufWriter(args.type)
    add_general(w, arch, args, cfg)
    if arch == "deepseek2":
        add_deepseek2(w, st, cfg)
    else:
        add_llama_like(w, st, cfg, arch)
    w.write(args.out)
    print(f"wrote {args.out}: {len(w.tensors)} tensors, {args.type}")


if __name__ == "__main__":
    main()
