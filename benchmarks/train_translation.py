"""Train the course's encoder–decoder Transformer on Tatoeba English → Chinese; report sacreBLEU and chrF.

    python benchmarks/train_translation.py --json course_lab/assets/results/cpu/translation.json   # 20 min on a CPU
    python benchmarks/train_translation.py --device cuda --minutes 30 --d-model 512 --layers 6 --d-ff 2048

The recipe of lesson 10's second half, longer: Tatoeba cmn-eng (``course_utils.data.translation``), Chinese
converted to simplified characters with OpenCC, split *by English sentence* (no test sentence is ever trained on;
each test output is scored against all its references), English words → Chinese characters, a
``course_utils.Transformer`` trained with label-smoothed cross-entropy, Adam (β₂ = 0.98) and a linear warm-up then
cosine decay *over the wall-clock budget* (``--minutes``: the benchmark asks what a fixed amount of time buys,
and the course's CPUs are shared, so a step count would not say how long the run takes), then greedy decoding and
beam search (``course_utils.decoding``) on the held-out sentences.
BLEU is sacreBLEU's with ``tokenize="zh"`` (Chinese characters are the tokens). The baseline is a nearest-neighbour
lookup: the translation of the training sentence with the most similar words.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# On a CPU shared with other jobs, OpenMP threads that spin while waiting for each other make every step several
# times slower; sleeping instead costs nothing when the machine is idle. Must be set before torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from course_utils import losses  # noqa: E402
from course_utils.data.translation import (  # noqa: E402
    corpus_bleu,
    corpus_chrf,
    english_key,
    group_by_english,
    grouped_split,
    load_tatoeba_cmn,
    make_tokenizers,
    nearest_neighbour,
)
from course_utils.decoding import translate  # noqa: E402
from course_utils.models import Transformer  # noqa: E402
from course_utils.train import fit, pick_device  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=13.0, help="training wall-clock budget")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many updates (default: the clock)")
    parser.add_argument("--batch-tokens", type=int, default=1500, help="about this many target tokens a batch")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=200, help="linear warm-up steps")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2, help="encoder layers = decoder layers")
    parser.add_argument("--d-ff", type=int, default=1024)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--min-freq", type=int, default=2, help="English words seen fewer times become <unk>")
    parser.add_argument("--max-words", type=int, default=30, help="longer training pairs are dropped")
    parser.add_argument("--n-test", type=int, default=1500, help="held-out English sentences (with --heldout random)")
    parser.add_argument("--heldout", choices=["lesson10", "random"], default="lesson10",
                        help="lesson10: test on every sentence lesson 10 tests at either budget (never trained on); "
                             "random: --n-test English sentences drawn with --seed")
    parser.add_argument("--beam", type=int, default=4, help="beam size (0: greedy only)")
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (the course's 2 cores)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and of the initial weights")
    parser.add_argument("--data-dir", default=None, help="data folder (default: COURSE_DATA_DIR or the cache)")
    parser.add_argument("--json", default=None, help="also write the result to this file")
    parser.add_argument("--save-as", default=None,
                        help="save the trained model as a course model in this folder (course_models/, docs/design.md)")
    args = parser.parse_args(argv)
    if min(args.steps or 1, args.batch_tokens, args.n_test) < 1 or args.minutes <= 0:
        parser.error("--minutes, --steps, --batch-tokens and --n-test must be positive")
    if args.d_model % args.heads:
        parser.error(f"--d-model {args.d_model} is not divisible by --heads {args.heads}")
    return args


def lesson10_test_keys(pairs) -> set[str]:
    """The English keys lesson 10 tests on, at its CPU budget (≤ 5 words, 400 sentences) and its full one (≤ 12
    words, 1,500): the notebook's own split, so the course translator never trains on a sentence the lesson scores."""
    keys = set()
    for max_words, n_test in ((5, 400), (12, 1500)):
        short = [(en, zh) for en, zh in pairs if len(en.split()) <= max_words]
        _, test = grouped_split(short, min(n_test, len({en for en, _ in short}) // 5), seed=0)
        keys |= {english_key(en) for en, _ in test}
    return keys


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    t_start = time.perf_counter()

    pairs = load_tatoeba_cmn(args.data_dir, progress=False, fallback=not args.save_as)  # a course model: the real data
    print(pairs.describe())
    real = pairs.source.kind != "sample"
    if not real:
        print("WARNING: tiny bundled sample instead of Tatoeba: the scores below mean nothing. "
              "Set COURSE_DATA_DIR (docs/data.md).")
    if args.heldout == "lesson10":
        held = lesson10_test_keys(pairs)
        groups = group_by_english(pairs)
        test = sorted(((en, refs) for en, refs in groups.items() if english_key(en) in held),
                      key=lambda item: (len(item[0]), item[0]))
        train_pairs = [(en, zh) for en, refs in groups.items() if english_key(en) not in held for zh in refs]
    else:
        train_pairs, test = grouped_split(pairs, min(args.n_test, len({en for en, _ in pairs}) - 1), seed=args.seed)
    train_pairs = [(en, zh) for en, zh in train_pairs if len(en.split()) <= args.max_words]
    assert not {en for en, _ in train_pairs} & {en for en, _ in test}    # the split is by English sentence
    test_src, test_refs = [en for en, _ in test], [refs for _, refs in test]
    src_tok, tgt_tok = make_tokenizers(train_pairs, args.min_freq)
    pad, eos = tgt_tok.pad_id, tgt_tok.eos_id
    src_ids = [src_tok.encode(en) for en, _ in train_pairs]
    tgt_ids = [tgt_tok.encode(zh, add_bos=True, add_eos=True) for _, zh in train_pairs]

    # Batches of similar lengths (little padding) holding about --batch-tokens target tokens each: sort the pairs
    # by length once, then each step takes a run of neighbours from a random place in that order.
    order = sorted(range(len(tgt_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))

    def get_batch(step: int):
        g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        start = int(torch.randint(len(order), (1,), generator=g))
        n = max(8, args.batch_tokens // len(tgt_ids[order[min(start + 8, len(order) - 1)]]))
        idx = order[max(0, min(start, len(order) - n)):][:n]
        tgt = tgt_tok.pad_batch([tgt_ids[i] for i in idx])                      # (B, T + 1): <bos> y <eos>
        tgt_in = tgt[:, :-1].masked_fill(tgt[:, :-1] == eos, pad)              # <bos> y: <eos> is never read
        return src_tok.pad_batch([src_ids[i] for i in idx]), tgt_in, tgt[:, 1:]

    def loss_fn(model, batch):
        src, tgt_in, tgt_out = batch
        return losses.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=pad,
                                    label_smoothing=args.label_smoothing)

    torch.manual_seed(args.seed)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=args.d_model, n_heads=args.heads,
                        n_encoder_layers=args.layers, n_decoder_layers=args.layers, d_ff=args.d_ff,
                        dropout=args.dropout, max_len=256, pad_id=pad, tie_weights=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"device {device}, {torch.get_num_threads()} threads; {len(train_pairs):,} training pairs, "
          f"{len(test):,} test sentences ({sum(map(len, test_refs)):,} pairs); |V_en| {src_tok.vocab_size:,}, "
          f"|V_zh| {tgt_tok.vocab_size:,}; {n_params:,} parameters; {args.minutes:g} minutes of batches of "
          f"~{args.batch_tokens} target tokens", flush=True)

    t_train = time.perf_counter()
    budget_s, max_steps = 60 * args.minutes, args.steps or 10**9

    def lr_factor(step: int) -> float:
        """Linear warm-up over steps, then cosine decay over the *time* spent: 1 → 0.05 at the deadline."""
        done = min(1.0, (time.perf_counter() - t_train) / budget_s)
        return min(1.0, (step + 1) / args.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * done)))

    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    history, chunk = None, 25
    while True:  # fit() in chunks of 25 updates, each continuing the history, until the clock or --steps says stop
        done = len(history) if history is not None else 0
        history = fit(model, get_batch, loss_fn, steps=min(done + chunk, max_steps), optimizer=optimizer,
                      schedule=lr_factor, clip_grad=1.0, device=device, seed=args.seed + done, progress=False,
                      history=history)
        elapsed = time.perf_counter() - t_train
        if len(history) % 500 < chunk:
            print(f"step {len(history):5d}  loss {sum(history.loss[-chunk:]) / chunk:.3f}  {elapsed:5.0f} s",
                  flush=True)
        if elapsed >= budget_s or len(history) >= max_steps:
            break
    train_s, steps = time.perf_counter() - t_train, len(history)
    final_loss = sum(history.loss[-50:]) / len(history.loss[-50:])
    print(f"trained {steps} steps in {train_s:.0f} s; final loss {final_loss:.3f}", flush=True)

    t_eval = time.perf_counter()
    results = {}
    for method in ("greedy", "beam") if args.beam > 0 else ("greedy",):
        outputs = translate(model, test_src, src_tok, tgt_tok, method=method, beam_size=args.beam)
        results[method] = {"bleu": corpus_bleu(outputs, test_refs).score,
                           "chrf": corpus_chrf(outputs, test_refs).score, "outputs": outputs}
        print(f"{method:>6}: BLEU {results[method]['bleu']:.1f}, chrF {results[method]['chrf']:.1f}", flush=True)
    eval_s = time.perf_counter() - t_eval
    nn_out = nearest_neighbour(train_pairs, test_src, src_tok)
    baseline = {"bleu": corpus_bleu(nn_out, test_refs).score, "chrf": corpus_chrf(nn_out, test_refs).score}
    best = results["beam" if args.beam > 0 else "greedy"]
    total_s = time.perf_counter() - t_start
    print(f"nearest-neighbour baseline: BLEU {baseline['bleu']:.1f}, chrF {baseline['chrf']:.1f}")
    print(f"BLEU {best['bleu']:.1f} (sacreBLEU, tokenize zh) on {len(test):,} held-out English sentences; "
          f"training {train_s:.0f} s, evaluation {eval_s:.0f} s, total {total_s:.0f} s ({total_s / 60:.1f} min)")
    for src, out, refs in list(zip(test_src, best["outputs"], test_refs))[:: max(1, len(test) // 8)]:
        print(f"  {src}\n    → {out}   (ref: {' | '.join(refs)})")
    if args.json:
        result = {"bleu": best["bleu"], "chrf": best["chrf"], "decoding": f"beam {args.beam}" if args.beam else
                  "greedy", "bleu_greedy": results["greedy"]["bleu"], "chrf_greedy": results["greedy"]["chrf"],
                  "baseline_nearest_neighbour": baseline, "test_sentences": len(test),
                  "test_pairs": sum(map(len, test_refs)), "train_pairs": len(train_pairs), "steps": steps,
                  "seconds": total_s, "train_seconds": train_s, "eval_seconds": eval_s, "device": str(device),
                  "threads": torch.get_num_threads(), "parameters": n_params, "real_data": real,
                  "data": str(pairs.source), "final_loss": final_loss, "args": vars(args),
                  "examples": [{"en": s, "out": o, "refs": r} for s, o, r in
                               list(zip(test_src, best["outputs"], test_refs))[:: max(1, len(test) // 20)]]}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False))
    if args.save_as:
        Path(args.save_as).mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "source": src_tok.to_dict(), "target": tgt_tok.to_dict()},
                   Path(args.save_as) / "translator_en_zh.raw.pt")  # in case the course-model export fails
        from course_utils.pretrained.course_models import save_course_model

        config = dict(src_vocab=src_tok.vocab_size, tgt_vocab=tgt_tok.vocab_size, d_model=args.d_model,
                      n_heads=args.heads, n_encoder_layers=args.layers, n_decoder_layers=args.layers, d_ff=args.d_ff,
                      dropout=args.dropout, max_len=256, pad_id=pad, tie_weights=True)
        metrics = {"bleu_beam": results["beam"]["bleu"] if args.beam else None,
                   "bleu_greedy": results["greedy"]["bleu"],
                   "chrf_greedy": results["greedy"]["chrf"], "lookup_bleu": baseline["bleu"],
                   "test_sentences": len(test), "steps": steps, "final_train_loss": final_loss}
        path = save_course_model(args.save_as, "translator_en_zh", model.cpu(), kind="transformer", config=config,
                                 tokenizers={"source": src_tok, "target": tgt_tok}, metrics=metrics, seed=args.seed,
                                 minutes=total_s / 60, heldout_english=sorted(english_key(en) for en in test_src))
        print(f"saved the course model: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
