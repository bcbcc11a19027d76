"""course_utils.train: devices, seeding, schedules, History and the fit loop (NaN guard, AMP, compile)."""

from __future__ import annotations

import collections
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checkpoint import load_checkpoint
from course_utils.schedules import CosineSchedule, InverseSqrtSchedule, cosine_schedule, inverse_sqrt_schedule
from course_utils.train import History, TrainingDiverged, fit, move_to_device, pick_device, seed_everything

TRUE_W = torch.tensor([[2.0], [-1.0], [0.5], [3.0]])  # (4, 1)


def regression_batch(step: int):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(32, 4, generator=g)
    return x, x @ TRUE_W + 0.01 * torch.randn(32, 1, generator=g)


def mse(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y)


def linear(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Linear(4, 1)


# ---------------------------------------------------------------- devices, seeds, batches
def test_pick_device():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert pick_device().type == expected
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device(torch.device("cpu")) == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown device"):
        pick_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            pick_device("cuda")


def test_seed_everything_makes_all_three_generators_repeat():
    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    seed_everything(124)
    assert draw() != first
    for bad in (-1, 2**32, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            seed_everything(bad)


def test_move_to_device_handles_nested_batches():
    Pair = collections.namedtuple("Pair", "src tgt")
    batch = {"pair": Pair(torch.ones(2), torch.zeros(3)), "list": [torch.ones(1), 7, "text"], "none": None}
    moved = move_to_device(batch, "meta")  # the meta device exists everywhere: a real move without a GPU
    assert isinstance(moved["pair"], Pair) and moved["pair"].src.device.type == "meta"
    assert moved["list"][0].device.type == "meta" and moved["list"][1:] == [7, "text"]
    assert moved["none"] is None
    assert batch["pair"].src.device.type == "cpu"  # the input is not modified


# ---------------------------------------------------------------- schedules
def _lambda_lr_values(multiplier, n):
    """The learning rates LambdaLR really uses for the first n updates (base lr 1.0)."""
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
    values = []
    for _ in range(n):
        values.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return values


@pytest.mark.parametrize(("d_model", "warmup"), [(512, 4000), (64, 10)])
def test_inverse_sqrt_schedule_is_the_papers_formula(d_model, warmup):
    def paper(step):  # lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step from 1
        return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)

    schedule = inverse_sqrt_schedule(d_model, warmup)
    for step in (1, 2, warmup // 2, warmup - 1, warmup, warmup + 1, 3 * warmup, 100 * warmup):
        assert schedule(step - 1) == pytest.approx(paper(step), rel=1e-12)
    assert schedule(warmup - 1) == pytest.approx((d_model * warmup) ** -0.5)  # the peak
    if warmup <= 100:  # through LambdaLR too (the long warm-up would only make the test slow)
        lrs = _lambda_lr_values(schedule, 2 * warmup)
        assert lrs[0] == pytest.approx(paper(1)) and lrs[-1] == pytest.approx(paper(2 * warmup))
        assert max(range(len(lrs)), key=lrs.__getitem__) == warmup - 1


def test_cosine_schedule_formula_and_endpoints():
    total, warmup, min_ratio = 100, 10, 0.1
    schedule = cosine_schedule(total, warmup, min_ratio)
    for step in (1, 5, 10, 11, 30, 55, 99, 100, 150):  # step counted from 1
        if step <= warmup:
            expected = step / warmup
        else:
            progress = min(1.0, (step - warmup) / (total - warmup))
            expected = min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        assert schedule(step - 1) == pytest.approx(expected, rel=1e-12)
    assert schedule(warmup - 1) == 1.0 and schedule(total - 1) == pytest.approx(min_ratio)
    lrs = _lambda_lr_values(schedule, total)
    assert all(a < b for a, b in zip(lrs[:warmup], lrs[1:warmup]))  # warm-up rises
    assert all(a >= b for a, b in zip(lrs[warmup:], lrs[warmup + 1:]))  # then decays
    assert cosine_schedule(10)(0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 10)))  # no warm-up


def test_schedule_errors_and_state_dict():
    with pytest.raises(ValueError, match="warmup"):
        CosineSchedule(10, warmup=20)
    with pytest.raises(ValueError, match="min_ratio"):
        CosineSchedule(10, min_ratio=2.0)
    with pytest.raises(ValueError, match="warmup"):
        InverseSqrtSchedule(512, 0)
    with pytest.raises(TypeError, match="d_model"):
        InverseSqrtSchedule(512.0, 10)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    state = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(50, 5, 0.2)).state_dict()
    assert state["lr_lambdas"] == [{"total_steps": 50, "warmup": 5, "min_ratio": 0.2}]  # plain numbers


# ---------------------------------------------------------------- History
def test_history_records_and_round_trips():
    h = History()
    for step in range(3):
        h.record_step(step, 1.0 / (step + 1), 1e-3, 0.5 * step)
    h.record_eval(0, {"val_loss": 2.0})
    h.record_eval(2, {"val_loss": 1.0, "accuracy": 0.75})  # a new metric: NaN for the earlier evaluation
    d = h.to_dict()
    assert d["step"] == [0, 1, 2] and d["val_step"] == [0, 2] and d["val_loss"] == [2.0, 1.0]
    assert math.isnan(d["accuracy"][0]) and d["accuracy"][1] == 0.75
    back = History.from_dict(d)
    assert back.loss == h.loss and back.metrics["val_loss"] == [2.0, 1.0] and len(back) == 3
    with pytest.raises(ValueError, match="val_loss"):
        h.record_eval(3, {"loss": 1.0})


# ---------------------------------------------------------------- fit
def test_fit_learns_a_regression():
    model = linear()
    h = fit(model, regression_batch, mse, steps=150, lr=5e-2, schedule=cosine_schedule(150, 10),
            eval_fn=lambda m: {"val_loss": float(mse(m, regression_batch(10_000)))}, eval_every=50,
            progress=False)
    assert len(h) == 150 and h.step == list(range(150))
    assert h.loss[-1] < 0.01 * h.loss[0]
    assert h.val_step == [49, 99, 149] and h.metrics["val_loss"][-1] < 0.01
    torch.testing.assert_close(model.weight.detach().cpu(), TRUE_W.T, atol=0.05, rtol=0)
    assert h.lr[0] == pytest.approx(5e-2 / 10) and h.elapsed == sorted(h.elapsed)


def test_fit_learns_a_classification_with_progress_bar(capsys):
    torch.manual_seed(0)
    centers = torch.randn(3, 8) * 3

    def batch(step):
        g = torch.Generator().manual_seed(step)
        y = torch.randint(0, 3, (64,), generator=g)
        return {"x": centers[y] + torch.randn(64, 8, generator=g), "y": y}

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3))
    h = fit(model, batch, lambda m, b: F.cross_entropy(m(b["x"]), b["y"]), steps=40, lr=2e-2)
    assert "loss=" in capsys.readouterr().err  # tqdm's postfix
    assert sum(h.loss[-10:]) < 0.25 * sum(h.loss[:10])
    assert model.training  # fit restores the mode it found


def test_eval_fn_runs_in_eval_mode_without_grad_and_at_the_end_by_default():
    seen = []

    def eval_fn(m):
        seen.append((m.training, torch.is_grad_enabled()))
        return {"val_loss": torch.tensor(1.0)}

    model = nn.Sequential(nn.Linear(4, 1), nn.Dropout(0.5))
    h = fit(model, regression_batch, mse, steps=6, eval_fn=eval_fn, eval_every=2, progress=False)
    assert seen == [(False, False)] * 3 and h.val_step == [1, 3, 5]
    h = fit(model, regression_batch, mse, steps=4, eval_fn=eval_fn, progress=False, history=History())
    assert h.val_step == [3]  # eval_every=0: once, at the end
    with pytest.raises(TypeError, match="dict"):
        fit(model, regression_batch, mse, steps=1, eval_fn=lambda m: 1.0, progress=False)


class FullyMaskedScorer(nn.Module):
    """Attention-like scores with every key masked: softmax over only -inf is NaN."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        every_key_masked = torch.ones(3, dtype=torch.bool, device=x.device)
        scores = self.proj(x).masked_fill(every_key_masked, float("-inf"))  # (N, 3)
        return torch.softmax(scores, dim=-1).sum(-1, keepdim=True)  # (N, 1), all NaN


def test_nan_loss_raises_training_diverged_with_advice():
    with pytest.raises(TrainingDiverged) as info:
        fit(FullyMaskedScorer(), regression_batch, mse, steps=5, lr=3e-2, progress=False)
    err = info.value
    assert isinstance(err, FloatingPointError) and err.step == 0 and math.isnan(err.value)
    message = str(err)
    for fragment in ("step 0", "lower the learning rate (now 0.03", "clip_grad", "attention mask"):
        assert fragment in message


def test_exploding_run_stops_before_the_bad_update():
    model = linear()
    with pytest.raises(TrainingDiverged) as info:
        fit(model, regression_batch, mse, steps=200, optimizer=torch.optim.SGD(model.parameters(), lr=10.0),
            clip_grad=None, progress=False)
    err = info.value
    assert err.step > 0 and not math.isfinite(err.value) and "enable clip_grad" in str(err)
    assert len(err.history) == err.step and all(math.isfinite(v) for v in err.history.loss)


def test_nan_gradient_with_finite_loss_is_caught():
    def loss_fn(m, batch):  # sqrt'(0) = inf: the loss is 0 but its gradient is NaN
        out = m(batch[0])
        return torch.sqrt(((out - out.detach()) ** 2).sum())

    with pytest.raises(TrainingDiverged, match="gradient norm"):
        fit(linear(), regression_batch, loss_fn, steps=3, progress=False)


def test_continuing_a_history_keeps_steps_and_schedule():
    straight_model = linear()
    straight = fit(straight_model, regression_batch, mse, steps=20, schedule=cosine_schedule(20, 5),
                   optimizer=torch.optim.AdamW(straight_model.parameters(), lr=1e-2), progress=False,
                   device="cpu")
    model = linear()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    h = fit(model, regression_batch, mse, steps=8, schedule=cosine_schedule(20, 5), optimizer=optimizer,
            progress=False, device="cpu")
    h = fit(model, regression_batch, mse, steps=20, schedule=cosine_schedule(20, 5), optimizer=optimizer,
            progress=False, history=h, device="cpu")
    assert h.step == list(range(20))
    assert h.lr == pytest.approx(straight.lr, rel=1e-12)
    assert h.loss == pytest.approx(straight.loss, rel=1e-5)  # no dropout: same batches, same updates


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"steps": 0}, ValueError, "steps"),
        ({"steps": 2, "eval_every": 1}, ValueError, "eval_fn"),
        ({"steps": 2, "checkpoint_every": 1}, ValueError, "checkpoint_path"),
        ({"steps": 2, "clip_grad": -1.0}, ValueError, "clip_grad"),
        ({"steps": 2, "lr": 0.0}, ValueError, "lr"),
        ({"steps": 2, "amp": "fp8"}, ValueError, "amp"),
        ({"steps": 2, "schedule": 3}, TypeError, "schedule"),
    ],
)
def test_fit_argument_errors(kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        fit(linear(), regression_batch, mse, progress=False, **kwargs)


def test_fit_loss_fn_errors():
    with pytest.raises(TypeError, match="mean"):
        fit(linear(), regression_batch, lambda m, b: m(b[0]) - b[1], steps=1, progress=False)
    with pytest.raises(ValueError, match="require grad"):
        fit(linear(), regression_batch, lambda m, b: mse(m, b).detach(), steps=1, progress=False)
    other = torch.optim.SGD(linear().parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(other, lambda s: 1.0)
    with pytest.raises(ValueError, match="another optimizer"):
        fit(linear(), regression_batch, mse, steps=1, schedule=scheduler, progress=False)


def test_fp16_needs_cuda_and_auto_is_off_on_cpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("checks the CPU behaviour")
    with pytest.raises(ValueError, match="bf16"):
        fit(linear(), regression_batch, mse, steps=1, amp="fp16", progress=False)
    fit(linear(), regression_batch, mse, steps=1, progress=False, checkpoint_path=tmp_path / "c.pt")
    assert torch.load(tmp_path / "c.pt", weights_only=True)["extra"]["amp"] == "off"


def test_bf16_autocast_on_cpu_trains():
    model = linear()
    h = fit(model, regression_batch, mse, steps=60, lr=5e-2, amp="bf16", device="cpu", progress=False)
    assert model.weight.dtype == torch.float32  # autocast keeps fp32 master weights
    assert h.loss[-1] < 0.05 * h.loss[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA autocast / GradScaler need a GPU")
@pytest.mark.parametrize("amp", ["auto", "bf16", "fp16"])
def test_amp_on_cuda(amp, tmp_path):
    if amp == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16")
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 1))
    path = tmp_path / "c.pt"
    h = fit(model, regression_batch, mse, steps=80, lr=1e-2, amp=amp, progress=False, checkpoint_path=path)
    assert next(model.parameters()).device.type == "cuda"
    assert h.loss[-1] < 0.1 * h.loss[0]
    extra = torch.load(path, weights_only=True)["extra"]
    assert extra["amp"] == ("bf16" if amp == "auto" and torch.cuda.is_bf16_supported() else amp)
    assert ("grad_scaler" in extra) == (amp == "fp16")
    h2 = fit(model, regression_batch, mse, steps=90, lr=1e-2, amp=amp, progress=False, checkpoint_path=path)
    assert h2.step == list(range(90))  # resumed on the GPU, scaler state included


def test_torch_compile_fit_step_smoke(tmp_path):
    """A compiled model trains through fit and its checkpoint loads into an eager model."""
    torch._dynamo.reset()
    try:
        compiled = torch.compile(linear(), backend="aot_eager")  # graph capture without a C++ toolchain
        compiled(torch.zeros(1, 4))
    except Exception as err:  # pragma: no cover - depends on the platform
        pytest.skip(f"torch.compile is not supported here: {err}")
    path = tmp_path / "c.pt"
    h = fit(compiled, regression_batch, mse, steps=5, lr=5e-2, progress=False, checkpoint_path=path,
            device="cpu")
    assert len(h) == 5 and h.loss[-1] < h.loss[0]
    eager = nn.Linear(4, 1)
    load_checkpoint(path, eager)  # keys saved without the "_orig_mod." prefix
    torch.testing.assert_close(eager.weight, compiled._orig_mod.weight)
