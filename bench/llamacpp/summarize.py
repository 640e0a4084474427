#!/usr/bin/python3
"""Summarises bench/llamacpp/compare.sh output: per weights format and depth, each engine's
prefill and decode tok/s (min-max over rounds) and mlarun's speed-up, paired within each round
(the engines run back to back in a round; rounds are minutes apart on a drifting VM).
Usage: summarize.py LOG [LOG...]"""
import json
import statistics
import sys
from collections import defaultdict


def main():
    # (weights, depth) -> engine -> metric -> [value per round]
    runs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for path in sys.argv[1:]:
        with open(path) as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                row = json.loads(line)
                if "engine" in row:
                    engine = "llama.cpp"
                    weights = "int8" if "q8_0" in row["model"] else "bf16"
                else:
                    engine, weights = "mlarun", row["weights"].lower()
                for metric in ("prefill_tok_s", "decode_tok_s"):
                    runs[(weights, row["depth"])][engine][metric].append(row[metric])
    if not runs:
        sys.exit("error: no JSON lines in " + ", ".join(sys.argv[1:]))
    print("| weights | depth | engine | prefill tok/s | decode tok/s |")
    print("|---|---|---|---|---|")
    for (weights, depth), engines in sorted(runs.items()):
        for engine in ("llama.cpp", "mlarun"):
            m = engines.get(engine)
            if not m:
                continue
            cells = [f"{min(m[k]):,.1f}-{max(m[k]):,.1f}" for k in ("prefill_tok_s", "decode_tok_s")]
            print(f"| {weights} | {depth} | {engine} | {cells[0]} | {cells[1]} |")
        if "llama.cpp" in engines and "mlarun" in engines:
            cells = []
            for k in ("prefill_tok_s", "decode_tok_s"):
                pairs = list(zip(engines["mlarun"][k], engines["llama.cpp"][k]))
                ratios = [a / b for a, b in pairs]
                cells.append(f"x{statistics.median(ratios):.2f} ({len(pairs)} rounds)")
            print(f"| {weights} | {depth} | mlarun / llama.cpp | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
