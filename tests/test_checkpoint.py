"""Checkpoints: safe loading, atomic writes, clear errors, and bit-for-bit resume of ``fit``."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from course_utils import checkpoint as ckpt_module
from course_utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from course_utils.schedules import cosine_schedule
from course_utils.train import History, fit

ROOT = Path(__file__).resolve().parents[1]


def make_model(seed: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1))


TRUE_W = torch.linspace(-1.0, 1.0, 4).unsqueeze(1)  # (4, 1)


def get_batch(step: int):
    """A deterministic function of the step, as fit's reproducibility contract requires."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(8, 4, generator=g)
    return x, x @ TRUE_W


def mse(model, batch):
    x, y = batch
    return ((model(x) - y) ** 2).mean()


def trained_state(tmp_path):
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(10, 2))
    for step in range(3):
        optimizer.zero_grad()
        mse(model, get_batch(step)).backward()
        optimizer.step()
        scheduler.step()
    history = History()
    history.record_step(0, 1.5, 1e-2, 0.1)
    history.record_eval(0, {"val_loss": 2.0})
    return model, optimizer, scheduler, history


def test_roundtrip_restores_everything_and_reads_with_weights_only(tmp_path):
    model, optimizer, scheduler, history = trained_state(tmp_path)
    path = save_checkpoint(tmp_path / "run" / "last.pt", model, optimizer, scheduler, 3, history,
                           {"note": "hi", "ids": torch.arange(3)})
    raw = torch.load(path, weights_only=True)  # everything in the file is plain: the safe loader reads it
    assert raw["step"] == 3 and raw["extra"]["note"] == "hi" and raw["history"]["val_loss"] == [2.0]

    model2 = make_model(seed=7)
    optimizer2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    scheduler2 = torch.optim.lr_scheduler.LambdaLR(optimizer2, cosine_schedule(10, 2))
    loaded = load_checkpoint(path, model2, optimizer2, scheduler2)
    for a, b in zip(model.state_dict().values(), model2.state_dict().values()):
        assert torch.equal(a, b)
    assert scheduler2.last_epoch == scheduler.last_epoch == 3
    assert optimizer2.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    for p, p2 in zip(model.parameters(), model2.parameters()):
        assert torch.equal(optimizer.state[p]["exp_avg_sq"], optimizer2.state[p2]["exp_avg_sq"])
    assert History.from_dict(loaded["history"]) == history
    assert torch.equal(loaded["extra"]["ids"], torch.arange(3))


def test_rng_states_are_restored_only_when_asked(tmp_path):
    model = make_model()
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    path = save_checkpoint(tmp_path / "c.pt", model, step=1)

    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    first = draw()
    load_checkpoint(path, model)  # restore_rng=False: the streams continue
    assert draw() != first
    load_checkpoint(path, model, restore_rng=True)
    assert draw() == first


def test_no_temporary_files_are_left_behind(tmp_path):
    model = make_model()
    for step in range(3):
        save_checkpoint(tmp_path / "c.pt", model, step=step)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model = make_model()
    path = save_checkpoint(tmp_path / "c.pt", model, step=5)
    before = path.read_bytes()
    real_save = torch.save

    def save_then_interrupt(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.truncate(100)  # half-written file, then the student presses stop
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt_module.torch, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model, step=6)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint(path, make_model())["step"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_file_names_the_file_and_the_fix(tmp_path, damage):
    path = save_checkpoint(tmp_path / "c.pt", make_model(), step=1)
    data = path.read_bytes()
    damaged = {"truncate": data[: len(data) // 2], "garbage": b"not a checkpoint" * 20, "empty": b""}
    path.write_bytes(damaged[damage])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, make_model())
    message = str(info.value)
    assert str(path) in message and "delete" in message and "earlier checkpoint" in message


def test_unsafe_pickle_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))  # what a malicious checkpoint could run when unpickled

    path = tmp_path / "evil.pt"
    torch.save({"format": ckpt_module.FORMAT, "model": {}, "x": Payload()}, path)
    with pytest.raises(CheckpointError, match="weights_only=True"):
        load_checkpoint(path, make_model())
    assert not marker.exists()


def test_other_errors_are_clear(tmp_path):
    model = make_model()
    with pytest.raises(FileNotFoundError, match="checkpoint_path"):
        load_checkpoint(tmp_path / "missing.pt", model)
    torch.save(model.state_dict(), tmp_path / "bare.pt")
    with pytest.raises(CheckpointError, match="not a course_utils checkpoint"):
        load_checkpoint(tmp_path / "bare.pt", model)
    path = save_checkpoint(tmp_path / "c.pt", model, step=1)
    with pytest.raises(CheckpointError, match="same hyperparameters"):
        load_checkpoint(path, nn.Linear(4, 1))
    with pytest.raises(TypeError, match="weights_only"):
        save_checkpoint(tmp_path / "d.pt", model, step=1, extra={"array": np.zeros(3)})
    with pytest.raises(ValueError, match="directory"):
        save_checkpoint(tmp_path, model, step=1)
    with pytest.raises(ValueError, match="non-negative"):
        save_checkpoint(tmp_path / "e.pt", model, step=-1)


def _fit(path, batches, steps=20, model=None):
    def eval_fn(m):  # draws a random number too, so the RNG state after an evaluation matters
        return {"val_loss": float(mse(m, get_batch(99))), "noise": float(torch.rand(()))}

    return fit(make_model() if model is None else model, batches, mse, steps=steps, lr=1e-2,
               weight_decay=0.1, schedule=cosine_schedule(steps, 3), checkpoint_path=path,
               checkpoint_every=5 if path else 0,
               eval_fn=eval_fn, eval_every=4, progress=False, device="cpu", on_interrupt="return")


def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(tmp_path, capsys):
    """20 straight steps == 12 steps interrupted (checkpoint at 10) + resume, with dropout and RNG in eval."""
    straight_model = make_model()
    straight = _fit(None, get_batch, model=straight_model)
    interrupted = {"done": False}

    def batches(step):
        if step == 12 and not interrupted["done"]:
            interrupted["done"] = True
            raise KeyboardInterrupt  # as if the student pressed stop while step 12 was being prepared
        return get_batch(step)

    path = tmp_path / "run.pt"
    first = _fit(path, batches)
    assert first.interrupted and len(first) == 12
    out = capsys.readouterr().out
    assert "Interrupted at step 12" in out and "step 10" in out and "resume" in out
    assert torch.load(path, weights_only=True)["step"] == 10  # the half-done steps 10-11 were not saved

    resumed_model = make_model(seed=123)  # different initial weights: the checkpoint must overwrite them
    resumed = _fit(path, batches, model=resumed_model)
    assert "Resuming from" in capsys.readouterr().out
    assert not resumed.interrupted
    assert resumed.step == list(range(20))
    assert resumed.loss == straight.loss  # exact equality: same weights, batches and dropout masks
    assert resumed.lr == straight.lr
    assert resumed.val_step == straight.val_step and resumed.metrics == straight.metrics
    assert torch.load(path, weights_only=True)["step"] == 20
    for a, b in zip(straight_model.state_dict().values(), resumed_model.state_dict().values()):
        assert torch.equal(a, b)


def test_resume_false_starts_over_and_finished_runs_do_nothing(tmp_path, capsys):
    path = tmp_path / "run.pt"
    _fit(path, get_batch, steps=5)
    again = _fit(path, get_batch, steps=5)
    assert "nothing to train" in capsys.readouterr().out and len(again) == 5
    fresh = fit(make_model(), get_batch, mse, steps=3, checkpoint_path=path, resume=False, progress=False)
    assert fresh.step == [0, 1, 2]
    assert torch.load(path, weights_only=True)["step"] == 3


def _unsafe_torch_loads(source: str, filename: str = "<string>") -> list[str]:
    """``torch.load`` calls (also via ``import torch as th`` / ``from torch import load``) lacking a literal
    ``weights_only=True``."""
    tree = ast.parse(source, filename)
    modules, functions = {"torch"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "torch"}
        elif isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.serialization"):
            functions |= {a.asname or a.name for a in node.names if a.name == "load"}
            modules |= {a.asname or a.name for a in node.names if a.name == "serialization"}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else None
        is_load = (isinstance(func, ast.Name) and func.id in functions) or (
            isinstance(func, ast.Attribute) and func.attr == "load"
            and (owner in modules or owner in {f"{m}.serialization" for m in modules}))
        safe = any(kw.arg == "weights_only" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                   for kw in node.keywords)
        if is_load and not safe:
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_unsafe_load_scanner_catches_bad_calls():
    bad = "\n".join([
        "import torch", "import torch as th", "from torch import load as tload",
        "a = torch.load('a.pt')", "b = torch.load('b.pt', weights_only=False)",
        "c = torch.serialization.load('c.pt', map_location='cpu')", "d = th.load('d.pt')",
        "e = tload('e.pt')",
    ])
    good = "\n".join([
        "import torch", "import json", "x = torch.load('a.pt', weights_only=True, map_location='cpu')",
        "y = json.load(f)", "z = np.load('z.npy')",
    ])
    assert len(_unsafe_torch_loads(bad)) == 5
    assert _unsafe_torch_loads(good) == []


def test_no_unsafe_torch_load():
    """Every torch.load in the package, the benchmarks and the tools passes weights_only=True."""
    files = [p for folder in ("course_utils", "benchmarks", "tools") if (ROOT / folder).is_dir()
             for p in sorted((ROOT / folder).rglob("*.py"))]
    assert any(p.name == "checkpoint.py" for p in files)
    problems = [hit for p in files for hit in _unsafe_torch_loads(p.read_text(encoding="utf-8"), str(p))]
    assert problems == [], "torch.load without weights_only=True:\n" + "\n".join(problems)
