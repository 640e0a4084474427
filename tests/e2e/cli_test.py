#!/usr/bin/env python3
"""CLI contract: bad input gives exit code 1 and one `error:` line naming the file, tensor, field
or option; good runs print what the README says. Run: cli_test.py --mlarun BIN --workdir DIR."""
import argparse
import json
import os
import shutil
import subprocess
import sys


# The kernel tables' names (IsaName, src/kernels/isa.cc).
ISAS = {"scalar", "avx2", "avx512", "avx512-bf16", "amx"}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlarun", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    bin_ = args.mlarun
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    failures = []

    def expect_error(name, cmd, *needles):
        r = run(cmd)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        ok = r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and all(
            n in lines[0] for n in needles)
        print(("PASS " if ok else "FAIL ") + name + ": rc=%d %s" % (r.returncode, r.stderr.strip()))
        if not ok:
            failures.append(name)

    model = os.path.join(work, "tiny")
    r = run([bin_, "make-model", "--preset", "tiny-v2", "--out", model])
    assert r.returncode == 0, r.stderr
    ids = "1,2,3"
    expect_error("unknown preset", [bin_, "make-model", "--preset", "huge", "--out", work + "/x"],
                 "--preset", "unknown preset 'huge'")
    expect_error("missing model dir", [bin_, "generate", "--model", work + "/none", "--prompt-ids", ids],
                 work + "/none/config.json", "cannot open")
    expect_error("bad policy", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-policy", "ring:3"],
                 "--kv-policy", "unknown policy 'ring'")
    expect_error("window 0", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-policy", "window:0"],
                 "--kv-policy", "window must be >= 1")
    expect_error("tiny budget", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-budget", "100B"],
                 "--kv-budget", "cannot hold one KV block")
    # from_chars reads "nan" and overflowing digits; both had reached a float-to-int cast.
    expect_error("nan budget", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-budget", "nan"],
                 "--kv-budget", "'nan' is not a size")
    expect_error("budget past 1 EiB", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-budget",
                                       "99999999999999999999999"], "--kv-budget", "more than 1 EiB")
    expect_error("budget exhausted", [bin_, "generate", "--model", model, "--prompt-ids", ids, "-n", "300",
                                      "--ignore-eos", "--kv-budget", "24KiB", "--kv-block-size", "16"],
                 "--kv-budget", "KV cache is full")
    expect_error("bad kv dtype", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--kv-dtype", "fp4"],
                 "--kv-dtype", "'fp4'")
    expect_error("bad load mode", [bin_, "generate", "--model", model, "--prompt-ids", ids, "--load", "swap"],
                 "--load", "'swap'", "mmap, copy")
    expect_error("bad ids", [bin_, "generate", "--model", model, "--prompt-ids", "1,x"], "--prompt-ids", "'x'")
    expect_error("token outside vocab", [bin_, "logits", "--model", model, "--ids", "1,999999", "--out",
                                         work + "/l.npy"], "999999", "outside the vocabulary")
    expect_error("bad attention", [bin_, "logits", "--model", model, "--ids", ids, "--out", work + "/l.npy",
                                   "--attention", "flash"], "--attention", "'flash'", "auto, naive, absorbed")
    expect_error("bad prefill attention", [bin_, "serve", "--model", model, "--port", "0",
                                           "--prefill-attention", "flash"],
                 "--prefill-attention", "'flash'", "auto, naive, absorbed")
    # Unsupported architecture.
    arch = os.path.join(work, "arch")
    shutil.copytree(model, arch)
    cfg = json.load(open(arch + "/config.json"))
    cfg["architectures"] = ["GPT2LMHeadModel"]
    json.dump(cfg, open(arch + "/config.json", "w"))
    expect_error("unsupported architecture", [bin_, "generate", "--model", arch, "--prompt-ids", ids],
                 arch + "/config.json", "'GPT2LMHeadModel' is not supported")

    # Good runs.
    r = run([bin_, "generate", "--model", model, "--prompt-ids", ids, "-n", "5", "--ignore-eos", "--expert-stats"])
    ok = r.returncode == 0 and len(r.stdout.strip().split(",")) == 5 and "KV bytes" in r.stderr and "cv" in r.stderr
    print(("PASS" if ok else "FAIL") + " generate prints 5 ids, a summary and expert stats")
    if not ok:
        failures.append("generate")
    # -n -1 (as in llama.cpp): until the context is full; 3 prompt ids in a context of 16.
    r = run([bin_, "generate", "--model", model, "--prompt-ids", ids, "-n", "-1", "-c", "16", "--ignore-eos"])
    ok = r.returncode == 0 and len(r.stdout.strip().split(",")) == 13 and "generated: 13 (length)" in r.stderr
    print(("PASS" if ok else "FAIL") + " generate -n -1 -c 16 fills the context: 13 ids")
    if not ok:
        print(r.stdout, r.stderr)
        failures.append("generate -n -1")
    v2 = os.path.join(work, "v2lite")
    os.makedirs(v2)
    shutil.copy("tests/testdata/configs/deepseek-v2-lite.config.json", v2 + "/config.json")
    r = run([bin_, "kv-report", "--model", v2, "--context", "1000", "--json", "--plot", work + "/kv.svg"])
    report = json.loads(r.stdout)
    rows = {row["name"]: row for row in report["rows"]}
    ok = (r.returncode == 0 and report["context"] == 1000 and rows["MLA"]["bytes_per_token"] == 31104 and
          rows["MHA"]["bytes_per_token"] == 276480 and report["rows"][0]["name"] == "model" and
          open(work + "/kv.svg").read().startswith("<svg"))
    print(("PASS" if ok else "FAIL") + " kv-report --json on DeepSeek-V2-Lite: MLA 31104, MHA 276480 bytes/token")
    if not ok:
        failures.append("kv-report")
    r = run([bin_, "kv-report", "--model", v2, "--context", "1000"])
    ok = r.returncode == 0 and "31,104" in r.stdout and "276,480" in r.stdout
    print(("PASS" if ok else "FAIL") + " kv-report table prints 31,104 and 276,480")
    if not ok:
        failures.append("kv-report table")
    # int8 latent rows: 512 int8 values + 4 f32 scales + 64 int8 RoPE values + their 2 f32 scales.
    r = run([bin_, "kv-report", "--model", v2, "--context", "1000", "--kv-dtype", "int8", "--json"])
    model_row = json.loads(r.stdout)["rows"][0] if r.returncode == 0 else {}
    ok = model_row.get("bytes_per_token") == 600 * 27 and model_row.get("kv_dtype") == "int8"
    print(("PASS" if ok else "FAIL") + " kv-report --kv-dtype int8 on DeepSeek-V2-Lite: 600 bytes per layer")
    if not ok:
        failures.append("kv-report int8")

    # bench --json: one object per depth with the documented fields, consistent with each other.
    r = run([bin_, "bench", "--model", model, "-t", "1", "--depth", "0,64", "-p", "8", "-n", "4",
             "--repeats", "2", "--json"])
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    fields = {"weights", "kv_dtype", "isa", "threads", "load", "load_seconds", "depth",
              "prefill_tokens", "prefill_tok_s",
              "decode_tokens",
              "decode_tok_s", "bytes_per_decoded_token", "decode_gb_s", "peak_read_gb_s",
              "peak_read_gb_s_min", "peak_read_gb_s_max", "roofline_fraction",
              "decode_product_time_fraction", "decode_product_gb_s",
              "decode_attention_time_fraction", "decode_drop_vs_first_depth"}
    ok = (r.returncode == 0 and len(lines) == 2 and all(set(l) == fields for l in lines) and
          [l["depth"] for l in lines] == [0, 64] and all(l["threads"] == 1 for l in lines) and
          all(l["kv_dtype"] == "bf16" and l["isa"] in ISAS for l in lines) and
          all(l["load"] == "copy" and l["load_seconds"] > 0 for l in lines) and
          lines[0]["load_seconds"] == lines[1]["load_seconds"] and
          all(l["prefill_tok_s"] > 0 and l["decode_tok_s"] > 0 and l["peak_read_gb_s"] > 0 and
              l["roofline_fraction"] > 0 and l["decode_product_time_fraction"] > 0 and
              l["decode_attention_time_fraction"] > 0 and
              l["decode_product_time_fraction"] + l["decode_attention_time_fraction"] <= 1 and
              l["decode_product_gb_s"] > 0 for l in lines) and
          all(0 < l["peak_read_gb_s_min"] <= l["peak_read_gb_s"] <= l["peak_read_gb_s_max"]
              for l in lines) and
          all(abs(l["decode_gb_s"] - l["bytes_per_decoded_token"] * l["decode_tok_s"] / 1e9) <
              1e-9 * l["decode_gb_s"] for l in lines) and
          (lines[1]["bytes_per_decoded_token"] - lines[0]["bytes_per_decoded_token"]) % 64 == 0 and
          lines[1]["bytes_per_decoded_token"] > lines[0]["bytes_per_decoded_token"] and
          lines[0]["decode_drop_vs_first_depth"] == 0 and lines[1]["decode_drop_vs_first_depth"] < 1)
    print(("PASS" if ok else "FAIL") + " bench --json: two depths, all fields, GB/s = bytes x tok/s, product + attention shares <= 1, one load time, probe min <= median <= max")
    if not ok:
        print(r.stdout, r.stderr)
        failures.append("bench json")
    # The setup fields follow the options; an int8 cache adds fewer bytes per context row.
    r8 = run([bin_, "bench", "--model", model, "-t", "1", "--depth", "0,64", "-p", "8", "-n", "4",
              "--repeats", "1", "--kv-dtype", "int8", "--isa", "scalar", "--json"])
    lines8 = [json.loads(l) for l in r8.stdout.splitlines() if l.strip()]
    ok = (r8.returncode == 0 and len(lines8) == 2 and len(lines) == 2 and
          all(l["kv_dtype"] == "int8" and l["isa"] == "scalar" for l in lines8) and
          0 < (lines8[1]["bytes_per_decoded_token"] - lines8[0]["bytes_per_decoded_token"]) <
          (lines[1]["bytes_per_decoded_token"] - lines[0]["bytes_per_decoded_token"]) and
          # One round: the drop is that round's ratio of the two decode rates.
          abs(lines8[1]["decode_drop_vs_first_depth"] -
              (1 - lines8[1]["decode_tok_s"] / lines8[0]["decode_tok_s"])) < 1e-12)
    print(("PASS" if ok else "FAIL") + " bench --json names kv_dtype and isa; int8 cache rows add fewer bytes; one round's drop = 1 - the rates' ratio")
    if not ok:
        failures.append("bench --json kv_dtype")
    # --products: the decode's products by shape, whose calls read the bytes of every weight
    # multiplied per token (all of the bytes per decoded token but the f32 embedding row and the
    # mean context of 8 + 4 / 2 cache rows) and take part of the decode's time.
    with open(os.path.join(model, "config.json")) as f:
        hidden = json.load(f)["hidden_size"]
    kv_row_bytes = ((lines[1]["bytes_per_decoded_token"] - lines[0]["bytes_per_decoded_token"]) // 64
                    if len(lines) == 2 else 0)
    rp = run([bin_, "bench", "--model", model, "-t", "1", "--depth", "0", "-p", "8", "-n", "4",
              "--repeats", "1", "--products", "--json"])
    linesp = [json.loads(l) for l in rp.stdout.splitlines() if l.strip()]
    shapes = linesp[0].get("decode_products", []) if len(linesp) == 1 else []
    product_fields = {"jobs", "rows", "cols", "tokens", "weight_bytes_per_call",
                      "calls_per_decoded_token", "us_per_call", "gb_s", "decode_time_fraction"}
    ok = (rp.returncode == 0 and len(shapes) > 1 and all(set(p) == product_fields for p in shapes) and
          all(p["jobs"] >= 1 and p["tokens"] == 1 and p["calls_per_decoded_token"] > 0 and
              p["gb_s"] > 0 for p in shapes) and
          [p["decode_time_fraction"] for p in shapes] ==
          sorted((p["decode_time_fraction"] for p in shapes), reverse=True) and
          abs(sum(p["decode_time_fraction"] for p in shapes) -
              linesp[0]["decode_product_time_fraction"]) < 1e-9 and
          abs(sum(p["weight_bytes_per_call"] * p["calls_per_decoded_token"] for p in shapes) -
              (linesp[0]["bytes_per_decoded_token"] - 4 * hidden - 10 * kv_row_bytes)) < 1e-3)
    rt = run([bin_, "bench", "--model", model, "-t", "1", "--depth", "0", "-p", "8", "-n", "4",
              "--repeats", "1", "--products"])
    ok = ok and rt.returncode == 0 and "decode products at depth 0" in rt.stdout
    print(("PASS" if ok else "FAIL") + " bench --products: shapes longest first, their time = the products' share, their bytes = the weights less the embedding row")
    if not ok:
        print(rp.stdout, rp.stderr, rt.stdout)
        failures.append("bench --products")
    # --weights bf16 rounds the f32 model's matrices to bf16 at load: about half the bytes.
    rb = run([bin_, "bench", "--model", model, "-t", "1", "--depth", "0", "-p", "8", "-n", "4",
              "--repeats", "1", "--weights", "bf16", "--json"])
    linesb = [json.loads(l) for l in rb.stdout.splitlines() if l.strip()]
    ok = (rb.returncode == 0 and len(linesb) == 1 and lines and lines[0]["weights"].lower() == "f32" and
          linesb[0]["weights"].lower() == "bf16" and
          0.4 < linesb[0]["bytes_per_decoded_token"] / lines[0]["bytes_per_decoded_token"] < 0.75)
    print(("PASS" if ok else "FAIL") + " bench --weights bf16 on an f32 model: weights bf16, fewer bytes per token")
    if not ok:
        print(rb.stdout, rb.stderr)
        failures.append("bench --weights bf16")
    expect_error("bench --weights int4", [bin_, "bench", "--model", model, "--weights", "int4"],
                 "--weights", "as-loaded, bf16, int8")
    # quantize --weights bf16 writes the conversion once: it loads as bf16 with the same bytes.
    bf16_dir = os.path.join(work, "tiny-bf16")
    rq = run([bin_, "quantize", "--model", model, "--weights", "bf16", "--out", bf16_dir])
    rw = run([bin_, "bench", "--model", bf16_dir, "-t", "1", "--depth", "0", "-p", "8", "-n", "4",
              "--repeats", "1", "--json"])
    linesw = [json.loads(l) for l in rw.stdout.splitlines() if l.strip()]
    ok = (rq.returncode == 0 and rw.returncode == 0 and len(linesw) == 1 and linesb and
          linesw[0]["weights"].lower() == "bf16" and
          linesw[0]["bytes_per_decoded_token"] == linesb[0]["bytes_per_decoded_token"])
    print(("PASS" if ok else "FAIL") + " quantize --weights bf16 writes a bf16 model (same bytes per token)")
    if not ok:
        print(rq.stderr, rw.stdout, rw.stderr)
        failures.append("quantize --weights bf16")
    expect_error("quantize --weights f16", [bin_, "quantize", "--model", model, "--weights", "f16",
                                            "--out", os.path.join(work, "x16")], "--weights", "int8", "bf16")
    expect_error("bench repeats 0", [bin_, "bench", "--model", model, "--repeats", "0"], "--repeats")
    # Checked before a depth is filled (filling it would run for minutes first).
    expect_error("bench past the context", [bin_, "bench", "--model", model, "--depth", "0,99999999"],
                 "--depth 99999999 + -p 512 + -n 64", "max_position_embeddings")
    expect_error("bench negative depth", [bin_, "bench", "--model", model, "--depth", "-1"],
                 "--depth", "'-1' is not a context depth")
    # Tens of thousands of threads exhausted the process's thread limit (and the shell's).
    expect_error("threads above the limit", [bin_, "generate", "--model", model, "--prompt-ids", ids,
                                             "-t", "100000"], "--threads", "100000")
    expect_error("negative threads", [bin_, "generate", "--model", model, "--prompt-ids", ids, "-t", "-2"],
                 "--threads")
    expect_error("http threads 0", [bin_, "serve", "--model", model, "--http-threads", "0"],
                 "--http-threads")
    expect_error("unknown option", [bin_, "generate", "--model", model, "--bogus"], "--bogus")
    # --out must not be the model being read, a file, or a non-empty directory without config.json
    # (`quantize --out /` had written a model into the root).
    expect_error("quantize in place", [bin_, "quantize", "--model", model, "--out", model + "/"],
                 "--out", "is the model directory being read")
    other = os.path.join(work, "other")
    os.makedirs(other)
    open(os.path.join(other, "notes.txt"), "w").write("keep me\n")
    expect_error("quantize into a foreign directory", [bin_, "quantize", "--model", model, "--out", other],
                 "--out " + other, "not a model directory")
    expect_error("make-model into a foreign directory", [bin_, "make-model", "--preset", "tiny-v2", "--out",
                                                         other], "--out " + other, "not a model directory")
    ok = sorted(os.listdir(other)) == ["notes.txt"]
    print(("PASS" if ok else "FAIL") + " the foreign directory is untouched")
    if not ok:
        failures.append("foreign directory untouched")
    # Out-of-range options are refused up front, not clamped or wrapped around.
    for name, cmd, needle in [
            ("n -2", ["generate", "--prompt-ids", ids, "-n", "-2"], "--max-tokens"),
            ("top-p 2", ["generate", "--prompt-ids", ids, "--top-p", "2"], "--top-p"),
            ("min-p 5", ["generate", "--prompt-ids", ids, "--min-p", "5"], "--min-p"),
            ("negative temperature", ["generate", "--prompt-ids", ids, "--temperature", "-1"], "--temperature"),
            ("negative repeat penalty", ["generate", "--prompt-ids", ids, "--repeat-penalty", "-1"],
             "--repeat-penalty"),
            ("ctx-size past the model", ["generate", "--prompt-ids", ids, "-c", "99999999"],
             "--ctx-size = 99999999 positions"),
            ("perplexity context past the model", ["perplexity", "-f", os.path.abspath(__file__), "-c", "99999999"],
             "--context = 99999999 positions"),
            ("max-running 0", ["serve", "--max-running", "0"], "--max-running"),
            ("port 99999", ["serve", "--port", "99999"], "--port"),
            ("max-body 0", ["serve", "--max-body", "0"], "--max-body"),
            ("max-context past the model", ["serve", "--max-context", "99999999"], "--max-context")]:
        expect_error(name, [bin_, cmd[0], "--model", model] + cmd[1:], needle)

    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
