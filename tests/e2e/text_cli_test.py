#!/usr/bin/env python3
"""Text commands end to end: tokenize/detokenize, generate --prompt with streaming and stop
strings, chat through a pseudo-terminal (two turns; the second prefills only new tokens), and the
bad-input errors. Run: text_cli_test.py --mlarun BIN --workdir DIR."""
import argparse
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)


class Checks:
    def __init__(self):
        self.failures = []

    def check(self, name, ok, detail=""):
        print(("PASS " if ok else "FAIL ") + name + (": " + detail if detail and not ok else ""))
        if not ok:
            self.failures.append(name)


def chat_through_pty(bin_, model, turns):
    """Runs `mlarun chat` on a pseudo-terminal, sends `turns` lines, returns (output, stderr)."""
    master, slave = pty.openpty()
    err_path = os.path.join(os.path.dirname(model), "chat_stderr.txt")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([bin_, "chat", "--model", model, "-n", "8", "--temperature", "0"],
                                stdin=slave, stdout=slave, stderr=err, close_fds=True)
    os.close(slave)
    output = b""

    def read_until_prompt(deadline):
        nonlocal output
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    return False
                if not chunk:
                    return False
                output += chunk
                if output.rstrip().endswith(b">"):
                    return True
        return False

    read_until_prompt(time.time() + 60)
    for line in turns:
        os.write(master, line.encode() + b"\n")
        output += b"\n"
        read_until_prompt(time.time() + 60)
    os.write(master, b"/exit\n")
    proc.wait(timeout=60)
    os.close(master)
    return output.decode("utf-8", "replace"), open(err_path, encoding="utf-8", errors="replace").read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mlarun", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    bin_, work = args.mlarun, args.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checks()
    model = os.path.join(work, "tiny")
    r = run([bin_, "make-model", "--preset", "tiny-v3", "--out", model])
    assert r.returncode == 0, r.stderr

    # tokenize / detokenize round trip, --jsonl and --bos.
    texts = ["The river runs to the sea.", "Numbers: 1024, 2048.", "  two spaces", "世界 🙂"]
    r = run([bin_, "tokenize", "--model", model], "\n".join(texts).encode() + b"\n")
    id_lines = r.stdout.decode().splitlines()
    c.check("tokenize prints one JSON array per line", r.returncode == 0 and len(id_lines) == len(texts)
            and all(isinstance(json.loads(l), list) for l in id_lines), r.stderr.decode())
    r2 = run([bin_, "detokenize", "--model", model], ("\n".join(id_lines) + "\n").encode())
    decoded = [json.loads(l) for l in r2.stdout.decode().splitlines()]
    c.check("detokenize(tokenize(x)) == x", decoded == texts, str(decoded))
    jsonl = [json.dumps("line one\nline two"), json.dumps("tab\there")]
    r = run([bin_, "tokenize", "--model", model, "--jsonl", "--bos"], ("\n".join(jsonl) + "\n").encode())
    rows = [json.loads(l) for l in r.stdout.decode().splitlines()]
    bos = json.load(open(model + "/config.json"))["bos_token_id"]
    r2 = run([bin_, "detokenize", "--model", model], ("\n".join(json.dumps(x[1:]) for x in rows) + "\n").encode())
    c.check("--jsonl texts with newlines round-trip, --bos prepends BOS",
            all(x[0] == bos for x in rows) and [json.loads(l) for l in r2.stdout.decode().splitlines()] ==
            ["line one\nline two", "tab\there"], r.stderr.decode() + r2.stderr.decode())

    # generate --prompt: text out, a summary line; stop strings cut the output.
    r = run([bin_, "generate", "--model", model, "--prompt", "The old lighthouse", "-n", "24", "--ignore-eos"])
    out = r.stdout.decode("utf-8", "replace")
    err = r.stderr.decode()
    c.check("generate --prompt streams text and a summary", r.returncode == 0 and len(out.strip()) > 0 and
            re.search(r"prompt tokens: \d+ \| prefill: [\d.]+ tok/s \| generated: 24 \(length\) \| decode: "
                      r"[\d.]+ tok/s \| KV bytes: \d+ used", err) is not None, err)
    visible = out.rstrip("\n")
    stop = next((visible[i:i + 3] for i in range(4, len(visible) - 3) if visible[i:i + 3].isprintable()
                 and "\ufffd" not in visible[i:i + 3] and visible.find(visible[i:i + 3]) == i), None)
    if stop:
        r = run([bin_, "generate", "--model", model, "--prompt", "The old lighthouse", "-n", "24", "--ignore-eos",
                 "--stop", stop])
        cut = r.stdout.decode("utf-8", "replace").rstrip("\n")
        c.check("--stop ends generation before the stop string", r.returncode == 0 and
                cut == visible[:visible.find(stop)] and "(stop)" in r.stderr.decode(), repr((stop, cut, visible)))
    else:
        c.check("found a stop string candidate in the output", False, repr(visible))

    # Bad input.
    r = run([bin_, "generate", "--model", model, "--prompt", "The old lighthouse keeper climbed", "-c", "4"])
    c.check("prompt longer than the context", r.returncode == 1 and "--ctx-size" in r.stderr.decode(), r.stderr.decode())
    bad = os.path.join(work, "bad.txt")
    open(bad, "wb").write(b"ok \xff\xfe bad")
    r = run([bin_, "generate", "--model", model, "--file", bad])
    c.check("invalid UTF-8 prompt file", r.returncode == 1 and "invalid UTF-8 at byte 3" in r.stderr.decode(),
            r.stderr.decode())
    broken = os.path.join(work, "broken")
    shutil.copytree(model, broken)
    open(broken + "/tokenizer.json", "w").write("{not json")
    r = run([bin_, "tokenize", "--model", broken], b"hello\n")
    c.check("malformed tokenizer.json", r.returncode == 1 and "tokenizer.json" in r.stderr.decode(), r.stderr.decode())
    r = run([bin_, "chat", "--model", model, "-n", "4"], b"ok \xff\n/exit\n")
    c.check("invalid UTF-8 on chat stdin is reported", r.returncode == 0 and "not valid UTF-8" in r.stderr.decode(),
            r.stderr.decode())

    # chat through a pseudo-terminal: the second turn prefills only its new tokens.
    out, err = chat_through_pty(bin_, model, ["Hello there", "Where is the lighthouse?"])
    turns = re.findall(r"\[turn (\d+): prefilled (\d+) new tokens \((\d+) cached\)", err)
    ok = len(turns) == 2
    if ok:
        second_new, second_cached = int(turns[1][1]), int(turns[1][2])
        expected_new = len(json.loads(run([bin_, "tokenize", "--model", model], b"<\xef\xbd\x9cUser\xef\xbd\x9c>Where is the lighthouse?<\xef\xbd\x9cAssistant\xef\xbd\x9c>\n").stdout))
        ok = second_cached >= int(turns[0][1]) and second_new <= expected_new + 2
    c.check("chat via pty: turn 2 prefills only the new tokens", ok, err + out)

    print("%d failures" % len(c.failures))
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
