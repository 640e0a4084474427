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
# Past the training context: chunks of LONG_CONTEXT tokens, full cache vs windows no longer than
# the training context (RoPE scores depend on relative positions only, so a window keeps every
# query inside the distances the model was trained on).
LONG_CONTEXT = 1024
LONG_VARIANTS = [("full, bf16", "full", "bf16"), ("window:256,sinks:4", "window:256,sinks:4", "bf16"),
                 ("window:128,sinks:4", "window:128,sinks:4", "bf16")]

DESIGNS = [  # (label, model dir, attention)
    ("MHA", "models/baselines/mha", "MHA"),
    ("GQA (4 kv heads)", "models/baselines/gqa", "GQA"),
    ("MQA", "models/baselines/mqa", "MQA"),
    ("MLA dense", "models/baselines/mla_dense", "MLA"),
    ("MLA + MoE", "models/default", "MLA"),
]
VARIANTS = [  # (label, kv-policy, kv-dtype); every design runs all of them
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
    ("window:32,sinks:4 + int8", "window:32,sinks:4", "int8"),
]


def run_json(cmd):
    print("$ " + " ".join(cmd), flush=True)
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit("command failed: %s\n%s" % (" ".join(cmd), out.stderr))
    try:  # kv-report prints one indented document, perplexity one line after its progress
        return json.loads(out.stdout), out.stderr
    except json.JSONDecodeError:
        return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def perplexity(mlarun, threads, model, policy="full", dtype="bf16", expert_stats=False, context=CONTEXT):
    cmd = [mlarun, "perplexity", "--model", model, "--file", HELDOUT, "--context", str(context),
           "--kv-policy", policy, "--kv-dtype", dtype, "-t", str(threads), "--json"]
    if expert_stats:
        cmd.append("--expert-stats")
    result, stderr = run_json(cmd)
    result["command"] = " ".join(["build/bin/mlarun"] + cmd[1:])
    if expert_stats:
        result["expert_cv"] = [float(m) for m in re.findall(r"cv ([0-9.]+)", stderr)]
    return result


def kv_bytes(mlarun, model, policy="full", dtype="bf16", context=CONTEXT):
    report, _ = run_json([mlarun, "kv-report", "--model", model, "--context", str(context),
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
    colors = {"MHA": "#1f77b4", "GQA": "#2ca02c", "MQA": "#9467bd", "MLA dense": "#ff7f0e", "MLA + MoE": "#d62728"}
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
    def marker(p, x, y):
        color = colors.get(p.get("design", p["attention"]), colors.get(p["attention"], "black"))
        fill = "white" if p["kv_dtype"] == "int8" else color
        style = 'fill="%s" stroke="%s" stroke-width="1.5"' % (fill, color)
        if p["policy"] == "full":
            return '<circle cx="%.1f" cy="%.1f" r="5" %s/>' % (x, y, style)
        if "compress" in p["policy"]:
            return '<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" %s/>' % (
                x, y - 6, x + 6, y, x, y + 6, x - 6, y, style)
        return '<rect x="%.1f" y="%.1f" width="9" height="9" %s/>' % (x - 4.5, y - 4.5, style)

    for p in points:
        out.append(marker(p, px(p["kv_bytes_per_token"]), py(p["perplexity"])))
    # Full-cache bf16 points joined per design, labelled.
    legend = []
    for design in dict.fromkeys(p["design"] for p in points):
        full = next(p for p in points if p["design"] == design and p["policy"] == "full" and p["kv_dtype"] == "bf16")
        out.append('<text x="%.1f" y="%.1f" font-size="11">%s</text>' % (
            px(full["kv_bytes_per_token"]) + 8, py(full["perplexity"]) - 6, design))
        legend.append((design, full))
    ly = top + 12
    for design, full in legend:
        out.append(marker(full, w - right + 20, ly))
        out.append('<text x="%d" y="%d">%s, full cache (%.1f)</text>' % (w - right + 32, ly + 4, design, full["perplexity"]))
        ly += 18
    ly += 8
    sample = {"attention": "", "design": "", "kv_dtype": "bf16"}
    for policy, dtype, text in [("full", "bf16", "full cache, bf16"), ("full", "int8", "hollow: int8 cache"),
                                ("window:64", "bf16", "window (+ sinks)"), ("window:32,compress:8", "bf16",
                                                                            "window + sinks + compress")]:
        out.append(marker(dict(sample, policy=policy, kv_dtype=dtype), w - right + 20, ly))
        out.append('<text x="%d" y="%d">%s</text>' % (w - right + 32, ly + 4, text))
        ly += 18
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def measure(args):
    """Runs every (design, variant); returns the measured points with their ratios."""
    def point(design, model, attention, label, policy, dtype, context=CONTEXT):
        result = perplexity(args.mlarun, args.threads, model, policy, dtype, context=context,
                            expert_stats=(context == CONTEXT and attention == "MLA" and policy == "full"
                                          and dtype == "bf16"))
        row = kv_bytes(args.mlarun, model, policy, dtype, context=context)
        # Bytes held at the end of a context-long sequence, per token of context (for "full" this
        # is the bytes per token; bounded policies hold fewer rows than tokens).
        return {"label": "%s %s" % (design, label) + ("" if context == CONTEXT else " @%d" % context),
                "variant": label, "design": design, "attention": attention, "model": model,
                "policy": policy, "kv_dtype": dtype, **result,
                "kv_bytes_per_row": result["kv_bytes_per_token"],
                "kv_bytes_per_token": row["total_bytes"] / context}

    designs = []
    for design, model, attention in DESIGNS:
        if os.path.exists(os.path.join(REPO, model, "config.json")):
            designs.append((design, model, attention))
        else:
            print("skipping %s: %s missing" % (design, model))
    points = [point(*d, *v) for d in designs for v in VARIANTS]
    points += [point(*d, *v, context=LONG_CONTEXT) for d in designs for v in LONG_VARIANTS]
    full = {p["design"]: p for p in points if p["policy"] == "full" and p["kv_dtype"] == "bf16"
            and p["context"] == CONTEXT}
    mha = next((p for p in full.values() if p["attention"] == "MHA"), None)
    for p in points:
        own = full[p["design"]]
        p["kv_vs_own_full"] = p["kv_bytes_per_token"] / own["kv_bytes_per_token"]
        p["ppl_vs_own_full"] = p["perplexity"] / own["perplexity"]
        p["kv_vs_mha"] = p["kv_bytes_per_token"] / mha["kv_bytes_per_token"] if mha else None
        p["ppl_vs_mha"] = p["perplexity"] / mha["perplexity"] if mha else None
    return points


def tables(points):
    """Markdown: one row per design at full cache, then a policy x design matrix."""
    long_points = [p for p in points if p.get("context", CONTEXT) == LONG_CONTEXT]
    points = [p for p in points if p.get("context", CONTEXT) == CONTEXT]
    designs = list(dict.fromkeys(p["design"] for p in points))
    at = {(p["design"], p["variant"]): p for p in points}
    out = ["| design | model | KV bytes/token (bf16) | vs MHA | held-out ppl | vs MHA | int8 cache: bytes/token | ppl |",
           "|---|---|---|---|---|---|---|---|"]
    for d in designs:
        f, q = at[(d, "full, bf16")], at[(d, "full, int8")]
        out.append("| %s | `%s` | %s | %s | %.3f | %s | %s | %.3f |" % (
            d, f["model"], f"{f['kv_bytes_per_token']:,.0f}", "%.3f" % f["kv_vs_mha"] if f["kv_vs_mha"] else "-",
            f["perplexity"], "%+.1f%%" % (100 * (f["ppl_vs_mha"] - 1)) if f["ppl_vs_mha"] else "-",
            f"{q['kv_bytes_per_token']:,.0f}", q["perplexity"]))
    out += ["", "Each cell: held-out perplexity (change vs the same model with a full bf16 cache) / KV bytes "
            "held per token of context at the end of a %d-token chunk (fraction of the design's own "
            "full bf16 cache)." % CONTEXT, "",
            "| policy, cache dtype | " + " | ".join(designs) + " |", "|---" * (len(designs) + 1) + "|"]
    for label, _, _ in VARIANTS:
        cells = []
        for d in designs:
            p = at[(d, label)]
            cells.append("%.2f (%+.1f%%) / %s (%.3f)" % (p["perplexity"], 100 * (p["ppl_vs_own_full"] - 1),
                                                       f"{p['kv_bytes_per_token']:,.0f}", p["kv_vs_own_full"]))
        out.append("| %s | %s |" % (label, " | ".join(cells)))
    if long_points:
        at_long = {(p["design"], p["variant"]): p for p in long_points}
        out += ["", "Past the training context: chunks of %d tokens (the models were trained on %d). Cell: "
                "held-out perplexity / KV bytes held per token of context." % (LONG_CONTEXT, CONTEXT), "",
                "| policy | " + " | ".join(designs) + " |", "|---" * (len(designs) + 1) + "|"]
        for label, _, _ in LONG_VARIANTS:
            cells = ["%.2f / %s" % (at_long[(d, label)]["perplexity"], f"{at_long[(d, label)]['kv_bytes_per_token']:,.0f}")
                     for d in designs]
            out.append("| %s | %s |" % (label, " | ".join(cells)))
    mla = next((p for p in points if p.get("expert_cv")), None)
    if mla is not None:
        out += ["", "Expert load of `%s` on the held-out text (tokens per routed expert; `--expert-stats`), "
                "coefficient of variation per MoE layer: %s." % (mla["model"], ", ".join("%.3f" % v for v in mla["expert_cv"])),
                "", "Command of the expert-load figure: `%s`" % mla["command"]]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlarun", default="build/bin/mlarun")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--render-only", action="store_true",
                    help="re-render docs/quality.md and .svg from docs/quality.json without measuring")
    args = ap.parse_args()
    data = os.path.join(REPO, "docs/quality.json")
    if args.render_only:
        points = json.load(open(data))
    else:
        points = measure(args)  # every point carries its "context" (from perplexity's JSON)
        json.dump(points, open(data, "w"), indent=1)
    svg_plot([p for p in points if p.get("context", CONTEXT) == CONTEXT], os.path.join(REPO, "docs/quality.svg"))
    table = tables(points)
    doc = os.path.join(REPO, "docs/quality.md")
    text = open(doc).read() if os.path.exists(doc) else "<!-- BEGIN TABLE -->\n<!-- END TABLE -->\n"
    text = re.sub(r"<!-- BEGIN TABLE -->.*<!-- END TABLE -->",
                  lambda _: "<!-- BEGIN TABLE -->\n" + table + "\n<!-- END TABLE -->", text, flags=re.S)
    open(doc, "w").write(text)
    print(table)


if __name__ == "__main__":
    main()
