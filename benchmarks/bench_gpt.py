"""GPT training throughput (tokens/s) with and without mixed precision and torch.compile, in one run.

    python benchmarks/bench_gpt.py                          # CPU: small preset, AMP off vs bf16
    python benchmarks/bench_gpt.py --preset baby --compile  # CUDA: nanoGPT's baby GPT, + torch.compile rows

Every row trains the same model from the same seed for ``--steps`` steps through ``course_utils.gpt_train``
(the first steps include compilation, so use enough steps for the rate to settle) and reports tokens/s and the
final training loss. Add ``--text-file`` to train on other text.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from course_utils import gpt_train


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="small", choices=sorted(gpt_train.PRESETS))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true", help="add rows with torch.compile")
    p.add_argument("--text-file", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    amps = ["off", "bf16"] + (["fp16"] if cuda else [])
    rows = []
    for compiled in [False, True] if args.compile else [False]:
        for amp in amps:
            cmd = ["--preset", args.preset, "--steps", str(args.steps), "--amp", amp, "--eval-batches", "2"]
            cmd += ["--compile"] if compiled else []
            cmd += ["--text-file", args.text_file] if args.text_file else []
            s = gpt_train.main(cmd)
            rows.append({"amp": amp, "compile": compiled, "tokens_per_s": s["steady_tokens_per_s"],
                         "tokens_per_s_incl_warmup": s["tokens_per_s"], "train_loss": s["train_loss"],
                         "seconds": s["seconds"]})
    base = rows[0]["tokens_per_s"]
    device = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"\nGPT '{args.preset}' on {device}, {args.steps} steps per row; tokens/s after the first quarter of the "
          "steps (warm-up and compilation), then over the whole run")
    print(f"{'amp':>5} {'compile':>8} | {'tokens/s':>10} {'vs first':>8} | {'incl. warm-up':>13} | {'loss':>6}")
    for r in rows:
        print(f"{r['amp']:>5} {str(r['compile']):>8} | {r['tokens_per_s']:>10} {r['tokens_per_s'] / base:7.2f}x"
              f" | {r['tokens_per_s_incl_warmup']:>13} | {r['train_loss']:6.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "preset": args.preset, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
