"""Speed of course_utils attention against PyTorch's, measured in the same run (issue: speed).

    python benchmarks/bench_attention.py                 # CPU: float32, d=256, h=8, T in {128, 512, 1024, 2048}
    python benchmarks/bench_attention.py --device cuda   # CUDA: the same in bf16, more tokens per row

Rows: forward+backward time of ``course_utils.MultiHeadAttention`` (fast SDPA path), ``nn.MultiheadAttention``
and our written-out softmax path (``need_weights=True``), plus ``EncoderLayer`` vs ``nn.TransformerEncoderLayer``.
Ratios < 1 mean course_utils is faster. Timings are medians of several repeats after warm-up; ``--json`` also
records every repeat and the spread of each time (``torch_ms_runs``, ``torch_ms_min``, ``torch_ms_max``, ...), which
lesson 14 prints as ``median [min–max]``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

import torch
from torch import nn

from course_utils import EncoderLayer
from course_utils.interop import load_encoder_layer_from_torch
from course_utils.speed import attention_samples, forward_backward, time_samples


def milliseconds(name: str, samples: list[float]) -> dict:
    """The median of ``samples`` (seconds) in ms as ``name``, with its spread and every repeat beside it."""
    runs = [s * 1e3 for s in samples]
    return {name: statistics.median(runs), f"{name}_min": min(runs), f"{name}_max": max(runs), f"{name}_runs": runs}


def bench_row(b, t, d, h, device, dtype, repeats, inner):
    r = attention_samples(b, t, d, h, device, dtype, repeats, inner)
    return {"nn.MultiheadAttention": r["torch"], "course_utils (SDPA)": r["sdpa"], "written-out softmax": r["written"]}


def bench_encoder_layer(b, t, d, h, device, dtype, repeats, inner):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(d, h, 4 * d, dropout=0.0, batch_first=True, device=device, dtype=dtype)
    ours = load_encoder_layer_from_torch(EncoderLayer(d, h, 4 * d, dropout=0.0).to(device, dtype), ref)
    x = torch.randn(b, t, d, device=device, dtype=dtype, requires_grad=True)
    return {
        "nn.TransformerEncoderLayer": time_samples(forward_backward(ref, x), device, repeats, inner),
        "course_utils EncoderLayer": time_samples(forward_backward(ours, x), device, repeats, inner),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--lengths", type=int, nargs="*", default=None, help="T per row (default 128 512 1024 2048)")
    p.add_argument(
        "--tokens", type=int, default=None, help="B·T per row (default 4096 on CPU, 65536 on CUDA)"
    )
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None, help="also write the rows to this JSON file (lesson 14 reads it)")
    args = p.parse_args(argv)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda asked for, but torch.cuda.is_available() is False")
    dtype = torch.bfloat16 if cuda else torch.float32
    lengths = args.lengths or [128, 512, 1024, 2048]
    tokens = args.tokens or (65536 if cuda else 4096)
    inner = 10 if cuda else 2
    print(
        f"device={args.device} ({torch.cuda.get_device_name() if cuda else 'CPU'}), dtype={dtype}, "
        f"d_model={args.d_model}, heads={args.heads}, torch {torch.__version__}, threads {torch.get_num_threads()}"
    )
    print(
        "\nMultiHeadAttention forward+backward (ms); ratio = course_utils / nn.MultiheadAttention, "
        "speed-up = written-out / course_utils"
    )
    print(f"{'B':>4} {'T':>5} | {'nn.MHA':>9} {'ours':>9} {'written':>9} | {'ratio':>6} {'speed-up':>8}")
    device_name = torch.cuda.get_device_name() if cuda else "CPU"
    result = {"device": device_name, "dtype": str(dtype), "torch": torch.__version__, "d_model": args.d_model,
              "heads": args.heads, "repeats": args.repeats, "inner": inner, "threads": torch.get_num_threads(),
              "command": "python benchmarks/bench_attention.py " + shlex.join(sys.argv[1:] if argv is None else argv),
              "mha": [], "encoder_layer": []}
    for t in lengths:
        b = max(1, tokens // t)
        r = bench_row(b, t, args.d_model, args.heads, args.device, dtype, args.repeats, inner)
        runs = r["nn.MultiheadAttention"], r["course_utils (SDPA)"], r["written-out softmax"]
        result["mha"].append({"B": b, "T": t, **milliseconds("torch_ms", runs[0]), **milliseconds("ours_ms", runs[1]),
                              **milliseconds("written_ms", runs[2])})
        ref, ours, wr = (statistics.median(samples) for samples in runs)
        print(
            f"{b:>4} {t:>5} | {ref * 1e3:9.2f} {ours * 1e3:9.2f} {wr * 1e3:9.2f} | {ours / ref:6.3f} "
            f"{wr / ours:7.2f}x"
        )
    print("\nEncoderLayer forward+backward (ms)")
    for t in lengths[:2]:
        b = max(1, tokens // t)
        r = bench_encoder_layer(b, t, args.d_model, args.heads, args.device, dtype, args.repeats, inner)
        runs = r["nn.TransformerEncoderLayer"], r["course_utils EncoderLayer"]
        ref, ours = (statistics.median(samples) for samples in runs)
        print(f"{b:>4} {t:>5} | nn {ref * 1e3:9.2f}  ours {ours * 1e3:9.2f} | ratio {ours / ref:6.3f}")
        result["encoder_layer"].append({"B": b, "T": t, **milliseconds("torch_ms", runs[0]),
                                        **milliseconds("ours_ms", runs[1])})
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
