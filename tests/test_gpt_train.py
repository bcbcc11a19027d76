"""The GPT trainer ``benchmarks/train_gpt.py``: one process, and DDP with torchrun (gloo, 2 CPU processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils.lm_data import lm_batches, split_ids

TRAIN_GPT = str(Path(__file__).resolve().parents[1] / "benchmarks" / "train_gpt.py")
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40


def test_lm_batches_are_deterministic_shifted_and_rank_dependent():
    ids = torch.arange(500)
    a, b = lm_batches(ids, 8, 4, seed=1)(3), lm_batches(ids, 8, 4, seed=1)(3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], a[0] + 1)  # y is x shifted by one
    assert not torch.equal(lm_batches(ids, 8, 4, seed=1, rank=1)(3)[0], a[0])
    train, val = split_ids(ids, 0.1)
    assert len(train) == 450 and len(val) == 50
    with pytest.raises(ValueError, match="block_size"):
        lm_batches(torch.arange(5), 8, 2)


def _run(cmd, tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_single_process_training_writes_a_resumable_checkpoint(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    args = [
        sys.executable,
        TRAIN_GPT,
        "--preset",
        "tiny",
        "--eval-batches",
        "2",
        "--text-file",
        "t.txt",
        "--out",
        "ckpt.pt",
        "--device",
        "cpu",
    ]
    first = _run(args + ["--steps", "6"], tmp_path)
    assert first["world_size"] == 1 and first["steps"] == 6 and Path(tmp_path, "ckpt.pt").exists()
    second = _run(args + ["--steps", "10"], tmp_path)  # continues from step 6
    assert second["steps"] == 10


def test_ddp_with_torchrun_two_processes_keeps_ranks_in_sync(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    summary = _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29533",
            TRAIN_GPT,
            "--preset",
            "tiny",
            "--steps",
            "5",
            "--eval-batches",
            "2",
            "--text-file",
            "t.txt",
            "--out",
            "ddp.pt",
        ],
        tmp_path,
    )
    assert summary["world_size"] == 2
    assert summary["ranks_in_sync"] is True  # gradients were all-reduced
    assert summary["val_loss"] is not None and Path(tmp_path, "ddp.pt").exists()


def test_throughput_leaves_the_warm_up_out_of_the_steady_rate():
    sys.path.insert(0, str(Path(TRAIN_GPT).parent))
    from train_gpt import throughput

    # 8 steps of 100 tokens: the first step takes 10 s (compilation), every later one 1 s.
    elapsed = [10.0 + i for i in range(8)]
    rates = throughput(elapsed, 100)
    assert rates["tokens_per_s"] == round(800 / 17)                 # everything, compilation included
    assert rates["steady_tokens_per_s"] == 100                      # steps 3..7 after step 2: 1 s each
    assert throughput([], 100) == {"tokens_per_s": None, "steady_tokens_per_s": None}
    assert throughput([0.5], 100)["steady_tokens_per_s"] is None
