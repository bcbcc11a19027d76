"""Train an encoder-only sentiment classifier on SST-2 from scratch; report the dev accuracy (lesson 09).

    python benchmarks/train_sst2.py                                  # the default run (≥ 80 % dev, minutes on a CPU)
    python benchmarks/train_sst2.py --steps 8000 --d-model 128 --layers 2 --device cuda
    python benchmarks/train_sst2.py --size small                      # the notebook's CPU setting

The recipe of the lesson, longer: a word vocabulary built from the 67,349 training phrases, batches of phrases
drawn at random (seeded by the step, so a run is reproducible) and padded to their own longest phrase, a
``course_utils.EncoderClassifier`` with masked mean pooling, AdamW with a linear warm-up over the first 5 % of
the steps then cosine decay, gradient clipping at 1.0. The 872 dev sentences are evaluated every
``--eval-every`` steps and at the end. Needs SST-2 in the data folder (``COURSE_DATA_DIR``, see docs/data.md);
without it the loader falls back to a tiny sample and the numbers mean nothing (the script says so).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils.data import load_sst2  # noqa: E402
from course_utils.models import EncoderClassifier  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.tokenizers import WordTokenizer  # noqa: E402
from course_utils.train import fit, pick_device  # noqa: E402

# --size presets; every field can still be overridden by its own flag
SIZES = {
    "small": dict(d_model=32, heads=2, layers=1, d_ff=64, dropout=0.0, batch_size=128, lr=3e-3, steps=600),
    "base": dict(d_model=64, heads=4, layers=2, d_ff=256, dropout=0.1, batch_size=64, lr=2e-3, steps=3000),
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="base", help="preset (default base)")
    parser.add_argument("--steps", type=int, help="optimizer updates")
    parser.add_argument("--batch-size", type=int, help="phrases per batch")
    parser.add_argument("--lr", type=float, help="peak learning rate")
    parser.add_argument("--d-model", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--d-ff", type=int)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--vocab-size", type=int, default=8000, help="words kept, incl. 5 special tokens")
    parser.add_argument("--max-len", type=int, default=48, help="training phrases are cut to this many tokens")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--amp", default="auto", choices=("auto", "bf16", "fp16", "off"))
    parser.add_argument("--eval-every", type=int, default=500, help="dev accuracy every N steps (0: only at the end)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--data-dir", default=None, help="data folder (default: COURSE_DATA_DIR or the cache)")
    parser.add_argument("--json", default=None, help="also write the result and the dev curve to this file")
    parser.add_argument("--save-as", default=None, help="save the trained model as a course model in this folder")
    args = parser.parse_args(argv)
    for key, value in SIZES[args.size].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be positive")
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    t_start, cpu_start = time.perf_counter(), time.process_time()

    # A course model (--save-as) is made from SST-2 itself: then a missing dataset is an error, not the tiny sample.
    train_rows = load_sst2("train", data_dir=args.data_dir, progress=False, fallback=not args.save_as)
    dev_rows = load_sst2("dev", data_dir=args.data_dir, progress=False, fallback=not args.save_as)
    real = "sample" not in (train_rows.source.kind, dev_rows.source.kind)
    print(train_rows.describe())
    print(dev_rows.describe())
    if not real:
        print("WARNING: tiny bundled sample instead of SST-2: the accuracy below means nothing. "
              "Set COURSE_DATA_DIR (docs/data.md).")

    tok = WordTokenizer.from_texts([text for text, _ in train_rows], max_size=args.vocab_size)
    train_ids = [tok.encode(text)[: args.max_len] for text, _ in train_rows]
    train_labels = torch.tensor([label for _, label in train_rows])
    dev_ids = tok.encode_batch([text for text, _ in dev_rows])
    dev_labels = torch.tensor([label for _, label in dev_rows])

    def get_batch(step: int):
        g = torch.Generator().manual_seed(step)
        idx = torch.randint(len(train_ids), (args.batch_size,), generator=g).tolist()
        return tok.pad_batch([train_ids[i] for i in idx]), train_labels[idx]

    def loss_fn(model, batch):
        ids, labels = batch
        return F.cross_entropy(model(ids), labels)

    def eval_fn(model):  # fit runs it in eval mode without gradients
        logits = torch.cat([model(dev_ids[i:i + 512].to(device)).float().cpu() for i in range(0, len(dev_ids), 512)])
        return {"val_loss": F.cross_entropy(logits, dev_labels).item(),
                "val_acc": (logits.argmax(dim=-1) == dev_labels).float().mean().item()}

    torch.manual_seed(args.seed)
    model = EncoderClassifier(tok.vocab_size, 2, d_model=args.d_model, n_heads=args.heads, n_layers=args.layers,
                              d_ff=args.d_ff, dropout=args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    prep_s = time.perf_counter() - t_start
    print(f"device {device}; vocabulary {tok.vocab_size}; {n_params:,} parameters; d_model {args.d_model}, "
          f"{args.heads} heads, {args.layers} layers, dropout {args.dropout}; {args.steps} steps of "
          f"{args.batch_size} at lr {args.lr:g}; data ready in {prep_s:.1f} s", flush=True)

    t_train, cpu_train = time.perf_counter(), time.process_time()
    history = fit(model, get_batch, loss_fn, steps=args.steps, lr=args.lr, weight_decay=args.weight_decay,
                  schedule=cosine_schedule(args.steps, warmup=max(1, args.steps // 20)), amp=args.amp,
                  eval_fn=eval_fn, eval_every=args.eval_every, device=device, seed=args.seed, progress=False)
    train_s, train_cpu = time.perf_counter() - t_train, time.process_time() - cpu_train
    for step, acc, loss in zip(history.val_step, history.metrics["val_acc"], history.metrics["val_loss"]):
        print(f"step {step + 1:6d}  dev loss {loss:.4f}  dev accuracy {acc:.2%}")
    acc = history.metrics["val_acc"][-1]
    majority = torch.bincount(train_labels).argmax()  # the most common training label (ties: the smallest)
    baseline = (dev_labels == majority).float().mean().item()
    total_s, total_cpu = time.perf_counter() - t_start, time.process_time() - cpu_start
    print(f"dev accuracy {acc:.2%} (majority-class baseline {baseline:.2%}); training {train_s:.1f} s wall, "
          f"{train_cpu:.1f} s CPU; total {total_s:.1f} s wall, {total_cpu:.1f} s CPU; "
          f"torch threads {torch.get_num_threads()}")
    if args.json:
        result = {"dev_accuracy": acc, "baseline": baseline, "real_data": real, "device": str(device),
                  "parameters": n_params, "train_seconds": train_s, "train_cpu_seconds": train_cpu,
                  "total_seconds": total_s, "total_cpu_seconds": total_cpu, "threads": torch.get_num_threads(),
                  "args": vars(args), "val_step": history.val_step, "val_acc": history.metrics["val_acc"]}
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.save_as:
        from course_utils.pretrained.course_models import save_course_model

        config = dict(vocab_size=tok.vocab_size, n_classes=2, d_model=args.d_model, n_heads=args.heads,
                      n_layers=args.layers, d_ff=args.d_ff, dropout=args.dropout)
        metrics = {"dev_accuracy": acc, "majority_baseline": baseline, "steps": len(history.step),
                   "curve": {"step": list(history.val_step), "dev_accuracy": history.metrics["val_acc"]}}
        print("saved", save_course_model(args.save_as, "sst2_classifier", model.cpu().eval(),
                                         kind="encoder_classifier", config=config, tokenizers={"words": tok},
                                         metrics=metrics, seed=args.seed, minutes=train_s / 60,
                                         max_len=args.max_len))
    return 0


if __name__ == "__main__":
    sys.exit(main())
