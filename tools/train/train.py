"""Trains one of the small models (configs.py) on CPU and exports it as a HF checkpoint.

Data: tools/train/work/train.txt (prepare_data.py), tokenized with the BPE tokenizer in
tools/train/work/tokenizer (bpe.py); ids cached in work/train_ids.npy. Every step draws
`batch` windows of context+1 tokens at uniformly random offsets from a torch.Generator
seeded with --seed, so all models see exactly the same tokens.

Optimiser: AdamW (Loshchilov & Hutter, arXiv 1711.05101), betas (0.9, 0.95), weight
decay on matrices except the embedding, gradient clipping at 1.0; learning rate: linear
warm-up, then cosine decay to min_lr_ratio * lr (Loshchilov & Hutter, SGDR, arXiv
1608.03983). MoE routing bias: auxiliary-loss-free balancing of DeepSeek-V3 (arXiv
2412.19437, sec. 2.1.2), updated after every step from that step's expert loads.

Logs (tools/train/logs/<model>.log): every --log-every steps: step, mean loss, lr,
tokens/s (wall clock), elapsed wall and process CPU seconds (the machine is shared, so
CPU seconds / threads is the time on dedicated cores) and, per MoE layer, the mean over those steps of the expert-
load coefficient of variation (std/mean of tokens per routed expert); every
--eval-every steps and at the end: held-out loss/perplexity on --eval-file with the
evaluation protocol of evaluate.py. At the end: exports to --out, evaluates the EXPORTED
(bf16) checkpoint and records the results in tools/train/results.json.

Usage (the defaults are the settings of the committed models):
  LD_LIBRARY_PATH=$(tools/train/setup_blas.sh) OMP_WAIT_POLICY=PASSIVE nice -n 10 \
      /usr/bin/python3 tools/train/train.py --model mla_moe --out DIR
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
INSTALL_DIRS = {"mla_moe": "models/default", "mla_dense": "models/baselines/mla_dense",
                "mha": "models/baselines/mha",
                "gqa": "models/baselines/gqa", "mqa": "models/baselines/mqa"}
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import configs  # noqa: E402
import evaluate  # noqa: E402
import export  # noqa: E402
from model import CausalLM  # noqa: E402


def token_ids(text_path, tokenizer_dir, cache_path):
    """uint16 ids of the text, cached together with the hash of tokenizer.json + text size."""
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16] + f"-{os.path.getsize(text_path)}"
    meta = cache_path + ".key"
    if os.path.exists(cache_path) and os.path.exists(meta) and open(meta).read() == key:
        return np.load(cache_path)
    with open(text_path, encoding="utf-8") as f:
        ids = np.array(bpe.Tokenizer(tokenizer_dir).encode(f.read()), dtype=np.uint16)
    np.save(cache_path, ids)
    with open(meta, "w") as f:
        f.write(key)
    return ids


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    floor = args.lr * args.min_lr_ratio
    return floor + (args.lr - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model, args):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed_tokens" not in name else no_decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def load_cv(load):
    load = load.double()
    return round(float(load.std(unbiased=False) / load.mean()), 4)


class Logger:
    def __init__(self, path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.f = open(path, "w")

    def __call__(self, line):
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def update_results(path, name, entry):
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    results.setdefault("models", {})[name] = entry
    with open(path, "w") as f:
        json.dump(results, f, indent=2, sort_keys=True)
        f.write("\n")


def main(argv=None):
    p = argparse.ArgumentParser(description="train a small model on CPU")
    p.add_argument("--model", required=True, choices=sorted(configs.CONFIGS))
    p.add_argument("--steps", type=int, default=700)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--gamma", type=float, default=1e-2, help="routing-bias update speed")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--train-text", default=os.path.join(HERE, "work", "train.txt"))
    p.add_argument("--tokenizer", default=os.path.join(HERE, "work", "tokenizer"))
    p.add_argument("--eval-file", default=os.path.join(REPO, "tests", "testdata", "heldout.txt"))
    p.add_argument("--out", required=True, help="exported HF model directory")
    p.add_argument("--log", help="default tools/train/logs/<model>.log")
    p.add_argument("--results", default=os.path.join(HERE, "results.json"),
                   help="results file to update ('' = none)")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    log = Logger(args.log or os.path.join(HERE, "logs", f"{args.model}.log"))
    config = configs.CONFIGS[args.model]()
    model = CausalLM(config)
    model.init_weights(args.seed)
    total, active, total_ne, active_ne = model.param_counts()
    ids = torch.from_numpy(token_ids(args.train_text, args.tokenizer,
                                     os.path.join(HERE, "work", "train_ids.npy")).astype(np.int64))
    tok = bpe.Tokenizer(args.tokenizer)
    with open(args.eval_file, encoding="utf-8") as f:
        eval_ids = tok.encode(f.read())
    log(f"# model {args.model} ({config['architectures'][0]}): params total {total}, active {active}, "
        f"without embeddings {total_ne} / active {active_ne}")
    log(f"# train tokens {len(ids)}, eval file {os.path.relpath(args.eval_file, REPO)} "
        f"{len(eval_ids)} tokens; steps {args.steps} x batch {args.batch} x context {args.context} "
        f"= {args.steps * args.batch * args.context} tokens; lr {args.lr} warmup {args.warmup} "
        f"cosine to {args.min_lr_ratio}x; wd {args.weight_decay}; gamma {args.gamma}; seed {args.seed}; "
        f"threads {args.threads}")

    opt = make_optimizer(model, args)
    gen = torch.Generator().manual_seed(args.seed)
    moes = model.moe_layers()
    T, B = args.context, args.batch
    offsets_hi = len(ids) - T - 1
    t_start = time.time()
    train_time = 0.0
    window_loss, window_cv, window_t, window_tokens = [], [], 0.0, 0
    cv_history = []
    cpu_start = time.process_time()

    def run_eval(step):
        t0 = time.time()
        nll, n = evaluate.chunked_nll(model, eval_ids, T)
        log(f"eval step {step} heldout_loss {nll / n:.4f} ppl {math.exp(nll / n):.2f} "
            f"tokens {n} ({time.time() - t0:.1f}s)")
        return nll / n

    for step in range(args.steps):
        t0 = time.time()
        starts = torch.randint(0, offsets_hi, (B,), generator=gen)
        batch = torch.stack([ids[s:s + T + 1] for s in starts.tolist()])
        lr = lr_at(step, args)
        for group in opt.param_groups:
            group["lr"] = lr
        model.train()
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        for m in moes:
            m.update_bias(m.last_load, args.gamma)
        dt = time.time() - t0
        train_time += dt
        window_t += dt
        window_tokens += B * T
        window_loss.append(loss.item())
        window_cv.append([load_cv(m.last_load) for m in moes])
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            cv = np.mean(window_cv, axis=0).tolist() if moes else []
            cv_history.append([step + 1] + cv)
            line = (f"step {step + 1} loss {np.mean(window_loss):.4f} lr {lr:.2e} "
                    f"tok/s {window_tokens / window_t:.0f} elapsed {time.time() - t_start:.0f}s "
                    f"cpu {time.process_time() - cpu_start:.0f}s")
            if moes:
                line += " load_cv " + " ".join(f"{v:.3f}" for v in cv)
            log(line)
            last_loss = float(np.mean(window_loss))
            window_loss, window_cv, window_t, window_tokens = [], [], 0.0, 0
        if (step + 1) % args.eval_every == 0 and step + 1 != args.steps:
            run_eval(step + 1)
    final_f32 = run_eval(args.steps)
    tokens_seen = args.steps * B * T
    cpu_time = time.process_time() - cpu_start
    log(f"# training done: {tokens_seen} tokens in {train_time:.0f}s wall of training steps "
        f"({tokens_seen / train_time:.0f} tok/s), {time.time() - t_start:.0f}s wall incl. evals; "
        f"process CPU time {cpu_time:.0f}s incl. evals = {cpu_time / args.threads:.0f}s on "
        f"{args.threads} dedicated cores ({tokens_seen * args.threads / cpu_time:.0f} tok/s)")
    if moes:
        log("# routing bias per MoE layer: " + " | ".join(
            " ".join(f"{b:+.3f}" for b in m.gate.e_score_correction_bias.tolist()) for m in moes))

    os.makedirs(os.path.join(HERE, "work", "runs"), exist_ok=True)
    torch.save({"config": config, "model": model.state_dict(), "args": vars(args)},
               os.path.join(HERE, "work", "runs", f"{args.model}.pt"))
    export.export_model(model, args.out, args.tokenizer)
    ev = evaluate.evaluate_dir(args.out, args.eval_file, T)
    log(f"# exported {args.out}; bf16 checkpoint on {os.path.relpath(args.eval_file, REPO)}: "
        f"perplexity {ev['perplexity']:.3f} over {ev['predicted_tokens']} predicted tokens "
        f"(f32 weights: {math.exp(final_f32):.3f})"
        + (f"; expert-load CV per MoE layer {' '.join(f'{v:.3f}' for v in ev['expert_load_cv'])}"
           if moes else ""))
    if args.results:
        update_results(args.results, args.model, {
            "architecture": config["architectures"][0],
            "export_dir": os.path.relpath(os.path.abspath(args.out), REPO),
            # Where `train_all.sh --install` copies the export (the committed checkpoints).
            "model_dir": INSTALL_DIRS.get(args.model),
            "params_total": total, "params_active": active,
            "params_total_without_embeddings": total_ne, "params_active_without_embeddings": active_ne,
            "kv_cache_values_per_token": ev["kv_cache_values_per_token"],
            "heldout_file": os.path.relpath(args.eval_file, REPO), "context": T,
            "heldout_perplexity": round(ev["perplexity"], 4),
            "heldout_perplexity_f32_weights": round(math.exp(final_f32), 4),
            "heldout_predicted_tokens": ev["predicted_tokens"],
            "train_steps": args.steps, "batch": B, "tokens_seen": tokens_seen,
            "train_seconds_wall": round(train_time, 1),
            "tokens_per_second_wall": round(tokens_seen / train_time, 1),
            "train_cpu_seconds": round(cpu_time, 1),
            "tokens_per_second_per_2_cores_cpu_time": round(tokens_seen * args.threads / cpu_time, 1),
            "final_train_loss": round(last_loss, 4),
            "expert_load_cv_train_last": cv_history[-1][1:] if moes else None,
            "expert_load_cv_heldout": ev.get("expert_load_cv"),
            "seed": args.seed, "lr": args.lr, "gamma": args.gamma if moes else None,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
