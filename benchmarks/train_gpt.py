"""Train a character-level GPT on tiny-shakespeare, on one device or several (lesson 11, lesson 14).

    python benchmarks/train_gpt.py --steps 2000                         # one GPU / CPU / MPS
    python benchmarks/train_gpt.py --preset baby --amp bf16 --compile   # nanoGPT's "baby GPT": 6L/6H/384, ctx 256
    torchrun --nproc_per_node 2 benchmarks/train_gpt.py --steps 200     # DistributedDataParallel (gloo on CPU)

Under torchrun each rank draws its own batches and all-reduces gradients; rank 0 evaluates, checkpoints, prints."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils.checkpoint import load_checkpoint  # noqa: E402
from course_utils.data import load_tiny_shakespeare  # noqa: E402
from course_utils.lm_data import lm_batches, split_ids  # noqa: E402
from course_utils.models import GPT  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.tokenizers import CharTokenizer  # noqa: E402
from course_utils.train import History, fit, param_groups, pick_device  # noqa: E402

PRESETS = {
    "tiny": dict(n_layers=2, n_heads=2, d_model=64, block_size=64, batch_size=16),
    "small": dict(n_layers=4, n_heads=4, d_model=128, block_size=128, batch_size=32),
    "baby": dict(n_layers=6, n_heads=6, d_model=384, block_size=256, batch_size=64),
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Train a character-level GPT (DDP-ready).")
    p.add_argument("--preset", choices=sorted(PRESETS), default="small")
    for name in ("n_layers", "n_heads", "d_model", "block_size", "batch_size"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=None, help="overrides the preset")
    for name, kind, default in (("steps", int, 1000), ("lr", float, 1e-3), ("warmup", int, 100),
                                ("dropout", float, 0.2), ("eval-batches", int, 20), ("seed", int, 1337)):
        p.add_argument("--" + name, type=kind, default=default)
    p.add_argument("--amp", default="auto", choices=["auto", "bf16", "fp16", "off"])
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--text-file", default=None, help="train on this text instead of tiny-shakespeare")
    p.add_argument("--out", default=None, help="checkpoint path (resumes when it exists)")
    p.add_argument("--save-as", default=None, help="also save a course model (weights + manifest) in this folder")
    p.add_argument("--name", default="gpt_shakespeare", help="the course model's name (with --save-as)")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    for key, value in PRESETS[args.preset].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def throughput(elapsed: list[float], tokens_per_step: int) -> dict[str, int | None]:
    """Tokens/s from ``History.elapsed`` (seconds since the start at every step, summed across resumes):
    ``tokens_per_s`` over every step, ``steady_tokens_per_s`` without the first quarter (the warm-up: compilation,
    CUDA kernel loading); ``None`` when there are too few steps to tell."""
    first = len(elapsed) // 4
    overall = round(len(elapsed) * tokens_per_step / elapsed[-1]) if elapsed and elapsed[-1] > 0 else None
    enough = len(elapsed) - first >= 2 and elapsed[-1] > elapsed[first]
    steady = round((len(elapsed) - 1 - first) * tokens_per_step / (elapsed[-1] - elapsed[first])) if enough else None
    return {"tokens_per_s": overall, "steady_tokens_per_s": steady}


def main(argv=None) -> dict:
    args = parse_args(argv)
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    distributed = world > 1
    if distributed:
        cuda = torch.cuda.is_available()
        dist.init_process_group("nccl" if cuda else "gloo")
        device = torch.device(f"cuda:{local_rank}") if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
    else:
        device = pick_device(args.device)
    lead = rank == 0

    # A course model (--save-as) is made from tiny-shakespeare itself: then a missing dataset is an error.
    shakespeare = None if args.text_file else str(load_tiny_shakespeare(fallback=not args.save_as))
    text = Path(args.text_file).read_text(encoding="utf-8") if args.text_file else shakespeare
    tok = CharTokenizer.from_text(text)
    ids = torch.tensor(tok.encode(text), dtype=torch.long)
    train_ids, val_ids = split_ids(ids, 0.1)
    torch.manual_seed(args.seed)  # the same initial weights in every process
    model = GPT(tok.vocab_size, max_len=args.block_size, n_layers=args.n_layers, n_heads=args.n_heads,
                d_model=args.d_model, dropout=args.dropout).to(device)
    # Weight decay on the weight matrices only: not on biases, LayerNorm gains or the embedding tables.
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=args.lr, betas=(0.9, 0.99))
    warmup = min(args.warmup, args.steps // 10)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(args.steps, warmup, 0.1))
    history = None
    if distributed and not lead and args.out and os.path.exists(args.out):
        # Rank 0 resumes inside fit(); the others load the same state here so that every process agrees.
        ckpt = load_checkpoint(args.out, model, optimizer, scheduler, map_location=device)
        history = History.from_dict(ckpt["history"])
    net = model
    if distributed:
        net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    if args.compile:
        net = torch.compile(net)

    get_batch = lm_batches(train_ids, args.block_size, args.batch_size, args.seed, rank)
    get_val = lm_batches(val_ids, args.block_size, args.batch_size, args.seed + 1)

    def loss_fn(m, batch):
        x, y = batch
        return F.cross_entropy(m(x).flatten(0, 1).float(), y.flatten())

    def eval_fn(m):
        losses = [float(loss_fn(m, (x.to(device), y.to(device)))) for x, y in map(get_val, range(args.eval_batches))]
        return {"val_loss": sum(losses) / len(losses)}

    start = time.perf_counter()
    history = fit(
        net, get_batch, loss_fn, steps=args.steps, optimizer=optimizer, amp=args.amp, schedule=scheduler,
        clip_grad=1.0, eval_fn=eval_fn if lead else None, checkpoint_path=args.out if lead else None, device=device,
        checkpoint_every=500 if lead and args.out else 0,
        seed=args.seed + rank, progress=lead, history=history,
    )
    summary = {
        "world_size": world, "device": str(device), "steps": len(history.step),
        "seconds": round(time.perf_counter() - start, 2),
        **throughput(history.elapsed, args.batch_size * args.block_size * world),
        "train_loss": history.loss[-1] if history.loss else None,
        "val_loss": history.metrics.get("val_loss", [None])[-1] if lead else None,
        "param_checksum": float(sum(p.detach().double().sum() for p in model.parameters())),
    }
    if distributed:
        checks = [None] * world
        dist.all_gather_object(checks, summary["param_checksum"])
        summary["ranks_in_sync"] = max(checks) - min(checks) <= 1e-9 * max(1.0, abs(max(checks)))
        dist.destroy_process_group()
    if lead and args.save_as:
        from course_utils.pretrained.course_models import save_course_model

        config = dict(vocab_size=tok.vocab_size, max_len=args.block_size, n_layers=args.n_layers,
                      n_heads=args.n_heads, d_model=args.d_model, dropout=args.dropout)
        metrics = {k: summary[k] for k in ("val_loss", "train_loss", "steps", "steady_tokens_per_s")}
        summary["saved"] = str(save_course_model(args.save_as, args.name, model, kind="gpt", config=config,
                                                 tokenizers={"chars": tok}, metrics=metrics, seed=args.seed,
                                                 minutes=history.elapsed[-1] / 60 if history.elapsed else 0.0))
    if lead:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
