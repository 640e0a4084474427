"""Float64 building blocks shared by the DeepSeek and Llama-family references.

Sources:
  * RMSNorm: Zhang & Sennrich, "Root Mean Square Layer Normalization"
    (arXiv 1910.07467): y = x / sqrt(mean(x^2) + eps) * weight.
  * SwiGLU MLP: Shazeer, "GLU Variants Improve Transformer" (arXiv 2002.05202):
    down(silu(gate x) * up x), silu(z) = z * sigmoid(z).
  * RoPE: Su et al., "RoFormer" (arXiv 2104.09864): rotate pairs of features by
    position * inv_freq[i], inv_freq[i] = theta^(-2i/d). Two pairings are used:
    interleaved pairs (x[2i], x[2i+1]) (DeepSeek, as specified for mlarun) and the
    Hugging Face Llama "rotate_half" pairs (x[i], x[i + d/2]).
  * YaRN: Peng et al., "YaRN: Efficient Context Window Extension of Large
    Language Models" (arXiv 2309.00071), sections 3.2-3.4 (NTK-by-parts ramp
    between interpolated and extrapolated frequencies, attention temperature
    0.1 ln(s) + 1), in the parameterisation of the DeepSeek-V2 release
    (beta_fast, beta_slow, mscale, mscale_all_dim).
  * Llama 3 frequency scaling ("rope_type": "llama3"): Meta Llama 3.1 release
    (low_freq_factor / high_freq_factor smoothing of wavelengths).
"""

import math

import numpy as np


def rms_norm(x, weight, eps):
    """x [..., dim], weight [dim]."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def silu(x):
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-x))


def swiglu_mlp(x, gate_weight, up_weight, down_weight):
    """x [n_tokens, hidden]; gate/up [intermediate, hidden]; down [hidden, intermediate]."""
    return (silu(x @ gate_weight.T) * (x @ up_weight.T)) @ down_weight.T


def softmax(scores, axis=-1):
    shifted = scores - np.max(scores, axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# ----------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------

def default_inv_freq(rope_dim, theta):
    """inv_freq[i] = 1 / theta^(2i / rope_dim), i in [0, rope_dim/2)."""
    return 1.0 / theta ** (np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)


def yarn_get_mscale(scale, mscale):
    """Attention temperature of YaRN: 0.1 * mscale * ln(scale) + 1 for scale > 1."""
    if scale <= 1.0:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_dim(n_rotations, rope_dim, theta, original_max_position):
    """Dimension index whose wavelength fits n_rotations times into the original
    context (YaRN eq. 17 solved for d)."""
    return (rope_dim * math.log(original_max_position / (n_rotations * 2 * math.pi))
            / (2 * math.log(theta)))


def yarn_inv_freq(rope_dim, theta, factor, original_max_position, beta_fast, beta_slow):
    """NTK-by-parts blend: dims below `low` extrapolate (original frequency),
    dims above `high` interpolate (frequency / factor), linear ramp in between."""
    freq_extra = default_inv_freq(rope_dim, theta)
    freq_inter = freq_extra / factor
    low = max(math.floor(yarn_correction_dim(beta_fast, rope_dim, theta, original_max_position)), 0)
    high = min(math.ceil(yarn_correction_dim(beta_slow, rope_dim, theta, original_max_position)),
               rope_dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(rope_dim // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    extrapolation_mask = 1.0 - ramp
    return freq_inter * (1.0 - extrapolation_mask) + freq_extra * extrapolation_mask


def llama3_inv_freq(rope_dim, theta, rope_scaling):
    inv_freq = default_inv_freq(rope_dim, theta)
    factor = float(rope_scaling["factor"])
    low_freq_factor = float(rope_scaling["low_freq_factor"])
    high_freq_factor = float(rope_scaling["high_freq_factor"])
    old_context = float(rope_scaling["original_max_position_embeddings"])
    low_freq_wavelen = old_context / low_freq_factor
    high_freq_wavelen = old_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(is_medium, smoothed, scaled)


def rope_angles(positions, inv_freq):
    """positions [n_tokens] -> angles [n_tokens, rope_dim/2]."""
    return np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]


def rope_interleaved(x, cos, sin):
    """x [..., rope_dim]; cos/sin broadcastable to [..., rope_dim/2].
    (x[2i], x[2i+1]) -> (a cos - b sin, a sin + b cos)."""
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty(x.shape, dtype=np.float64)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def rope_rotate_half(x, cos, sin):
    """x [..., head_dim]; pairs (x[i], x[i + head_dim/2]) (HF Llama layout)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
