"""Compare the Llama block with lesson 11's GPT block at equal parameters and equal steps (lesson 16).

    python benchmarks/compare_llama_gpt.py                        # 3 models × 2 seeds, minutes each on a CPU
    python benchmarks/compare_llama_gpt.py --seeds 0 1 2 --steps 3000 --device cuda

Three character-level models on tiny-shakespeare (lesson 11's data and split), the same width, depth, heads,
batches, optimizer and number of steps, with ``d_ff`` chosen so that every model has the GPT's parameter count:

* ``gpt``: lesson 11's block: learned positions, LayerNorm, GELU MLP, biases, multi-head attention;
* ``gpt_rope``: the same block with RoPE instead of learned positions (the position scheme alone);
* ``llama``: RoPE, RMSNorm, SwiGLU, grouped-query attention (``--kv-heads``), no biases.

Each is scored on the held-out 10 % (consecutive windows of the training context T): the negative log-likelihood
per character. Then on longer inputs: windows of 2T and 4T, scored on their positions ≥ T (the ones no model saw
in training). A model with learned positions cannot even run there (its table has T rows), so every model is also
scored with **sliding windows** of length T (stride T/4, each target predicted from at least 3T/4 characters): the
fair way to read long text with a fixed window. RoPE models are scored both ways: with the whole 2T / 4T window
(extrapolation) and with sliding windows. The JSON records the command, the seeds, the times and torch's version.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils.data import load_tiny_shakespeare  # noqa: E402
from course_utils.lm_data import lm_batches, split_ids  # noqa: E402
from course_utils.models import GPT  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.tokenizers import CharTokenizer  # noqa: E402
from course_utils.train import fit, pick_device, seed_everything  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "course_lab" / "assets" / "results" / "cpu" / "llama_vs_gpt.json"


def recipes(kv_heads: int) -> dict[str, dict]:
    """The three models' switches (``d_ff`` is matched afterwards); dropout off: these runs are far too short."""
    return {
        "gpt": dict(positions="learned"),
        "gpt_rope": dict(positions="rope"),
        "llama": dict(positions="rope", norm="rms", ffn="swiglu", n_kv_heads=kv_heads, bias=False),
    }


def build(name: str, switches: dict, vocab: int, args, d_ff: int, max_len: int) -> GPT:
    return GPT(vocab, max_len=max_len, d_model=args.d_model, n_heads=args.heads, n_layers=args.layers, d_ff=d_ff,
               dropout=0.0, **switches)


def count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def matched_d_ff(switches: dict, vocab: int, args, target: int) -> int:
    """The d_ff whose model is closest to ``target`` parameters (built on the meta device: nothing allocated)."""
    with torch.device("meta"):
        sizes = {f: count(build("", switches, vocab, args, f, args.context)) for f in range(8, 8 * args.d_model + 1)}
    return min(sizes, key=lambda f: (abs(sizes[f] - target), f))


@torch.no_grad()
def nll_windows(model, ids: torch.Tensor, length: int, score_from: int, batch: int = 32) -> float:
    """Mean −log p over consecutive windows of ``length`` + 1 ids, scoring positions ≥ ``score_from`` of each."""
    n = (len(ids) - 1) // length
    x = ids[: n * length].view(n, length)
    y = ids[1: n * length + 1].view(n, length)
    total, count_ = 0.0, 0
    for xb, yb in zip(x.split(batch), y.split(batch)):
        logits = model(xb)[:, score_from:]                                            # (b, length − from, V)
        total += F.cross_entropy(logits.flatten(0, 1), yb[:, score_from:].flatten(), reduction="sum").item()
        count_ += yb[:, score_from:].numel()
    return total / count_


@torch.no_grad()
def nll_sliding(model, ids: torch.Tensor, length: int, context: int, score_from: int, batch: int = 64) -> float:
    """The same targets as :func:`nll_windows` (positions ≥ ``score_from`` of windows of ``length``), each predicted
    by windows of ``context`` ids moved by ``context // 4``: every target sees at least 3/4 of a context."""
    stride = context // 4
    n = (len(ids) - 1) // length
    xs, ys = [], []
    for w in range(n):
        start = w * length
        # window ends at start + score_from + stride·j: scores its last `stride` targets
        for end in range(start + score_from + stride, start + length + 1, stride):
            xs.append(ids[end - context: end])
            ys.append(ids[end - context + 1: end + 1])
    x, y = torch.stack(xs), torch.stack(ys)                                           # (N, context)
    total, count_ = 0.0, 0
    for xb, yb in zip(x.split(batch), y.split(batch)):
        logits = model(xb)[:, -stride:]
        total += F.cross_entropy(logits.flatten(0, 1), yb[:, -stride:].flatten(), reduction="sum").item()
        count_ += yb[:, -stride:].numel()
    return total / count_


def run(name: str, switches: dict, d_ff: int, seed: int, data, args) -> dict:
    train_ids, val_ids, vocab = data
    T = args.context
    print(f"{time.strftime('%H:%M:%S')} training {name}, seed {seed}", file=sys.stderr, flush=True)
    seed_everything(seed)
    rope = switches["positions"] == "rope"
    model = build(name, switches, vocab, args, d_ff, max_len=4 * T if rope else T)
    get_batch = lm_batches(train_ids, T, args.batch_size, seed=seed)

    def lm_loss(model, batch):
        x, y = batch
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten())

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99))
    start, cpu_start = time.perf_counter(), time.process_time()
    history = fit(model, get_batch, lm_loss, steps=args.steps, optimizer=optimizer,
                  schedule=cosine_schedule(args.steps, args.steps // 10), clip_grad=1.0, amp="off",
                  device=args.device, seed=seed, progress=False)
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    model = model.cpu().eval()
    ev = val_ids[: args.eval_chars + 1]
    row = {"model": name, "seed": seed, "d_ff": d_ff, "params": count(model), "train_seconds": round(seconds, 1),
           "train_cpu_seconds": round(cpu_seconds, 1),
           "train_loss_last_50": round(statistics.fmean(history.loss[-50:]), 4),
           "val_nll_T": round(nll_windows(model, ev, T, 0), 4)}
    for mult in (2, 4):
        length = mult * T
        row[f"beyond_T_at_{mult}T_sliding"] = round(nll_sliding(model, ev, length, T, T), 4)
        row[f"beyond_T_at_{mult}T_full"] = round(nll_windows(model, ev, length, T), 4) if rope else None
    print(json.dumps(row), flush=True)
    return row


def summarise(rows: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == name]
        out[name] = {}
        for key in [k for k in mine[0] if k.startswith(("val_", "beyond_"))]:
            values = [r[key] for r in mine if r[key] is not None]
            if values:
                out[name][key] = {"mean": round(statistics.fmean(values), 4),
                                  "min": min(values), "max": max(values), "n": len(values)}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--context", type=int, default=64, help="training context T")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-2, help="peak learning rate (lesson 11's CPU recipe)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--gpt-d-ff", type=int, default=256, help="the GPT's d_ff; the others are matched to it")
    parser.add_argument("--eval-chars", type=int, default=40_000, help="held-out characters scored")
    parser.add_argument("--models", nargs="+", default=["gpt", "gpt_rope", "llama"])
    parser.add_argument("--device", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--note", default="", help="recorded in the JSON (e.g. what else ran on the machine)")
    parser.add_argument("--json", default=str(OUT), help=f"where to write the results (default {OUT})")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.device = str(pick_device(args.device))

    text = load_tiny_shakespeare(data_dir=args.data_dir, progress=False)
    if text.source.kind == "sample":
        print("warning: tiny-shakespeare not found, the bundled sample is used: the numbers mean nothing",
              file=sys.stderr)
    tok = CharTokenizer.from_text(text)
    ids = torch.tensor(tok.encode(text), dtype=torch.long)
    train_ids, val_ids = split_ids(ids, val_fraction=0.1)
    data = (train_ids, val_ids, tok.vocab_size)

    all_recipes = recipes(args.kv_heads)
    with torch.device("meta"):
        target = count(build("gpt", all_recipes["gpt"], tok.vocab_size, args, args.gpt_d_ff, args.context))
    d_ffs = {name: args.gpt_d_ff if name == "gpt" else matched_d_ff(all_recipes[name], tok.vocab_size, args, target)
             for name in args.models}
    load = {"start": os.getloadavg()[0]}
    started = time.time()
    rows = [run(name, all_recipes[name], d_ffs[name], seed, data, args)
            for seed in args.seeds for name in args.models]        # interleaved: machine load hits every model alike
    load["end"] = os.getloadavg()[0]
    result = {
        "command": shlex.join(["python", "benchmarks/compare_llama_gpt.py", *(sys.argv[1:] if argv is None else argv)]),
        "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
        "device": args.device, "threads": torch.get_num_threads(), "note": args.note, "load_average_1min": load,
        "minutes": round((time.time() - started) / 60, 1),
        "data": "tiny-shakespeare" if text.source.kind != "sample" else "bundled sample (not tiny-shakespeare)",
        "seeds": args.seeds, "steps": args.steps, "context": args.context, "batch_size": args.batch_size,
        "lr": args.lr, "d_model": args.d_model, "heads": args.heads, "kv_heads": args.kv_heads,
        "layers": args.layers, "eval_chars": args.eval_chars, "recipes": {n: all_recipes[n] for n in args.models},
        "d_ff": d_ffs, "runs": rows, "summary": summarise(rows),
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)                                                  # atomic: a half-written file never lands
    print(f"wrote {path}")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
