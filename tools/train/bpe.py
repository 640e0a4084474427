"""Byte-level BPE tokenizer: trainer, encoder/decoder and Hugging Face tokenizer.json writer.

Algorithm sources:
  * BPE for subwords: Sennrich, Haddow & Birch, "Neural Machine Translation of Rare
    Words with Subword Units" (arXiv 1508.07909), section 3.2: repeatedly merge the
    most frequent adjacent symbol pair, counted over the word-frequency table.
  * Byte-level BPE with the bytes-to-unicode table and pre-tokenization by regex:
    Radford et al., "Language Models are Unsupervised Multitask Learners" (GPT-2,
    2019), section 2.2. bytes_to_unicode below is that printable-character mapping
    (bytes 33-126, 161-172, 174-255 map to themselves, the rest to U+0100 onwards).
  * The file format is Hugging Face tokenizers' `tokenizer.json` (Split + ByteLevel
    pre-tokenizers, BPE model with `vocab` and rank-ordered `merges`), as used by
    DeepSeek-V3's released tokenizer.

Pre-tokenization regex (PRETOKENIZE_PATTERN), ASCII-oriented because Python's `re`
has no \\p{L}/\\p{N}; it is applied with behaviour "Isolated" (each match and each
unmatched gap is one piece), alternatives tried left to right:
  1. '(?:[sdmt]|ll|ve|re)        English contractions, as in GPT-2 ('s 't 'll ...)
  2. " ?[A-Za-z]+"               an ASCII word with at most one leading space
  3. " ?[0-9]{1,3}"              digits in runs of at most three (DeepSeek-V3, Llama 3)
  4. " ?[^\\t-\\r A-Za-z0-9]+[\\r\\n]*"  punctuation and every non-ASCII character,
                                 with trailing newlines attached (as DeepSeek-V3 does)
  5. "[\\t-\\r ]*[\\r\\n]+"          whitespace ending in newlines
  6. "[\\t-\\r ]+"                 any other whitespace
Only literal characters, explicit ASCII classes, (?:), ?, +, *, {1,3} and
alternation are used, and whitespace is the explicit set [\\t-\\r ] (tab, LF, VT, FF,
CR, space) instead of \\s, whose Unicode meaning differs between engines, so the
pattern matches identically in Python `re`, Rust `regex`, Oniguruma (HF tokenizers)
and PCRE2 (mlarun). No look-around (GPT-2's \\s+(?!\\S) is not used), so runs of
spaces before a word stay one piece. Non-ASCII letters (e.g. "é") fall in class 4.

Vocabulary layout: ids 0-3 special tokens (bos, eos, User, Assistant), ids 4-259 the
256 byte tokens in byte order, then one token per merge in merge order.

CLI:
  /usr/bin/python3 tools/train/bpe.py train --input work/train.txt --vocab-size 4096 --out DIR
  /usr/bin/python3 tools/train/bpe.py encode --tokenizer DIR --file TEXT [--out ids.json]
"""

import argparse
import heapq
import json
import os
import re
import sys
from collections import Counter, defaultdict

PRETOKENIZE_PATTERN = (r"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]{1,3}"
                       r"| ?[^\t-\r A-Za-z0-9]+[\r\n]*|[\t-\r ]*[\r\n]+|[\t-\r ]+")
BOS, EOS, USER, ASSISTANT = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                             "<｜User｜>", "<｜Assistant｜>")
SPECIAL_TOKENS = [BOS, EOS, USER, ASSISTANT]
N_SPECIAL = len(SPECIAL_TOKENS)
# DeepSeek-V3's chat format, reduced to system/user/assistant messages: system prompts are
# joined with "\n\n" and put right after bos, then <｜User｜>... and <｜Assistant｜>...<｜end▁of▁sentence｜>.
CHAT_TEMPLATE = (
    "{%- set ns = namespace(system_prompt='', is_first_sp=true) -%}"
    "{%- for message in messages -%}{%- if message['role'] == 'system' -%}"
    "{%- if ns.is_first_sp -%}{%- set ns.system_prompt = message['content'] -%}"
    "{%- set ns.is_first_sp = false -%}"
    "{%- else -%}{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] -%}"
    "{%- endif -%}{%- endif -%}{%- endfor -%}"
    "{{- bos_token + ns.system_prompt -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{- '<｜User｜>' + message['content'] -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' -}}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<｜Assistant｜>' -}}{%- endif -%}")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character table."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
PRETOKENIZER = re.compile(PRETOKENIZE_PATTERN)


def pretokenize(text):
    """Split into pieces like HF Split(behavior=Isolated): matches and the gaps between them."""
    pieces, last = [], 0
    for m in PRETOKENIZER.finditer(text):
        if m.start() > last:
            pieces.append(text[last:m.start()])
        if m.end() > m.start():
            pieces.append(m.group())
        last = m.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def to_byte_chars(piece):
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


# ----------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------

def train_bpe(text, vocab_size, log=print):
    """Returns (vocab {token string: id}, merges [(left, right)]), byte-level strings."""
    n_merges = vocab_size - N_SPECIAL - 256
    if n_merges < 0:
        raise ValueError("vocab_size too small")
    word_freq = Counter(pretokenize(text))
    # Symbols are ids: 0-255 bytes, 256+k the k-th merge.
    symbol_str = [BYTE_TO_CHAR[b] for b in range(256)]
    words = [list(w.encode("utf-8")) for w in word_freq]
    freqs = list(word_freq.values())
    pair_count = defaultdict(int)
    pair_words = defaultdict(set)
    for wi, syms in enumerate(words):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += freqs[wi]
            pair_words[(a, b)].add(wi)
    # Max-heap on (count, then the earliest pair by symbol strings) with lazy deletion.
    heap = [(-c, symbol_str[a], symbol_str[b], a, b) for (a, b), c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        neg, _, _, a, b = heapq.heappop(heap)
        if pair_count.get((a, b), 0) != -neg or -neg <= 0:
            continue                                   # stale entry
        new = len(symbol_str)
        symbol_str.append(symbol_str[a] + symbol_str[b])
        merges.append((a, b))
        changed = defaultdict(int)
        for wi in list(pair_words[(a, b)]):
            syms, f = words[wi], freqs[wi]
            for x, y in zip(syms, syms[1:]):
                changed[(x, y)] -= f
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi] = out
            for x, y in zip(out, out[1:]):
                changed[(x, y)] += f
                pair_words[(x, y)].add(wi)
        for pair, delta in changed.items():
            if delta == 0:
                continue
            pair_count[pair] += delta
            if pair_count[pair] > 0:
                heapq.heappush(heap, (-pair_count[pair], symbol_str[pair[0]],
                                      symbol_str[pair[1]], pair[0], pair[1]))
            else:
                del pair_count[pair]
        pair_words.pop((a, b), None)
        if log and len(merges) % 500 == 0:
            log(f"merge {len(merges)}/{n_merges}: {symbol_str[new]!r} count {-neg}")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for s in range(256):
        vocab[symbol_str[s]] = N_SPECIAL + s
    for k, (a, b) in enumerate(merges):
        tok = symbol_str[256 + k]
        if tok in vocab:
            raise RuntimeError(f"duplicate token {tok!r}")
        vocab[tok] = N_SPECIAL + 256 + k
    return vocab, [(symbol_str[a], symbol_str[b]) for a, b in merges]


# ----------------------------------------------------------------------------
# Hugging Face files
# ----------------------------------------------------------------------------

def tokenizer_json(vocab, merges):
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True} for t in SPECIAL_TOKENS]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PRETOKENIZE_PATTERN},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def tokenizer_config_json(model_max_length):
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": EOS,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": model_max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }


def save_tokenizer(out_dir, vocab, merges, model_max_length):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config_json(model_max_length), f, ensure_ascii=False, indent=2)
        f.write("\n")


# ----------------------------------------------------------------------------
# Encoding (reads tokenizer.json, so it checks the file as written)
# ----------------------------------------------------------------------------

class Tokenizer:
    def __init__(self, path):
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        model = spec["model"]
        self.vocab = model["vocab"]
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(model["merges"])}
        self.special = {t["content"]: t["id"] for t in spec["added_tokens"]}
        for t, i in self.special.items():
            self.id_to_token[i] = t
        self.special_re = re.compile("|".join(re.escape(t) for t in
                                               sorted(self.special, key=len, reverse=True)))
        self.cache = {}

    @property
    def vocab_size(self):
        return max(self.id_to_token) + 1

    def _bpe(self, piece):
        """Lowest-rank merge first until none applies (GPT-2 / HF BPE order)."""
        syms = list(to_byte_chars(piece))
        while len(syms) > 1:
            best, best_rank = None, None
            for i in range(len(syms) - 1):
                r = self.ranks.get((syms[i], syms[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = (syms[i], syms[i + 1]), r
            if best is None:
                break
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == best:
                    out.append(syms[i] + syms[i + 1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            syms = out
        return [self.vocab[s] for s in syms]

    def encode_ordinary(self, text):
        ids = []
        for piece in pretokenize(text):
            cached = self.cache.get(piece)
            if cached is None:
                cached = self._bpe(piece)
                if len(self.cache) < 1_000_000:
                    self.cache[piece] = cached
            ids.extend(cached)
        return ids

    def encode(self, text):
        """Special tokens (exact content) become their ids; the rest is BPE-encoded."""
        ids, last = [], 0
        for m in self.special_re.finditer(text):
            ids.extend(self.encode_ordinary(text[last:m.start()]))
            ids.append(self.special[m.group()])
            last = m.end()
        ids.extend(self.encode_ordinary(text[last:]))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            tok = self.id_to_token[i]
            if tok in self.special:
                out += tok.encode("utf-8")
            else:
                out += bytes(CHAR_TO_BYTE[c] for c in tok)
        return out.decode("utf-8", errors="replace")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--input", required=True)
    t.add_argument("--vocab-size", type=int, default=4096)
    t.add_argument("--model-max-length", type=int, default=2048)
    t.add_argument("--out", required=True)
    e = sub.add_parser("encode")
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--file", required=True)
    e.add_argument("--out", help="write ids as JSON here (default: stdout)")
    args = p.parse_args(argv)
    if args.cmd == "train":
        with open(args.input, encoding="utf-8") as f:
            text = f.read()
        vocab, merges = train_bpe(text, args.vocab_size,
                                  log=lambda s: print(s, file=sys.stderr, flush=True))
        save_tokenizer(args.out, vocab, merges, args.model_max_length)
        tok = Tokenizer(args.out)
        sample = text[:200000]
        ids = tok.encode(sample)
        assert tok.decode(ids) == sample, "round trip failed"
        print(f"vocab {len(vocab)}, {len(merges)} merges, "
              f"{len(sample.encode()) / len(ids):.2f} bytes/token on the first 200k chars")
    else:
        with open(args.file, encoding="utf-8") as f:
            ids = Tokenizer(args.tokenizer).encode(f.read())
        text = json.dumps(ids)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        else:
            print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
