"""GPT training throughput (tokens/s) with and without mixed precision and torch.compile, repeated.

    python benchmarks/bench_gpt.py                                   # CPU: small preset, AMP off vs bf16, 5 repeats
    python benchmarks/bench_gpt.py --preset baby --compile           # CUDA: nanoGPT's baby GPT, + torch.compile rows

Every row trains the same model from the same seed (``--seed``) for ``--steps`` steps through
``train_gpt.py`` (the first quarter of the steps, which includes compilation, is left out of the rate) and
reports tokens/s and the final training loss. Each configuration runs ``--repeats`` times, the repeats interleaved
(all rows once, then all rows again) so that a burst of load from other processes hits every row alike; a row stores
every run, their median and their min and max. The ``matmul`` block times one feed-forward matrix product of the
same model alone, float32 against bf16 (inputs already bf16, and float32 inputs under autocast, which casts them on
every call), so that the matmul's speed-up can be compared with the whole step's. The JSON records the command, the
seed, the torch version and the CPU's bf16 flags. Add ``--text-file`` to train on other text.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # train_gpt.py, beside this file

import train_gpt  # noqa: E402

from course_utils.data import load_tiny_shakespeare  # noqa: E402


def spread(values: list[float]) -> dict:
    """Median, min and max of repeated measurements, with the runs themselves."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": list(values)}


def matmul_ms(rows: int, d_in: int, d_out: int, dtype: torch.dtype, autocast: bool, device: str,
              number: int = 20) -> float:
    """Milliseconds per ``(rows, d_in) @ (d_in, d_out)``; with ``autocast`` the inputs stay float32 and autocast
    casts them to bf16 on every call, as it does inside a training step."""
    x = torch.randn(rows, d_in, dtype=dtype, device=device)
    w = torch.randn(d_in, d_out, dtype=dtype, device=device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
        x @ w                                                                      # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(number):
            x @ w
        if device == "cuda":
            torch.cuda.synchronize()
    return (time.perf_counter() - start) / number * 1e3


def cpu_bf16_flags() -> list[str]:
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return []
    return sorted({f for f in flags if "bf16" in f})


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="small", choices=sorted(train_gpt.PRESETS))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5, help="runs per row (interleaved); the row keeps every run")
    p.add_argument("--seed", type=int, default=1337, help="the same seed for every run: same weights, same batches")
    p.add_argument("--compile", action="store_true", help="add rows with torch.compile")
    p.add_argument("--text-file", default=None)
    p.add_argument("--note", default="", help="recorded in the JSON, e.g. what else ran on the machine")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    # A benchmark on the bundled sample would record a loss that means nothing: tiny-shakespeare or --text-file.
    data = args.text_file or f"tiny-shakespeare ({load_tiny_shakespeare(fallback=False).source.kind})"
    load_at_start = os.getloadavg()[0]                     # other processes on the machine, recorded with the result
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    amps = ["off", "bf16"] + (["fp16"] if cuda else [])
    configs = [(amp, compiled) for compiled in ([False, True] if args.compile else [False]) for amp in amps]
    runs: dict[tuple[str, bool], list[dict]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for amp, compiled in configs:
            cmd = ["--preset", args.preset, "--steps", str(args.steps), "--amp", amp, "--eval-batches", "2",
                   "--seed", str(args.seed)]
            cmd += ["--compile"] if compiled else []
            cmd += ["--text-file", args.text_file] if args.text_file else []
            runs[amp, compiled].append(train_gpt.main(cmd))
    rows = []
    for (amp, compiled), summaries in runs.items():
        steady = spread([s["steady_tokens_per_s"] for s in summaries])
        rows.append({"amp": amp, "compile": compiled, "repeats": len(summaries),
                     "tokens_per_s": round(steady["median"]), "tokens_per_s_min": steady["min"],
                     "tokens_per_s_max": steady["max"], "tokens_per_s_runs": steady["runs"],
                     "tokens_per_s_incl_warmup": round(statistics.median(s["tokens_per_s"] for s in summaries)),
                     "train_loss": statistics.median(s["train_loss"] for s in summaries),
                     "seconds": round(statistics.median(s["seconds"] for s in summaries), 2)})
    shape = train_gpt.PRESETS[args.preset]
    tokens, d = shape["batch_size"] * shape["block_size"], shape["d_model"]
    times = {"float32": [], "bf16": [], "autocast": []}
    for _ in range(max(args.repeats, 3) * 2):
        times["float32"].append(matmul_ms(tokens, d, 4 * d, torch.float32, False, device))
        times["bf16"].append(matmul_ms(tokens, d, 4 * d, torch.bfloat16, False, device))
        times["autocast"].append(matmul_ms(tokens, d, 4 * d, torch.float32, True, device))
    matmul = {"shape": [tokens, d, 4 * d], "ms": {k: spread(v) for k, v in times.items()},
              "bf16_speedup": spread([f / b for f, b in zip(times["float32"], times["bf16"])]),
              "autocast_speedup": spread([f / a for f, a in zip(times["float32"], times["autocast"])])}
    name = torch.cuda.get_device_name() if cuda else "CPU"
    threads_env = f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} " if "OMP_NUM_THREADS" in os.environ else ""
    result = {"device": name, "preset": args.preset, "steps": args.steps, "repeats": args.repeats,
              "seed": args.seed, "data": data,
              "command": threads_env + "python benchmarks/bench_gpt.py " + shlex.join(sys.argv[1:] if argv is None
                                                                                      else argv),
              "torch": torch.__version__, "machine": platform.machine(), "cpu_bf16_flags": cpu_bf16_flags(),
              "threads": torch.get_num_threads(), "note": args.note,
              "load_average_1min": {"start": load_at_start, "end": os.getloadavg()[0]}, "rows": rows, "matmul": matmul}
    base = rows[0]["tokens_per_s"]
    print(f"\nGPT '{args.preset}' on {name}, {args.steps} steps per run, {args.repeats} runs per row; tokens/s after "
          "the first quarter of the steps: median [min, max]")
    print(f"{'amp':>5} {'compile':>8} | {'tokens/s':>10} {'vs first':>8} | {'min':>7} {'max':>7} | {'loss':>6}")
    for r in rows:
        print(f"{r['amp']:>5} {str(r['compile']):>8} | {r['tokens_per_s']:>10} {r['tokens_per_s'] / base:7.2f}x"
              f" | {r['tokens_per_s_min']:>7} {r['tokens_per_s_max']:>7} | {r['train_loss']:6.3f}")
    ms = matmul["ms"]
    print(f"matmul {tokens}x{d} @ {d}x{4 * d} alone, ms median: float32 {ms['float32']['median']:.3f}, "
          f"bf16 {ms['bf16']['median']:.3f}, float32 under autocast {ms['autocast']['median']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
