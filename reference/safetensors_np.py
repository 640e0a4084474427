"""Read (and write) Hugging Face model directories with NumPy only.

Sources for the formats implemented here:
  * safetensors file layout (8-byte little-endian u64 header length N, N bytes of
    JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]}} with an
    optional "__metadata__" entry, then the raw little-endian tensor bytes, offsets
    relative to the end of the header): https://github.com/huggingface/safetensors
    (README, "Format" section).
  * Sharded checkpoints: `model.safetensors.index.json` with a "weight_map"
    {tensor name: shard file name} (Hugging Face transformers convention).
  * BF16: the upper 16 bits of an IEEE-754 binary32 value.
  * F8_E4M3: the OCP 8-bit floating point spec (OFP8, "E4M3" / NVIDIA e4m3fn):
    1 sign bit, 4 exponent bits with bias 7, 3 mantissa bits, no infinities,
    S.1111.111 is NaN, subnormals (exponent 0) are m/8 * 2^-6, max finite 448.
  * Block-wise FP8 weight scaling of DeepSeek-V3 (arXiv 2412.19437, section 3.3.2,
    "Fine-Grained Quantization"): each weight `W` comes with `W_scale_inv` of shape
    [ceil(rows/B0), ceil(cols/B1)] (block size from config
    `quantization_config.weight_block_size`) and
    W[r, c] = fp8(W[r, c]) * scale_inv[r // B0, c // B1].

Every weight is returned as a float64 array (FP8 weights dequantized).
"""

import json
import math
import os
import struct

import numpy as np

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
SCALE_SUFFIX = "_scale_inv"
DEFAULT_FP8_BLOCK = (128, 128)

# Bytes per element of each supported safetensors dtype.
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1,
             "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
_NUMPY_DIRECT = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8",
                 "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}


# ----------------------------------------------------------------------------
# Scalar formats
# ----------------------------------------------------------------------------

def _e4m3_code_value(code):
    """Value of one 8-bit e4m3fn code (OCP OFP8 spec)."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent = (code >> 3) & 0xF
    mantissa = code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        return sign * (mantissa / 8.0) * 2.0 ** -6
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3_TABLE = np.array([_e4m3_code_value(c) for c in range(256)], dtype=np.float64)
E4M3_MAX = 448.0


def decode_bf16(bits):
    """uint16 bit patterns -> float64 (bf16 is the upper half of an f32)."""
    bits = np.asarray(bits, dtype=np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def encode_bf16(values):
    """float values -> uint16 bf16 bit patterns, round to nearest even."""
    f32_bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    f32_bits = f32_bits.astype(np.uint64)
    rounded = (f32_bits + 0x7FFF + ((f32_bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def decode_e4m3(codes):
    """uint8 e4m3fn codes -> float64."""
    return E4M3_TABLE[np.asarray(codes, dtype=np.uint8)]


def encode_e4m3(values):
    """float values -> uint8 e4m3fn codes: round to nearest, ties to the even
    code, saturating at +-448 (used only by the writer for self-test models)."""
    values = np.asarray(values, dtype=np.float64)
    magnitude = np.minimum(np.abs(values), E4M3_MAX)
    positive_values = E4M3_TABLE[:0x7F]          # codes 0x00..0x7E, increasing
    upper = np.clip(np.searchsorted(positive_values, magnitude), 1, 0x7E)
    lower = upper - 1
    dist_lower = magnitude - positive_values[lower]
    dist_upper = positive_values[upper] - magnitude
    pick_upper = (dist_upper < dist_lower) | ((dist_upper == dist_lower) & (upper % 2 == 0))
    codes = np.where(pick_upper, upper, lower).astype(np.uint8)
    return codes | np.where(values < 0, 0x80, 0).astype(np.uint8)


def fp8_block_shape(rows, cols, block):
    return (math.ceil(rows / block[0]), math.ceil(cols / block[1]))


def dequantize_fp8_blockwise(codes, scale_inv, block):
    """codes [rows, cols] uint8, scale_inv [ceil(rows/B0), ceil(cols/B1)]."""
    if codes.ndim != 2:
        raise ValueError(f"FP8 block dequantization needs a 2-D weight, got shape {codes.shape}")
    rows, cols = codes.shape
    expected = fp8_block_shape(rows, cols, block)
    if tuple(scale_inv.shape) != expected:
        raise ValueError(f"scale_inv shape {tuple(scale_inv.shape)} does not match weight "
                         f"{codes.shape} with block {tuple(block)} (expected {expected})")
    row_block = np.arange(rows) // block[0]
    col_block = np.arange(cols) // block[1]
    return decode_e4m3(codes) * scale_inv[row_block[:, None], col_block[None, :]]


def quantize_fp8_blockwise(weight, block):
    """weight [rows, cols] -> (codes uint8 [rows, cols], scale_inv f32 [..]), with
    scale_inv = max|block| / 448 so each block uses the full e4m3 range."""
    rows, cols = weight.shape
    n_row_blocks, n_col_blocks = fp8_block_shape(rows, cols, block)
    scale_inv = np.ones((n_row_blocks, n_col_blocks), dtype=np.float32)
    codes = np.zeros((rows, cols), dtype=np.uint8)
    for rb in range(n_row_blocks):
        for cb in range(n_col_blocks):
            r0, c0 = rb * block[0], cb * block[1]
            tile = weight[r0:r0 + block[0], c0:c0 + block[1]]
            amax = float(np.max(np.abs(tile)))
            scale = np.float32(amax / E4M3_MAX) if amax > 0 else np.float32(1.0)
            scale_inv[rb, cb] = scale
            codes[r0:r0 + block[0], c0:c0 + block[1]] = encode_e4m3(tile / float(scale))
    return codes, scale_inv


# ----------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------

def read_safetensors_raw(path):
    """Return {name: (dtype string, raw numpy array)}; F8/BF16 stay as codes."""
    with open(path, "rb") as handle:
        blob = handle.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short to be a safetensors file")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} exceeds the file size")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape = info["dtype"], tuple(int(d) for d in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        if dtype not in _ITEMSIZE:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
        n_elements = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != n_elements * _ITEMSIZE[dtype]:
            raise ValueError(f"{path}: tensor {name!r} has bad data_offsets {[begin, end]} "
                             f"for dtype {dtype} shape {list(shape)}")
        raw = bytes(data[begin:end])
        if dtype == "BF16":
            array = np.frombuffer(raw, dtype="<u2").reshape(shape)
        elif dtype == "F8_E4M3":
            array = np.frombuffer(raw, dtype=np.uint8).reshape(shape)
        else:
            array = np.frombuffer(raw, dtype=_NUMPY_DIRECT[dtype]).reshape(shape)
        tensors[name] = (dtype, array)
    return tensors


def _to_float64(dtype, array):
    if dtype == "BF16":
        return decode_bf16(array)
    if dtype == "F8_E4M3":
        return decode_e4m3(array)
    return array.astype(np.float64)


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json"), "r", encoding="utf-8") as handle:
        return json.load(handle)


def load_raw_tensors(model_dir):
    """All tensors of a model directory, single-file or sharded, undecoded."""
    index_path = os.path.join(model_dir, INDEX_FILE)
    single_path = os.path.join(model_dir, SINGLE_FILE)
    if os.path.exists(index_path):
        with open(index_path, "r", encoding="utf-8") as handle:
            weight_map = json.load(handle)["weight_map"]
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            for name, entry in read_safetensors_raw(os.path.join(model_dir, shard)).items():
                if name in tensors:
                    raise ValueError(f"tensor {name!r} appears in more than one shard")
                tensors[name] = entry
        missing = [n for n, shard in weight_map.items() if n not in tensors]
        if missing:
            raise ValueError(f"{INDEX_FILE} lists tensors missing from their shards: {missing[:5]}")
        return tensors
    if os.path.exists(single_path):
        return read_safetensors_raw(single_path)
    raise FileNotFoundError(f"{model_dir}: neither {SINGLE_FILE} nor {INDEX_FILE} found")


def fp8_block_size(config):
    quant = config.get("quantization_config") or {}
    block = quant.get("weight_block_size") or DEFAULT_FP8_BLOCK
    return (int(block[0]), int(block[1]))


def load_model_dir(model_dir):
    """Return (config dict, {name: float64 ndarray}) with FP8 weights dequantized
    and the `_scale_inv` companions consumed."""
    config = load_config(model_dir)
    raw = load_raw_tensors(model_dir)
    block = fp8_block_size(config)
    weights = {}
    for name, (dtype, array) in raw.items():
        if name.endswith(SCALE_SUFFIX) and name[:-len(SCALE_SUFFIX)] in raw:
            base_dtype = raw[name[:-len(SCALE_SUFFIX)]][0]
            if base_dtype != "F8_E4M3":
                raise ValueError(f"{name!r} accompanies a {base_dtype} tensor, expected F8_E4M3")
            continue
        if dtype == "F8_E4M3":
            scale_name = name + SCALE_SUFFIX
            if scale_name not in raw:
                raise ValueError(f"FP8 tensor {name!r} has no {scale_name!r}")
            scale_inv = _to_float64(*raw[scale_name])
            weights[name] = dequantize_fp8_blockwise(array, scale_inv, block)
        else:
            weights[name] = _to_float64(dtype, array)
    return config, weights


# ----------------------------------------------------------------------------
# Writing (for self-test models)
# ----------------------------------------------------------------------------

def _encode(dtype, array):
    if dtype == "BF16":
        return encode_bf16(array).astype("<u2").tobytes()
    if dtype == "F8_E4M3":
        if array.dtype != np.uint8:
            raise ValueError("F8_E4M3 tensors must be given as uint8 codes")
        return array.tobytes()
    return np.ascontiguousarray(array, dtype=_NUMPY_DIRECT[dtype]).tobytes()


def write_safetensors(path, entries, metadata=None):
    """entries: {name: (dtype string, ndarray)}; F8_E4M3 arrays are uint8 codes,
    other arrays are values converted (BF16 rounded to nearest even)."""
    header, chunks, offset = {}, [], 0
    for name, (dtype, array) in entries.items():
        payload = _encode(dtype, array)
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(payload)]}
        chunks.append(payload)
        offset += len(payload)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * ((8 - len(header_bytes) % 8) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(header_bytes)))
        handle.write(header_bytes)
        for chunk in chunks:
            handle.write(chunk)


def encode_weights(weights, dtype_of, fp8_block=DEFAULT_FP8_BLOCK):
    """weights {name: float array}; dtype_of(name, array) -> "F32"/"BF16"/"F8_E4M3"/...
    Returns safetensors entries, adding `<name>_scale_inv` for FP8 weights."""
    entries = {}
    for name, array in weights.items():
        dtype = dtype_of(name, array)
        if dtype == "F8_E4M3":
            codes, scale_inv = quantize_fp8_blockwise(np.asarray(array, np.float64), fp8_block)
            entries[name] = ("F8_E4M3", codes)
            entries[name + SCALE_SUFFIX] = ("F32", scale_inv)
        else:
            entries[name] = (dtype, np.asarray(array))
    return entries


def save_model_dir(model_dir, config, entries, n_shards=1):
    """Write config.json and the tensors, as one file or `n_shards` shards plus
    model.safetensors.index.json. A weight and its _scale_inv share a shard."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    if n_shards <= 1:
        write_safetensors(os.path.join(model_dir, SINGLE_FILE), entries, {"format": "pt"})
        return
    base_names = [n for n in entries if not (n.endswith(SCALE_SUFFIX) and n[:-len(SCALE_SUFFIX)] in entries)]
    weight_map, total_size = {}, 0
    for shard in range(n_shards):
        file_name = f"model-{shard + 1:05d}-of-{n_shards:05d}.safetensors"
        shard_entries = {}
        for name in base_names[shard::n_shards]:
            shard_entries[name] = entries[name]
            if name + SCALE_SUFFIX in entries:
                shard_entries[name + SCALE_SUFFIX] = entries[name + SCALE_SUFFIX]
        for name, (dtype, array) in shard_entries.items():
            weight_map[name] = file_name
            total_size += array.size * _ITEMSIZE[dtype]
        write_safetensors(os.path.join(model_dir, file_name), shard_entries, {"format": "pt"})
    with open(os.path.join(model_dir, INDEX_FILE), "w", encoding="utf-8") as handle:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, handle, indent=2)
