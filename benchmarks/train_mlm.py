"""Train the course's masked character model (lesson 12's recipe, longer) and save it as a course model.

    python benchmarks/train_mlm.py --steps 1500 --threads 1 --out runs/mlm.pt --save-as course_models

The course model was made by that command (its manifest, course_models/mlm_shakespeare.json, records it): 1,500 steps
in about 50 minutes on one CPU thread of a shared machine.

Tiny-shakespeare, one token per character, the last 10 % held out (``split_ids``, as lessons 11 and 12). Training
masks 40 % of the characters of random windows (80/10/10, a new mask every step from a generator seeded by the step);
the score is lesson 12's: masked-character accuracy on the same 512 validation windows of 64 characters, masked once at
15 % with seed 1234, so the lesson can recompute it exactly. That input is BERT's 80/10/10, so 10 % of the scored
characters are visible unchanged; lesson 12 also scores every model on a plain fill-in test (every selected
character hidden behind <mask>), where nothing can be copied. ``--out`` checkpoints and resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see train_translation.py: shared CPUs

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils import mlm  # noqa: E402
from course_utils.data import load_tiny_shakespeare  # noqa: E402
from course_utils.lm_data import lm_batches, split_ids  # noqa: E402
from course_utils.models import MaskedLM  # noqa: E402
from course_utils.schedules import cosine_schedule  # noqa: E402
from course_utils.tokenizers import CharTokenizer  # noqa: E402
from course_utils.train import fit, pick_device  # noqa: E402

BLOCK = 64  # lesson 12's window


def lesson12_dev_set(val_ids: torch.Tensor, tok: CharTokenizer, special: list[int]):
    """Lesson 12's validation windows (512 × 64) and their one fixed 15 % mask."""
    windows = torch.cat([lm_batches(val_ids, BLOCK, 256, seed=1)(i)[0] for i in range(2)])     # (512, 64)
    return mlm.mask_tokens(windows, tok.vocab_size, tok.mask_id, special, p=0.15,
                           generator=torch.Generator().manual_seed(1234))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, kind, default in (("steps", int, 2000), ("batch-size", int, 64), ("d-model", int, 256),
                                ("n-layers", int, 4), ("n-heads", int, 4), ("lr", float, 1e-3),
                                ("mask-p", float, 0.4), ("dropout", float, 0.1), ("seed", int, 0),
                                ("threads", int, 2)):
        p.add_argument("--" + name, type=kind, default=default)
    p.add_argument("--out", default=None, help="checkpoint (resumes when it exists)")
    p.add_argument("--save-as", default=None, help="save the course model in this folder")
    p.add_argument("--device", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)

    text = load_tiny_shakespeare(progress=False, fallback=not args.save_as)
    tok = CharTokenizer.from_text(text)
    train_ids, val_ids = split_ids(torch.tensor(tok.encode(text), dtype=torch.long), val_fraction=0.1)
    special = [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]
    dev_in, dev_labels = lesson12_dev_set(val_ids, tok, special)
    windows = lm_batches(train_ids, BLOCK, args.batch_size, seed=args.seed)

    def get_batch(step):
        x, _ = windows(step)                                                     # (B, T)
        return mlm.mask_tokens(x, tok.vocab_size, tok.mask_id, special, p=args.mask_p,
                               generator=torch.Generator().manual_seed(args.seed * 1_000_003 + step))

    def loss_fn(model, batch):
        return F.cross_entropy(*mlm.masked_logits(model, *batch))

    def evaluate(model):
        logits, targets = mlm.masked_logits(model, dev_in.to(device), dev_labels.to(device))
        return {"val_loss": F.cross_entropy(logits, targets).item(),
                "accuracy": (logits.argmax(-1) == targets).float().mean().item()}

    torch.manual_seed(args.seed)
    config = dict(vocab_size=tok.vocab_size, d_model=args.d_model, n_heads=args.n_heads, n_layers=args.n_layers,
                  d_ff=4 * args.d_model, dropout=args.dropout, max_len=BLOCK, pad_id=tok.pad_id)
    model = MaskedLM(**config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), weight_decay=0.01)
    start = time.perf_counter()
    history = fit(model, get_batch, loss_fn, steps=args.steps, optimizer=optimizer,
                  schedule=cosine_schedule(args.steps, args.steps // 20), clip_grad=1.0, eval_fn=evaluate,
                  eval_every=max(1, args.steps // 10), checkpoint_path=args.out,
                  checkpoint_every=200 if args.out else 0, device=device, seed=args.seed)
    model.eval()
    metrics = {"masked_accuracy": history.metrics["accuracy"][-1], "val_loss": history.metrics["val_loss"][-1],
               "masked_characters": int((dev_labels != -100).sum()), "steps": len(history.step),
               "curve": {"step": list(history.val_step), "accuracy": history.metrics["accuracy"],
                         "minutes": [round(history.elapsed[min(s, len(history.step) - 1)] / 60, 2)
                                     for s in history.val_step]}}
    summary = {"seconds": round(time.perf_counter() - start, 1), **metrics}
    if args.save_as:
        from course_utils.pretrained.course_models import save_course_model

        summary["saved"] = str(save_course_model(
            args.save_as, "mlm_shakespeare", model.cpu(), kind="masked_lm", config=config,
            tokenizers={"chars": tok}, metrics=metrics, seed=args.seed,
            minutes=history.elapsed[-1] / 60 if history.elapsed else 0.0))
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
