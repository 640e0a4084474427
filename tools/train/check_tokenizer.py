"""Checks our Python BPE encoder (bpe.Tokenizer) against Hugging Face `tokenizers`.

Runs check_tokenizer.js (Node bindings of HF tokenizers, and @huggingface/jinja for the chat
template) on: the whole held-out evaluation file tests/testdata/heldout.txt, a few hundred
lines spread over the training text, and hand-written edge cases (runs of spaces, tabs,
CRLF, digits, contractions, non-ASCII, special tokens inside text). Requires identical ids,
decode(ids) == text for both, and the chat template rendering equal to the DeepSeek-V3
format written out by hand here.

Usage: /usr/bin/python3 tools/train/check_tokenizer.py --model DIR [--npm tools/train/work/npm]
Installs tokenizers@0.23.2 and @huggingface/jinja@0.5.11 into --npm with npm if missing.
Exits 1 on any mismatch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import bpe

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NPM_PACKAGES = ["tokenizers@0.23.2", "@huggingface/jinja@0.5.11"]

EDGE_CASES = [
    "", " ", "  ", "\n", "\n\n\n", " \n ", "a  b", "a   b\tc\t\td", "line\r\nnext\r\n",
    "trailing spaces   ", "   leading", "God's LORD's don't we'll I'm they've you're 'tis",
    "1234567 12 1,000,000 3.14159 2024-01-31", "x=y+1; f(a, b) -> {c: [d]}",
    "caf\u00e9 na\u00efve \u00fcber \u00c5ngstr\u00f6m", "\u4f60\u597d\u4e16\u754c", "emoji \U0001f600!",
    "\u00a0nbsp\u2028sep\u00a0", "tab\tsep\u000bvt\u000cff", "\"Quoted.\"\n(Parens)\n",
    bpe.BOS + "Hello" + bpe.EOS, bpe.USER + "Who was Moses?" + bpe.ASSISTANT + " A prophet." + bpe.EOS,
    "<\uff5cUser\uff5c" + " not special", "ALL CAPS WORDS AND MiXeD cAsE",
]

CHATS = [
    {"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "system", "content": "Be kind."},
                  {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                  {"role": "user", "content": "Who?"}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
     "add_generation_prompt": False},
]


def expected_chat(chat):
    """DeepSeek-V3 format: bos + system prompts joined by blank lines, then the turns."""
    msgs = chat["messages"]
    out = bpe.BOS + "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
    for m in msgs:
        if m["role"] == "user":
            out += bpe.USER + m["content"]
        elif m["role"] == "assistant":
            out += bpe.ASSISTANT + m["content"] + bpe.EOS
    if chat["add_generation_prompt"]:
        out += bpe.ASSISTANT
    return out


def ensure_npm(npm_dir):
    if os.path.isdir(os.path.join(npm_dir, "node_modules", "tokenizers")) and \
            os.path.isdir(os.path.join(npm_dir, "node_modules", "@huggingface", "jinja")):
        return
    os.makedirs(npm_dir, exist_ok=True)
    pkg = os.path.join(npm_dir, "package.json")
    if not os.path.exists(pkg):
        with open(pkg, "w") as f:
            f.write('{"name": "mlarun-train-npm", "private": true}\n')
    subprocess.run(["npm", "install", "--prefix", npm_dir, "--no-audit", "--no-fund",
                    "--save-exact"] + NPM_PACKAGES, check=True)


def training_lines(path, n_lines):
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f.read().split("\n") if l.strip()]
    step = max(1, len(lines) // n_lines)
    return [lines[i] + "\n" for i in range(0, len(lines), step)][:n_lines]


def main(argv=None):
    p = argparse.ArgumentParser(description="compare bpe.Tokenizer with HF tokenizers")
    p.add_argument("--model", required=True, help="directory with tokenizer.json + tokenizer_config.json")
    p.add_argument("--npm", default=os.path.join(HERE, "work", "npm"))
    p.add_argument("--heldout", default=os.path.join(REPO, "tests", "testdata", "heldout.txt"))
    p.add_argument("--train-text", default=os.path.join(HERE, "work", "train.txt"))
    p.add_argument("--train-lines", type=int, default=400)
    args = p.parse_args(argv)
    ensure_npm(args.npm)

    with open(args.heldout, encoding="utf-8") as f:
        texts = [f.read()]
    names = ["heldout file"]
    if os.path.exists(args.train_text):
        lines = training_lines(args.train_text, args.train_lines)
        texts += lines
        names += [f"train line {i}" for i in range(len(lines))]
    texts += EDGE_CASES
    names += [f"edge case {i}" for i in range(len(EDGE_CASES))]

    tok = bpe.Tokenizer(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        cases, out = os.path.join(tmp, "cases.json"), os.path.join(tmp, "out.json")
        with open(cases, "w", encoding="utf-8") as f:
            json.dump({"texts": texts, "chats": CHATS}, f)
        subprocess.run(["node", os.path.join(HERE, "check_tokenizer.js"), args.npm, args.model,
                        cases, out], check=True)
        with open(out, encoding="utf-8") as f:
            ref = json.load(f)

    failures, n_tokens = 0, 0
    for name, text, ref_ids, ref_dec in zip(names, texts, ref["ids"], ref["decoded"]):
        ids = tok.encode(text)
        n_tokens += len(ids)
        if ids != ref_ids:
            failures += 1
            k = next((i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b),
                     min(len(ids), len(ref_ids)))
            print(f"MISMATCH {name}: first difference at token {k}: ours {ids[k:k + 8]} "
                  f"HF {ref_ids[k:k + 8]}")
        if tok.decode(ids) != text or ref_dec != text:
            failures += 1
            print(f"DECODE MISMATCH {name}: {text[:60]!r}")
    for chat, rendered in zip(CHATS, ref["chats"]):
        if rendered != expected_chat(chat):
            failures += 1
            print(f"CHAT MISMATCH: jinja {rendered!r} expected {expected_chat(chat)!r}")
    print(f"{len(texts)} texts, {n_tokens} tokens ({len(ref['ids'][0])} in the held-out file), "
          f"{len(CHATS)} chats: {'OK' if failures == 0 else f'{failures} FAILURES'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
