#!/usr/bin/python3
"""Summarises bench/llamacpp/compare.sh output as a Markdown table: per weights format, each
engine's prefill and decode tok/s at each depth (min-max over rounds) and mlarun's speed-up, the
median of the per-round ratios (the engines run back to back in a round; rounds are minutes apart
on a drifting VM).
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
                    weights = ("int8" if "q8_0" in row["model"] else
                               "q4_k" if "q4_k_m" in row["model"] else "bf16")
                else:
                    engine, weights = "mlarun", row["weights"].lower()
                for metric in ("prefill_tok_s", "decode_tok_s"):
                    runs[(weights, row["depth"])][engine][metric].append(row[metric])
    if not runs:
        sys.exit("error: no JSON lines in " + ", ".join(sys.argv[1:]))
    depths = sorted({depth for _, depth in runs})
    header = " | ".join(f"prefill @{d} | decode @{d}" for d in depths)
    print(f"| weights | engine | {header} |")
    print("|---|---|" + "---|" * (2 * len(depths)))
    for weights in sorted({w for w, _ in runs}):
        for engine in ("llama.cpp", "mlarun"):
            cells = []
            for depth in depths:
                m = runs[(weights, depth)].get(engine, {})
                for k in ("prefill_tok_s", "decode_tok_s"):
                    cells.append(f"{min(m[k]):,.1f}-{max(m[k]):,.1f}" if m.get(k) else "")
            print(f"| {weights} | {engine} | {' | '.join(cells)} |")
        cells = []
        rounds = 0
        for depth in depths:
            engines = runs[(weights, depth)]
            for k in ("prefill_tok_s", "decode_tok_s"):
                pairs = list(zip(engines.get("mlarun", {}).get(k, []),
                                 engines.get("llama.cpp", {}).get(k, [])))
                rounds = max(rounds, len(pairs))
                cells.append(f"x{statistics.median(a / b for a, b in pairs):.2f}" if pairs else "")
        print(f"| {weights} | mlarun / llama.cpp ({rounds} rounds) | {' | '.join(cells)} |")
    if len(depths) > 1:  # the decode's drop at the last depth, paired within each round
        drops = []
        for weights in sorted({w for w, _ in runs}):
            for engine in ("llama.cpp", "mlarun"):
                first = runs[(weights, depths[0])].get(engine, {}).get("decode_tok_s", [])
                last = runs[(weights, depths[-1])].get(engine, {}).get("decode_tok_s", [])
                if first and last:
                    ratio = statistics.median(b / a for a, b in zip(first, last))
                    drops.append(f"{engine} {weights} {100 * (1 - ratio):.1f}%")
        print(f"\nDecode @{depths[-1]} slower than @{depths[0]} by: " + ", ".join(drops))

if __name__ == "__main__":
    main()
