"""Train the course's masked character model (lesson 12's recipe, longer) and save it as a course model.

    python benchmarks/train_mlm.py --steps 1500 --threads 1 --out runs/mlm.pt --save-as course_models
    python benchmarks/train_mlm.py --evaluate      # score the committed model again, update its manifest's metrics

The course model was made by the first command (its manifest, course_models/mlm_shakespeare.json, records it): 1,500
steps in about 50 minutes on one CPU thread of a shared machine. The second trains nothing: it loads the committed
weights (sha256 checked), scores them on lesson 12's held-out windows both ways (below) and writes the two figures,
and the command itself, into the manifest; the weights file and its sha256 do not change.

Tiny-shakespeare, one token per character, the last 10 % held out (``split_ids``, as lessons 11 and 12). Training
masks 40 % of the characters of random windows (80/10/10, a new mask every step from a generator seeded by the step);
the score is lesson 12's: masked-character accuracy on the same 512 validation windows of 64 characters, 15 % of
their characters selected once with seed 1234, so the lesson can recompute it exactly. It is measured on two inputs:
``plain`` (every selected character hidden behind <mask>: a fill-in test where nothing can be copied, the figure the
lesson and the README show) and ``80_10_10`` (BERT's training input, where 10 % of the scored characters are visible
unchanged and can be copied; the training curve is on this input). ``--out`` checkpoints and resumes.
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


EVALUATE_COMMAND = "python benchmarks/train_mlm.py --evaluate"
ROOT = Path(__file__).resolve().parents[1]


def lesson12_windows(val_ids: torch.Tensor) -> torch.Tensor:
    """Lesson 12's validation windows: 512 windows of 64 characters."""
    return torch.cat([lm_batches(val_ids, BLOCK, 256, seed=1)(i)[0] for i in range(2)])        # (512, 64)


def lesson12_dev_set(val_ids: torch.Tensor, tok: CharTokenizer, special: list[int]):
    """Lesson 12's validation windows (512 × 64) and their one fixed 15 % mask, as BERT's 80/10/10 input:
    ``(inputs, labels)``."""
    return mlm.mask_tokens(lesson12_windows(val_ids), tok.vocab_size, tok.mask_id, special, p=0.15,
                           generator=torch.Generator().manual_seed(1234))


def lesson12_dev_inputs(val_ids: torch.Tensor, tok: CharTokenizer, special: list[int]):
    """``({"plain": inputs, "80_10_10": inputs}, labels)``: the same selected positions (labels), hidden behind
    <mask> every one (plain fill-in) or corrupted 80/10/10 (BERT's input)."""
    bert_in, labels = lesson12_dev_set(val_ids, tok, special)
    plain = lesson12_windows(val_ids).masked_fill(labels != mlm.IGNORE_INDEX, tok.mask_id)
    return {"plain": plain, "80_10_10": bert_in}, labels


@torch.no_grad()
def score(model, inputs: dict, labels: torch.Tensor, device="cpu") -> dict:
    """Masked-character accuracy and loss on each input (same labels): ``masked_accuracy_<input>``,
    ``val_loss_<input>`` and ``masked_characters``."""
    out = {}
    for name, ids in inputs.items():
        logits, targets = mlm.masked_logits(model, ids.to(device), labels.to(device))
        out[f"masked_accuracy_{name}"] = (logits.argmax(-1) == targets).float().mean().item()
        out[f"val_loss_{name}"] = F.cross_entropy(logits, targets).item()
    out["masked_characters"] = int((labels != mlm.IGNORE_INDEX).sum())
    return out


def evaluate_course_model(folder: str | os.PathLike | None = None) -> dict:
    """``--evaluate``: score the committed course model (no training) and write the figures into its manifest."""
    from course_utils.pretrained.course_models import _commit, load_course_model

    folder = Path(folder) if folder else ROOT / "course_models"
    model, tokenizers, manifest = load_course_model("mlm_shakespeare", folder)     # weights' sha256 checked
    text = load_tiny_shakespeare(progress=False, fallback=False)
    tok = CharTokenizer.from_text(text)
    if tok.itos != tokenizers["chars"].itos:
        raise ValueError("tiny-shakespeare gave another vocabulary than the course model's: is COURSE_DATA_DIR right?")
    _, val_ids = split_ids(torch.tensor(tok.encode(text), dtype=torch.long), val_fraction=0.1)
    inputs, labels = lesson12_dev_inputs(val_ids, tok, [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id])
    metrics = score(model.eval(), inputs, labels)
    old = manifest["metrics"]
    manifest["metrics"] = {**metrics, **{k: v for k, v in old.items() if k in ("steps", "curve")},
                           "curve_input": "80_10_10"}
    manifest["evaluation"] = {
        "command": EVALUATE_COMMAND, "commit": _commit(), "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "what": "the committed float16 weights; lesson 12's 512 validation windows of 64 characters, 15 % selected "
                "with seed 1234; plain: every selected character replaced by <mask>; 80_10_10: BERT's input, 10 % "
                "of the scored characters left unchanged"}
    path = folder / "mlm_shakespeare.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
    return metrics


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
    p.add_argument("--evaluate", action="store_true", help="train nothing: score the committed course model and "
                   "update the metrics of course_models/mlm_shakespeare.json")
    p.add_argument("--models", default=None, help="with --evaluate: the course_models folder (default: the clone's)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.evaluate:
        summary = evaluate_course_model(args.models)
        print(json.dumps(summary))
        return summary
    device = pick_device(args.device)

    text = load_tiny_shakespeare(progress=False, fallback=not args.save_as)
    tok = CharTokenizer.from_text(text)
    train_ids, val_ids = split_ids(torch.tensor(tok.encode(text), dtype=torch.long), val_fraction=0.1)
    special = [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]
    dev_inputs, dev_labels = lesson12_dev_inputs(val_ids, tok, special)
    dev_in = dev_inputs["80_10_10"]                                              # the training curve's input
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
    metrics = {**score(model, dev_inputs, dev_labels, device), "steps": len(history.step),
               "curve": {"step": list(history.val_step), "accuracy": history.metrics["accuracy"],
                         "minutes": [round(history.elapsed[min(s, len(history.step) - 1)] / 60, 2)
                                     for s in history.val_step]},
               "curve_input": "80_10_10"}
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
