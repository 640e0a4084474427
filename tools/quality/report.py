#!/usr/bin/env python3
"""Quality vs KV-cache memory of the trained models (project issue 7).

Runs `mlarun perplexity` on the held-out text for every attention design (the trained MLA+MoE
default model and the MHA / GQA / MQA baselines) and, for the MLA model, under bounded-memory
cache policies and cache dtypes; reads bytes per token from `mlarun kv-report --json`, and the
expert load from `--expert-stats`. Writes docs/quality.json, the tables of docs/quality.md (between
its BEGIN/END markers) and docs/quality.svg.

Usage: /usr/bin/python3 tools/quality/report.py [--mlarun build/bin/mlarun] [--threads 2]
Each row's command is printed, so every number can be reproduced by one command.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HELDOUT = "tests/testdata/heldout.txt"
CONTEXT = 256

DESIGNS = [  # (label, model dir, attention)
    ("MHA", "models/baselines/mha", "MHA"),
    ("GQA (4 kv heads)", "models/baselines/gqa", "GQA"),
    ("MQA", "models/baselines/mqa", "MQA"),
    ("MLA + MoE", "models/default", "MLA"),
]
MLA_VARIANTS = [  # (label, kv-policy, kv-dtype)
    ("full, bf16", "full", "bf16"),
    ("full, int8", "full", "int8"),
    ("window:128", "window:128", "bf16"),
    ("window:64", "window:64", "bf16"),
    ("window:32", "window:32", "bf16"),
    ("window:64,sinks:4", "window:64,sinks:4", "bf16"),
    ("window:32,sinks:4", "window:32,sinks:4", "bf16"),
    ("window:64,sinks:4,compress:4", "window:64,sinks:4,compress:4", "bf16"),
    ("window:32,sinks:4,compress:8", "window:32,sinks:4,compress:8", "bf16"),
    ("window:64,sinks:4 + int8", "window:64,sinks:4", "int8"),
]


def run_json(cmd):
    print("$ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), out.stderr))
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def perplexity(mlarun, threads, model, policy="full", dtype="bf16", expert_stats=False):
    cmd = [mlarun, "perplexity", "--model", model, "--file", HELDOUT, "--context", str(CONTEXT),
           "--kv-policy", policy, "--kv-dtype", dtype, "-t", str(threads), "--json"]
    if expert_stats:
        cmd.append("--expert-stats")
    result, stderr = run_json(cmd)
    result["command"] = " ".join(["build/bin/mlarun"] + cmd[1:])
    if expert_stats:
        result["expert_cv"] = [float(m) for m in re.findall(r"cv ([0-9.]+)", stderr)]
    return result


def kv_bytes(mlarun, model, policy="full", dtype="bf16"):
    report, _ = run_json([mlarun, "kv-report", "--model", model, "--context", str(CONTEXT),
                          "--kv-policy", policy, "--kv-dtype", dtype, "--json"])
    return report["rows"][0]


def svg_plot(points, path):
    """Held-out perplexity vs KV bytes per token (log x) for every measured configuration."""
    w, h, left, right, top, bottom = 900, 520, 80, 300, 50, 60
    xs = [p["kv_bytes_per_token"] for p in points]
    ys = [p["perplexity"] for p in points]
    lx0, lx1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = min(ys) * 0.95, max(ys) * 1.05
    pw, ph = w - left - right, h - top - bottom
    px = lambda x: left + (math.log10(x) - lx0) / max(1e-9, lx1 - lx0) * pw
    py = lambda y: top + ph - (y - y0) / max(1e-9, y1 - y0) * ph
    colors = {"MHA": "#1f77b4", "GQA": "#2ca02c", "MQA": "#9467bd", "MLA": "#d62728"}
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (w, h), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="28" font-size="16" text-anchor="middle">Held-out perplexity vs KV cache '
           'bytes per token (context %d)</text>' % (left + pw // 2, CONTEXT)]
    for e in range(lx0, lx1 + 1):
        x = px(10 ** e)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, top, x, top + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s B</text>' % (x, top + ph + 18, f"{10 ** e:,}"))
    for i in range(6):
        y = y0 + (y1 - y0) * i / 5
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (left, py(y), left + pw, py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (left - 6, py(y) + 4, y))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (left, top, pw, ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">KV cache bytes per token held '
               '(all layers; policies: rows held at the context / context)</text>' % (left + pw // 2, h - 15))
    for i, p in enumerate(points):
        color = colors.get(p["attention"], "black")
        out.append('<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>' % (px(p["kv_bytes_per_token"]), py(p["perplexity"]), color))
        ly = top + 12 + 17 * i
        out.append('<circle cx="%d" cy="%d" r="5" fill="%s"/>' % (w - right + 20, ly, color))
        out.append('<text x="%d" y="%d">%s (%.1f)</text>' % (w - right + 30, ly + 4, p["label"], p["perplexity"]))
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlarun", default="build/bin/mlarun")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    points = []
    for label, model, attention in DESIGNS:
        if not os.path.exists(os.path.join(REPO, model, "config.json")):
            print("skipping %s: %s missing" % (label, model))
            continue
        result = perplexity(args.mlarun, args.threads, model, expert_stats=attention == "MLA")
        row = kv_bytes(args.mlarun, model)
        points.append({"label": label, "attention": attention, "policy": "full", "kv_dtype": "bf16",
                       "kv_bytes_per_token": row["bytes_per_token"], **result})
    mla = next((p for p in points if p["attention"] == "MLA"), None)
    if mla is not None:
        for label, policy, dtype in MLA_VARIANTS[1:]:
            result = perplexity(args.mlarun, args.threads, "models/default", policy, dtype)
            row = kv_bytes(args.mlarun, "models/default", policy, dtype)
            points.append({"label": "MLA " + label, "attention": "MLA", "policy": policy, "kv_dtype": dtype,
                           "kv_bytes_per_token": row["total_bytes"] / CONTEXT, **result})
    mha = next((p for p in points if p["attention"] == "MHA"), None)
    for p in points:
        p["kv_vs_mha"] = p["kv_bytes_per_token"] / mha["kv_bytes_per_token"] if mha else None
        p["ppl_vs_mha"] = p["perplexity"] / mha["perplexity"] if mha else None
    json.dump(points, open(os.path.join(REPO, "docs/quality.json"), "w"), indent=1)
    svg_plot(points, os.path.join(REPO, "docs/quality.svg"))
    rows = ["| configuration | KV bytes/token | vs MHA | held-out perplexity | vs MHA | command |",
            "|---|---|---|---|---|---|"]
    for p in points:
        rows.append("| %s | %s | %s | %.2f | %s | `%s` |" % (
            p["label"], f"{p['kv_bytes_per_token']:,.0f}",
            "%.3f" % p["kv_vs_mha"] if p["kv_vs_mha"] else "-", p["perplexity"],
            "%+.1f%%" % (100 * (p["ppl_vs_mha"] - 1)) if p["ppl_vs_mha"] else "-", p["command"]))
    table = "\n".join(rows)
    if mla is not None and mla.get("expert_cv"):
        table += "\n\nExpert load (tokens per routed expert on the held-out text), coefficient of variation per MoE layer: " + \
            ", ".join("%.3f" % v for v in mla["expert_cv"]) + "\n"
    doc = os.path.join(REPO, "docs/quality.md")
    text = open(doc).read() if os.path.exists(doc) else "<!-- BEGIN TABLE -->\n<!-- END TABLE -->\n"
    text = re.sub(r"<!-- BEGIN TABLE -->.*<!-- END TABLE -->",
                  lambda _: "<!-- BEGIN TABLE -->\n" + table + "\n<!-- END TABLE -->", text, flags=re.S)
    open(doc, "w").write(text)
    print(table)


if __name__ == "__main__":
    main()
