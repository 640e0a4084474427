#!/usr/bin/python3
"""How much error the quantised probabilities of the int8-cache attention add.

The P V kernel over int8 cache rows (src/kernels/cpu/attention_i8_avx512bf16.cc) multiplies
probabilities quantised to int16 by the rows' int8 values with `vpdpwssd` (32 multiply-adds per
instruction). Quantising them to 8 bits instead would let `vpdpbusd` do 64 per instruction, about
halving the P V instructions of the compute-bound decode attention. This script measures the
accuracy that would cost, with the kernel's scheme: per column group of `--group` values each
row has a scale max|v| / 127 (kv_row.h); p <= 1 is the exponent of a score minus the running
maximum; the quantised weight is round(p * row_scale / unit) with unit = max_rows(row_scale) /
top, top = 32767 for int16, 255 for 8 bits (unsigned: p * row_scale >= 0).

Prints, per spread of the scores, the softmax entropy and the rms error of the attention output
(relative to the output's rms) that the int8 rows cause with float probabilities, and that int16
and 8-bit probabilities add on top. Usage: /usr/bin/python3 tools/quality/p_precision.py
"""
import argparse

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4640, help="cache rows attended")
    parser.add_argument("--dim", type=int, default=512, help="values per row (kv_lora_rank)")
    parser.add_argument("--group", type=int, default=128, help="values per row scale")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    n_groups = args.dim // args.group
    v = rng.standard_normal((args.rows, args.dim))
    grouped = v.reshape(args.rows, n_groups, args.group)
    row_scale = np.abs(grouped).max(axis=2) / 127  # [rows, groups]
    v_int = np.clip(np.round(grouped / row_scale[:, :, None]), -127, 127)  # int8 values
    v_deq = (v_int * row_scale[:, :, None]).reshape(args.rows, args.dim)

    def quantised_output(p, top):
        out = np.empty((n_groups, args.group))
        for g in range(n_groups):
            unit = row_scale[:, g].max() / top
            weights = np.minimum(np.round(p * row_scale[:, g] / unit), top)
            out[g] = (weights @ v_int[:, g, :]) * unit
        return out.reshape(args.dim) / p.sum()

    print(f"{args.rows} rows x {args.dim} values, row scales per {args.group}")
    print("score std  entropy  int8 rows  + int16 p  + 8-bit p   (rms error / rms output)")
    for spread in [0.5, 1.0, 2.0, 4.0, 8.0]:
        scores = rng.standard_normal(args.rows) * spread
        p = np.exp(scores - scores.max())
        exact = (p @ v) / p.sum()
        float_p = (p @ v_deq) / p.sum()
        rms = np.sqrt((exact**2).mean())

        def err(x, ref):
            return np.sqrt(((x - ref) ** 2).mean()) / rms

        q = p / p.sum()
        entropy = -(q * np.log(q + 1e-300)).sum()
        print(f"{spread:9.1f}  {entropy:7.1f}  {err(float_p, exact):9.2e}  "
              f"{err(quantised_output(p, 32767), float_p):9.2e}  "
              f"{err(quantised_output(p, 255), float_p):9.2e}")


if __name__ == "__main__":
    main()
