"""Prepares the English training text for mlarun's small trained models.

Sources (Debian packages; installed with apt-get if missing):
  * KJV Bible: package `bible-kjv-text` (the compressed text /usr/lib/bible.data),
    read through the `bible` program of package `bible-kjv`
    (`bible -l10000 gen1:1-rev22:21`, one verse per line). Public domain.
  * The Jargon File 4.4.7: package `jargon-text`,
    /usr/share/doc/jargon-text/jargon.txt.gz. Public domain (see its copyright file).
The optional `fortunes` and `python3.11-doc` texts are NOT used: the corpus stays
public domain, so any part of it may be committed as test data.

Cleaning (deterministic, see clean_* below):
  * KJV: one chapter per block: a heading line "Genesis 1", then one verse per line,
    verse numbers dropped.
  * Jargon File: paragraphs re-flowed to one line each; tables (box-drawing characters),
    tables of contents and the glossary word list are dropped; preformatted paragraphs
    (deep indentation or aligned columns) keep their line breaks and are dropped when
    they are mostly non-letters (ASCII art). Typographic quotes, dashes, ellipsis and
    no-break spaces become ASCII; other non-ASCII characters (e.g. accented letters)
    are kept.
  * Whitespace: tabs and runs of spaces become one space, no trailing spaces, blocks
    separated by exactly one blank line, text ends with a single newline.

Split: each source's blocks are grouped, in order, into contiguous chunks of at least
CHUNK_CHARS characters; chunk k goes to held-out when k % HELDOUT_EVERY ==
HELDOUT_EVERY - 1 (about 5%), otherwise to train.

Outputs:
  tools/train/work/train.txt, tools/train/work/heldout.txt  (gitignored)
  tests/testdata/heldout.txt: the first HELDOUT_TEST_CHUNKS held-out chunks of each
  source (KJV, then Jargon), about 80 KB, the committed evaluation file.

Usage: /usr/bin/python3 tools/train/prepare_data.py
"""

import gzip
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORK = os.path.join(HERE, "work")
TEST_HELDOUT = os.path.join(REPO, "tests", "testdata", "heldout.txt")

JARGON_FILE = "/usr/share/doc/jargon-text/jargon.txt.gz"
KJV_DATA = "/usr/lib/bible.data"
KJV_RANGE = "gen1:1-rev22:21"

CHUNK_CHARS = 20000
HELDOUT_EVERY = 20
HELDOUT_TEST_CHUNKS = 2

# Typographic characters mapped to ASCII.
ASCII_MAP = {
    "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\u00b4": "'",
    "\u2014": "--", "\u2013": "-", "\u2212": "-", "\u2026": "...", "\u00a0": " ",
    "\u2022": "*", "\u00ad": "",
}
BOX_DRAWING = re.compile("[\u2500-\u257f]")


def ensure_packages():
    """apt-get installs bible-kjv(-text) and jargon-text when their files are missing."""
    missing = []
    if not (os.path.exists(KJV_DATA) and shutil.which("bible")):
        missing += ["bible-kjv", "bible-kjv-text"]
    if not os.path.exists(JARGON_FILE):
        missing.append("jargon-text")
    if not missing:
        return
    cmd = ["apt-get", "install", "-y"] + missing
    if os.geteuid() != 0:
        cmd = ["sudo"] + cmd
    print("installing:", " ".join(missing), file=sys.stderr)
    subprocess.run(cmd, check=True)


def normalise_spaces(line):
    return re.sub(r"[ \t]+", " ", line).strip()


def to_ascii_punct(text):
    for src, dst in ASCII_MAP.items():
        text = text.replace(src, dst)
    return text


def clean_kjv(raw):
    """`bible` output -> list of chapter blocks ("Book N\\nverse\\nverse...")."""
    blocks, current = [], None
    verse = re.compile(r"^\s+\d+ (.*)$")
    for line in raw.splitlines():
        if not line.strip():
            continue
        m = verse.match(line)
        if m:
            if current is None:
                raise ValueError("KJV: verse before the first chapter heading")
            current.append(normalise_spaces(m.group(1)))
        else:
            current = [normalise_spaces(line)]
            blocks.append(current)
    return ["\n".join(b) for b in blocks if len(b) > 1]


def _is_preformatted(lines):
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if indent not in (3,) and len(lines) > 1:
            return True
        if re.search(r"\S {3,}\S", line):
            return True
    return False


def _letter_fraction(text):
    visible = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in visible) / max(1, len(visible))


def clean_jargon(raw):
    """jargon.txt -> list of paragraph blocks."""
    raw = to_ascii_punct(raw)
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", raw) if p.strip()]
    kept = []
    for para in paragraphs:
        lines = [l.rstrip() for l in para.split("\n") if l.strip()]
        text = "\n".join(lines)
        if BOX_DRAWING.search(text):
            continue
        if _is_preformatted(lines):
            if _letter_fraction(text) < 0.6:
                continue
            kept.append("\n".join(normalise_spaces(l) for l in lines))
        else:
            kept.append(normalise_spaces(" ".join(lines)))
    # Tables of contents and the glossary word list: runs of >= 4 consecutive short
    # one-line paragraphs without sentence punctuation.
    def is_list_item(p):
        return "\n" not in p and len(p) < 60 and not p.endswith(tuple(".:;!?,\"'"))
    out, i = [], 0
    while i < len(kept):
        j = i
        while j < len(kept) and is_list_item(kept[j]):
            j += 1
        if j - i >= 4:
            i = j
            continue
        out.extend(kept[i:max(j, i + 1)])
        i = max(j, i + 1)
    return [p for p in out if p.strip() not in ("Table of Contents",)]


def chunk_blocks(blocks):
    """Contiguous groups of blocks, each at least CHUNK_CHARS characters (last may be shorter)."""
    chunks, current, size = [], [], 0
    for block in blocks:
        current.append(block)
        size += len(block) + 2
        if size >= CHUNK_CHARS:
            chunks.append("\n\n".join(current))
            current, size = [], 0
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def split(chunks):
    train = [c for k, c in enumerate(chunks) if k % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    held = [c for k, c in enumerate(chunks) if k % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    return train, held


def read_sources():
    kjv_raw = subprocess.run(["bible", "-l10000", KJV_RANGE], check=True,
                             capture_output=True, text=True).stdout
    with gzip.open(JARGON_FILE, "rt", encoding="utf-8") as f:
        jargon_raw = f.read()
    return {"kjv": clean_kjv(kjv_raw), "jargon": clean_jargon(jargon_raw)}


def write(path, chunks):
    text = "\n\n".join(chunks).strip("\n") + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return len(text.encode("utf-8"))


def main():
    ensure_packages()
    sources = read_sources()
    train_all, held_all, test_chunks = [], [], []
    for name, blocks in sources.items():
        chunks = chunk_blocks(blocks)
        train, held = split(chunks)
        print(f"{name}: {len(blocks)} blocks, {len(chunks)} chunks, "
              f"{sum(map(len, train))} train chars, {sum(map(len, held))} held-out chars")
        train_all += train
        held_all += held
        test_chunks += held[:HELDOUT_TEST_CHUNKS]
    n_train = write(os.path.join(WORK, "train.txt"), train_all)
    n_held = write(os.path.join(WORK, "heldout.txt"), held_all)
    n_test = write(TEST_HELDOUT, test_chunks)
    print(f"train.txt {n_train} bytes, heldout.txt {n_held} bytes "
          f"({100.0 * n_held / (n_train + n_held):.1f}%), {TEST_HELDOUT} {n_test} bytes")


if __name__ == "__main__":
    main()
