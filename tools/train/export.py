"""Exports a trained model as a Hugging Face checkpoint directory, and reads one back.

Writes config.json, model.safetensors (bf16 weights; mlp.gate.e_score_correction_bias in
F32), tokenizer.json and tokenizer_config.json. With tie_word_embeddings the checkpoint has
no lm_head.weight (HF convention).

safetensors format (huggingface/safetensors README, "Format"): 8-byte little-endian
unsigned header length N, then N bytes of UTF-8 JSON {name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {...}} (offsets relative to the end of the
header), then the tensor bytes, little-endian, row-major. The header is padded with
spaces to a multiple of 8 bytes, and tensors are laid out with larger dtypes first
(F32 before BF16, then by name), so every tensor starts aligned to its element size.
bf16 is the upper 16 bits of the IEEE float32, rounded to nearest even (torch's
conversion).

Usage: /usr/bin/python3 tools/train/export.py --checkpoint work/runs/mla_moe/final.pt --out DIR
"""

import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from model import CausalLM  # noqa: E402

DTYPE_SIZE = {"F32": 4, "BF16": 2}
F32_TENSORS = ("e_score_correction_bias",)


def tensor_bytes(t, dtype):
    t = t.detach().contiguous().cpu()
    if dtype == "F32":
        return t.float().numpy().astype("<f4").tobytes()
    if dtype == "BF16":
        return t.float().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, bytes)}."""
    order = sorted(tensors, key=lambda n: (-DTYPE_SIZE[tensors[n][0]], n))
    header, offset = {}, 0
    for name in order:
        dtype, shape, data = tensors[name]
        expected = DTYPE_SIZE[dtype] * int(np.prod(shape, dtype=np.int64))
        if len(data) != expected:
            raise ValueError(f"{name}: {len(data)} bytes, expected {expected}")
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header["__metadata__"] = metadata or {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in order:
            f.write(tensors[name][2])


def read_safetensors(path):
    """-> {name: float32 torch tensor} (BF16/F16/F32 only)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = raw[base + begin:base + end]
        if info["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4")
        elif info["dtype"] == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out


def export_model(model, out_dir, tokenizer_dir):
    """model: CausalLM. Writes the four files into out_dir (created if missing)."""
    os.makedirs(out_dir, exist_ok=True)
    config = dict(model.config)
    tensors = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        dtype = "F32" if name.endswith(F32_TENSORS) else "BF16"
        tensors[name] = (dtype, tuple(t.shape), tensor_bytes(t, dtype))
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(out_dir, name))


def load_exported(model_dir):
    """Exported directory -> CausalLM in float32 (bf16 weights widened exactly), eval mode."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    model = CausalLM(config)
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    if config.get("tie_word_embeddings"):
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ValueError(f"{model_dir}: missing tensors {missing}, unexpected {unexpected}")
    if config.get("tie_word_embeddings"):
        model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


def main(argv=None):
    p = argparse.ArgumentParser(description="export a training checkpoint as a HF model directory")
    p.add_argument("--checkpoint", required=True, help=".pt file written by train.py")
    p.add_argument("--tokenizer", default=os.path.join(HERE, "work", "tokenizer"))
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    ckpt = torch.load(args.checkpoint, map_location="cpu")
    model = CausalLM(ckpt["config"])
    model.load_state_dict(ckpt["model"])
    export_model(model, args.out, args.tokenizer)
    print(f"exported {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
