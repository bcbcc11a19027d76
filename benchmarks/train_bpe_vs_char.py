"""Lesson 11's GPT on byte-pair tokens against characters, at equal compute, scored in bits per character (lesson 15).

    nice -n 10 python benchmarks/train_bpe_vs_char.py --seeds 0 1 --json course_lab/assets/results/cpu/bpe_vs_char.json

Equal compute means: the same model body (layers, width, heads), the same number of steps and the same number of
token positions per step (batch x block), so the same FLOPs per step up to the output layer, whose size grows
with the vocabulary (recorded as ``train_flops``). The BPE model therefore reads more characters per step: that is
what a tokenizer buys. Both are scored on the same held-out characters (the last 10 % of tiny-shakespeare; the BPE
vocabulary is learnt on the first 90 % only) in bits per character: total NLL over the held-out text / (ln 2 x its
characters). A per-token loss is not comparable: a BPE token carries several characters. Runs resume from
``--runs`` (checkpoints) and the JSON is rewritten after each run, so a stopped command keeps what it finished."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils.bpe import BPETokenizer  # noqa: E402
from course_utils.data import load_tiny_shakespeare  # noqa: E402
from course_utils.lm_data import lm_batches  # noqa: E402
from course_utils.models import GPT  # noqa: E402
from course_utils.modes import evaluating  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.tokenizers import CharTokenizer  # noqa: E402
from course_utils.train import fit, param_groups  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="GPT on BPE tokens vs characters, in bits per character.")
    for name, kind, default in (("n-layers", int, 3), ("n-heads", int, 4), ("d-model", int, 128),
                                ("block-size", int, 64), ("batch-size", int, 16), ("steps", int, 1500),
                                ("lr", float, 1e-3), ("dropout", float, 0.1), ("vocab-size", int, 512)):
        p.add_argument("--" + name, type=kind, default=default)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--runs", default="/tmp/bpe_vs_char_runs", help="checkpoint folder (resumes)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--max-val-chars", type=int, default=0, help="score only this many held-out characters (0: all)")
    return p.parse_args(argv)


def bits_per_char(model, ids: torch.Tensor, n_chars: int, block: int) -> dict:
    """Score every token but the first once, in consecutive windows of ``block`` tokens (overlapping by one);
    ``n_chars`` = the characters of the scored tokens."""
    total, count = 0.0, 0
    with evaluating(model):
        for s in range(0, len(ids) - 1, block):
            w = ids[s: s + block + 1][None]  # (1, <= T + 1)
            logits = model(w[:, :-1])  # (1, T, V)
            total += float(F.cross_entropy(logits[0].float(), w[0, 1:], reduction="sum"))
            count += w.shape[1] - 1
    return {"bits_per_char": total / math.log(2) / n_chars, "nats_per_token": total / count, "tokens": count}


def cheap_baselines(train: str, val: str) -> dict:
    """Bits per character of an add-one character bigram model learnt on the training text (the cheap baseline)."""
    chars = sorted(set(train) | set(val))
    pairs, firsts = Counter(zip(train, train[1:])), Counter(train[:-1])
    bits = -sum(math.log2((pairs[a, b] + 1) / (firsts[a] + len(chars))) for a, b in zip(val, val[1:]))
    return {"char_bigram_add_one_bits_per_char": bits / (len(val) - 1)}


def run_one(kind: str, seed: int, args, train_text: str, val_text: str, bpe: BPETokenizer) -> dict:
    tok = bpe if kind == "bpe" else CharTokenizer.from_text(train_text + val_text)
    train_ids = torch.tensor(tok.encode(train_text), dtype=torch.long)
    val_ids = torch.tensor(tok.encode(val_text), dtype=torch.long)
    first_chars = len(tok.decode(val_ids[:1].tolist()))
    torch.manual_seed(seed)
    model = GPT(tok.vocab_size, max_len=args.block_size, n_layers=args.n_layers, n_heads=args.n_heads,
                d_model=args.d_model, dropout=args.dropout)
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=args.lr, betas=(0.9, 0.99))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(args.steps, args.steps // 15, 0.1))
    get_batch = lm_batches(train_ids, args.block_size, args.batch_size, seed)

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x).flatten(0, 1).float(), y.flatten())

    Path(args.runs).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    history = fit(model, get_batch, loss_fn, steps=args.steps, optimizer=optimizer, schedule=schedule,
                  clip_grad=1.0, checkpoint_path=os.path.join(args.runs, f"{kind}_seed{seed}.pt"),
                  checkpoint_every=250, device="cpu", seed=seed, progress=False, amp="off")
    train_s = history.elapsed[-1] if history.elapsed else time.perf_counter() - start
    score = bits_per_char(model, val_ids, len(val_text) - first_chars, args.block_size)
    n_params = sum(p.numel() for p in model.parameters())
    tokens = args.steps * args.batch_size * args.block_size
    body = sum(p.numel() for p in model.blocks.parameters()) + args.d_model * tok.vocab_size  # + the output layer
    chars_per_token = len(train_text) / len(train_ids)
    return {"tokenizer": kind, "seed": seed, "vocab_size": tok.vocab_size, "params": n_params,
            "chars_per_token_train": round(chars_per_token, 4), "train_tokens_seen": tokens,
            "train_chars_seen_approx": round(tokens * chars_per_token), "context_chars_approx":
            round(args.block_size * chars_per_token, 1), "train_flops": 6 * body * tokens,
            "final_train_loss_nats_per_token": history.loss[-1], "val_nats_per_token": score["nats_per_token"],
            "val_bits_per_char": score["bits_per_char"], "val_tokens": score["tokens"],
            "train_seconds": round(train_s, 1), "eval_seconds": round(time.perf_counter() - start - train_s, 1)}


def main(argv=None) -> dict:
    args = parse_args(argv)
    text = str(load_tiny_shakespeare())
    cut = int(len(text) * 0.9)
    train_text, val_text = text[:cut], text[cut:]
    if args.max_val_chars:
        val_text = val_text[: args.max_val_chars]
    t0 = time.perf_counter()
    bpe = BPETokenizer.from_texts(train_text, args.vocab_size)
    out = {"command": "python " + " ".join(shlex.quote(a) for a in [sys.argv[0], *(argv or sys.argv[1:])]),
           "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "threads": torch.get_num_threads(), "device": "cpu", "seeds": args.seeds,
           "config": {k: v for k, v in vars(args).items() if k not in ("json", "runs", "seeds")},
           "data": "tiny-shakespeare: first 90 % train (and the BPE vocabulary), last 10 % held out",
           "val_chars": len(val_text), "bpe_train_seconds": round(time.perf_counter() - t0, 2),
           "equal_compute": "same model body, steps and tokens per step (batch x block): equal FLOPs per step up to "
                            "the output layer (train_flops counts all but the embedding tables); BPE reads more "
                            "characters in the same compute",
           "baselines": cheap_baselines(train_text, val_text), "runs": [],
           "load_average_1min": {"start": os.getloadavg()[0]}}
    for seed in args.seeds:
        for kind in ("char", "bpe"):
            out["runs"].append(run_one(kind, seed, args, train_text, val_text, bpe))
            print(json.dumps(out["runs"][-1]), flush=True)
            out["load_average_1min"]["end"] = os.getloadavg()[0]
            if args.json:  # after every run: a stopped command keeps what it finished
                tmp = Path(args.json).with_suffix(".tmp")
                tmp.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
                tmp.replace(args.json)
    return out


if __name__ == "__main__":
    main()
