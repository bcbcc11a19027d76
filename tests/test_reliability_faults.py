"""Faults and hostile inputs for training, checkpoints and data (reliability review, issue 11).

Each test names the review item it covers (docs/robustness.md lists them). Every one of them failed on the
reviewed commit 39cb382: a raw error, a silently wrong result, or work lost.
"""

from __future__ import annotations

import datetime
import errno
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
import types
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from course_utils import checkpoint as ckpt_module
from course_utils import data, safe_files
from course_utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from course_utils.data import download, registry
from course_utils.data.registry import Resource
from course_utils.schedules import cosine_schedule
from course_utils.train import History, TrainingDiverged, fit

ROOT = Path(__file__).resolve().parents[1]
needs_signals = pytest.mark.skipif(not hasattr(signal, "raise_signal") or os.name != "posix",
                                   reason="POSIX signals")


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """These tests send SIGINT and expect Python's KeyboardInterrupt. A process started in the background of a
    non-interactive shell (`make test &`, nohup, some CI runners) inherits SIGINT *ignored*: the signal would then
    do nothing and the Ctrl+C tests would fail, or train for 10**6 steps. Install Python's handler for each test."""
    if not hasattr(signal, "SIGINT") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def small_model(seed: int = 0, width: int = 16) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))


def batch(step: int):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(8, 4, generator=g)
    return x, x.sum(-1, keepdim=True)


def mse(model, b):
    x, y = b
    return ((model(x) - y) ** 2).mean()


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# ------------------------------------------------------------------------------ High 1: Ctrl+C during a save
class _SigintOnWrite:
    """A file whose ``at``-th write delivers SIGINT, as a Ctrl+C landing inside torch's zip writer."""

    def __init__(self, f, at: int):
        self.f, self.at, self.writes = f, at, 0

    def write(self, chunk):
        self.writes += 1
        if self.writes == self.at:
            signal.raise_signal(signal.SIGINT)
        return self.f.write(chunk)

    def flush(self):
        return self.f.flush()


@needs_signals
@pytest.mark.parametrize("at", [1, 3, 6])
def test_ctrl_c_inside_torch_zip_writer_finishes_the_save_then_stops(tmp_path, monkeypatch, at):
    """High 1: torch turns a KeyboardInterrupt inside its writer into `enforce fail at inline_container.cc`."""
    model = small_model()
    path = save_checkpoint(tmp_path / "c.pt", model, step=5)
    real_save = torch.save
    monkeypatch.setattr(ckpt_module.torch, "save", lambda obj, f, *a, **k: real_save(obj, _SigintOnWrite(f, at)))
    with pytest.raises(KeyboardInterrupt):  # a clean KeyboardInterrupt, not a RuntimeError
        save_checkpoint(path, model, step=6)
    monkeypatch.undo()
    assert load_checkpoint(path, small_model(1))["step"] == 6  # the save that was under way completed
    assert temp_files(tmp_path) == []


@needs_signals
def test_ctrl_c_during_fit_checkpoint_returns_history_and_a_loadable_checkpoint(tmp_path, monkeypatch):
    """High 1 through fit: the stop lands in the save of step 3; the History comes back, the file loads."""
    real_save = torch.save
    calls = {"n": 0}

    def save(obj, f, *a, **k):
        calls["n"] += 1
        return real_save(obj, _SigintOnWrite(f, 2) if calls["n"] == 3 else f, *a, **k)

    monkeypatch.setattr(ckpt_module.torch, "save", save)
    history = fit(small_model(), batch, mse, steps=10, checkpoint_path=tmp_path / "run.pt", checkpoint_every=1,
                  progress=False, device="cpu", on_interrupt="return")
    monkeypatch.undo()
    assert history.interrupted and len(history) == 3
    model = small_model(1)
    optimizer = torch.optim.AdamW(model.parameters())
    assert load_checkpoint(tmp_path / "run.pt", model)["step"] == 3
    assert temp_files(tmp_path) == [] and optimizer is not None


@needs_signals
def test_sigint_at_random_moments_always_stops_cleanly_with_a_loadable_checkpoint(tmp_path):
    """High 1, at random moments: SIGINT from another thread while fit trains and saves after every step.

    In a script (no Jupyter kernel) fit re-raises the KeyboardInterrupt after its last complete checkpoint.
    """
    rng = random.Random(0)
    outcomes = []
    path = tmp_path / "run.pt"

    def make():
        return nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1))  # ~1 MB: saves take a while

    def train() -> str:
        try:
            fit(make(), lambda s: (torch.randn(4, 256), torch.randn(4, 1)), mse, steps=10**6,
                checkpoint_path=path, checkpoint_every=1, progress=False, device="cpu", resume=False)
            return "returned without raising"
        except KeyboardInterrupt as err:
            return "clean" if isinstance(getattr(err, "history", None), History) else "bare KeyboardInterrupt"
        except Exception as err:  # e.g. RuntimeError: [enforce fail at inline_container.cc]
            return f"{type(err).__name__}: {err}"[:100]

    for trial in range(8):
        timer = threading.Timer(rng.uniform(0.05, 0.5), os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            outcome = train()
        finally:
            timer.cancel()
            try:
                timer.join()
                time.sleep(0.01)  # a signal sent just now is handled here, not in pytest
            except KeyboardInterrupt:
                outcome = "fit ended before the signal"
        outcomes.append(outcome)
        if path.exists():
            load_checkpoint(path, make())
        assert temp_files(tmp_path) == [], trial
    assert outcomes == ["clean"] * 8, outcomes


# ------------------------------------------------------------------------------- High 5: a flipped bit
def _data_offset(path: Path, member: str) -> tuple[int, int]:
    """(offset, size) of the stored bytes of zip entry ``member`` inside ``path``."""
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    header = info.header_offset
    name_len = int.from_bytes(raw[header + 26:header + 28], "little")
    extra_len = int.from_bytes(raw[header + 28:header + 30], "little")
    return header + 30 + name_len + extra_len, info.compress_size


def test_one_flipped_bit_in_a_tensor_is_detected(tmp_path):
    """High 5: a bit flipped inside a weight's bytes used to load silently (a weight off by 1e36)."""
    model = small_model()
    path = save_checkpoint(tmp_path / "c.pt", model, step=1)
    with zipfile.ZipFile(path) as zf:
        biggest = max((i for i in zf.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    start, size = _data_offset(path, biggest.filename)
    raw = bytearray(path.read_bytes())
    raw[start + size // 2] ^= 0x40  # one bit of one float
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="CRC") as info:
        load_checkpoint(path, small_model(1))
    assert str(path) in str(info.value) and "delete" in str(info.value)


# ---------------------------------------------------- High 6: what save writes, load reads (and the reverse)
class _NumpySchedule:
    def __init__(self):
        self.peak = np.float64(0.5)  # a float subclass that weights_only=True refuses
        self.warmup = np.int64(3)

    def __call__(self, s):
        return float(self.peak) * min(1.0, (s + 1) / int(self.warmup))


def test_numpy_scalars_in_a_schedule_or_optimizer_are_saved_as_numbers(tmp_path):
    """High 6: save wrote numpy scalars that load then refused ("save never writes such files")."""
    model = small_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=np.float32(1e-3))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _NumpySchedule())
    path = save_checkpoint(tmp_path / "c.pt", model, optimizer, scheduler, step=2, extra={"n": np.int32(7)})
    model2 = small_model(1)
    optimizer2 = torch.optim.AdamW(model2.parameters(), lr=1e-3)
    scheduler2 = torch.optim.lr_scheduler.LambdaLR(optimizer2, _NumpySchedule())
    loaded = load_checkpoint(path, model2, optimizer2, scheduler2)
    assert loaded["extra"]["n"] == 7 and type(loaded["extra"]["n"]) is int
    assert scheduler2.lr_lambdas[0].peak == 0.5


class _Stamped(nn.Linear):
    def get_extra_state(self):
        return {"saved_at": datetime.datetime(2024, 1, 1)}

    def set_extra_state(self, state):
        self.stamp = state


def test_what_load_would_refuse_is_refused_at_save_with_the_fix(tmp_path):
    """High 6: a datetime in a model's extra state was written, then refused on load."""
    with pytest.raises(TypeError, match="isoformat") as info:
        save_checkpoint(tmp_path / "c.pt", _Stamped(2, 2), step=1)
    assert "datetime" in str(info.value) and "state_dict" in str(info.value)
    assert not (tmp_path / "c.pt").exists() and temp_files(tmp_path) == []


def test_torch_device_and_dtype_in_extra_round_trip(tmp_path):
    """High 6, the reverse: extra={"d": torch.device("cpu")} was refused at save although loadable."""
    extra = {"d": torch.device("cpu"), "dtype": torch.bfloat16, "size": torch.Size([2, 3]), "z": 1 + 2j}
    path = save_checkpoint(tmp_path / "c.pt", small_model(), step=1, extra=extra)
    assert load_checkpoint(path, small_model())["extra"] == extra


# ---------------------------------------------------------- Medium 7: read-only data folder, file missing
def test_read_only_data_folder_with_a_file_missing_falls_back_to_the_sample(monkeypatch, tmp_path):
    """Medium 7: the temp file of the download could not be created: raw OSError, no fallback."""
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    root = tmp_path / "shared"
    (root / "tiny_shakespeare").mkdir(parents=True)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(download.tempfile, "mkstemp", read_only)
    with pytest.raises(data.DataUnavailable, match="COURSE_DATA_DIR to a writable folder"):
        data.fetch("tiny-shakespeare", data_dir=root, progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = data.load_tiny_shakespeare(data_dir=root, progress=False)
    assert text.source.kind == "sample" and len(caught) == 1


# --------------------------------------------------------- Medium 8: NaN gradient with clipping off
def test_nan_gradient_without_clipping_is_caught_before_the_update():
    """Medium 8: with clip_grad=None the NaN gradient was applied; the weights became NaN."""
    model = small_model()
    before = [p.detach().clone() for p in model.parameters()]

    def loss_fn(m, b):  # sqrt'(0) = inf: the loss is 0 but its gradient is NaN
        out = m(b[0])
        return torch.sqrt(((out - out.detach()) ** 2).sum())

    with pytest.raises(TrainingDiverged, match="gradient norm"):
        fit(model, batch, loss_fn, steps=1, clip_grad=None, progress=False, device="cpu")
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p.detach(), b)


# ------------------------------------------------------ Medium 9 and 10: resuming with another setting
def test_resuming_with_another_optimizer_type_is_refused(tmp_path):
    """Medium 9: KeyError 'momentum' at the first step, or SGD's lr silently replaced by AdamW's."""
    model = small_model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    fit(model, batch, mse, steps=2, optimizer=sgd, checkpoint_path=tmp_path / "s.pt", progress=False, device="cpu")
    with pytest.raises(CheckpointError, match="SGD.*AdamW"):
        fit(small_model(), batch, mse, steps=4, checkpoint_path=tmp_path / "s.pt", progress=False, device="cpu")
    model = small_model()
    fit(model, batch, mse, steps=2, checkpoint_path=tmp_path / "a.pt", progress=False, device="cpu")
    with pytest.raises(CheckpointError, match="AdamW.*SGD"):
        load_checkpoint(tmp_path / "a.pt", model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_a_schedule_added_or_dropped_on_resume_is_refused(tmp_path):
    """Medium 10: a schedule added only on resume restarted from step 0 in the middle of the run."""
    path = tmp_path / "run.pt"
    fit(small_model(), batch, mse, steps=5, lr=1e-2, checkpoint_path=path, progress=False, device="cpu")
    with pytest.raises(CheckpointError, match="without a learning-rate schedule"):
        fit(small_model(), batch, mse, steps=10, lr=1e-2, schedule=cosine_schedule(10, 2), checkpoint_path=path,
            progress=False, device="cpu")
    path2 = tmp_path / "run2.pt"
    fit(small_model(), batch, mse, steps=5, lr=1e-2, schedule=cosine_schedule(10, 2), checkpoint_path=path2,
        progress=False, device="cpu")
    with pytest.raises(CheckpointError, match="frozen"):
        fit(small_model(), batch, mse, steps=10, lr=1e-2, checkpoint_path=path2, progress=False, device="cpu")


# ------------------------------------------------------------ Medium 13: temp files of killed saves
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temp_files_of_killed_saves_are_removed_on_the_next_save_and_load(tmp_path):
    """Medium 13: SIGKILL during a save left .run.pt.*.tmp files forever (20 kills: 63 MB)."""
    path = save_checkpoint(tmp_path / "run.pt", small_model(), step=1)
    dead = tmp_path / f".run.pt.{_dead_pid()}.k2j3h4.tmp"
    old = tmp_path / ".run.pt.abc123.tmp"  # an older version's name, without a pid: stale after an hour
    alive = tmp_path / f".run.pt.{os.getppid()}.zz9.tmp"  # a save running now in another process
    other = tmp_path / ".notes.txt.tmp"
    for f in (dead, old, alive, other):
        f.write_bytes(b"x" * 1000)
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    save_checkpoint(path, small_model(), step=2)
    assert not dead.exists() and not old.exists() and alive.exists() and other.exists()
    dead2 = tmp_path / f".run.pt.{_dead_pid()}.q.tmp"
    dead2.write_bytes(b"x")
    load_checkpoint(path, small_model())
    assert not dead2.exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_sigkill_during_saves_leaves_nothing_after_the_next_save(tmp_path):
    """Medium 13 for real: kill -9 a process that saves in a loop, four times; then one save cleans up."""
    path = tmp_path / "run.pt"
    model = nn.Linear(512, 512)  # 1 MB: each save takes a few milliseconds
    for delay in (0.01, 0.03, 0.06, 0.1):
        pid = os.fork()
        if pid == 0:  # the child saves until it is killed; it never returns into pytest
            try:
                for i in range(10**6):
                    save_checkpoint(path, model, step=i)
            finally:
                os._exit(1)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if path.exists():
        load_checkpoint(path, nn.Linear(512, 512))
    save_checkpoint(path, nn.Linear(512, 512), step=0)
    assert temp_files(tmp_path) == []


# ------------------------------------------------------------------- Medium 16: divergence advice
def test_divergence_advice_for_float16_weights_says_use_float32_not_a_lower_lr():
    """Medium 16: fp16 weights on CPU were told "lower the learning rate" at every lr."""
    model = small_model().half()

    def loss_fn(m, b):
        return (m(b[0].half() * 1e4) ** 2).mean()  # past float16's 65504

    with pytest.raises(TrainingDiverged) as info:
        fit(model, batch, loss_fn, steps=3, lr=1e-6, progress=False, device="cpu")
    message = str(info.value)
    assert "float16" in message and "float32" in message and "lower the learning rate" not in message


def test_an_infinite_learning_rate_is_refused_not_suggested():
    """Medium 16: fit(lr=inf) suggested "try inf"."""
    with pytest.raises(ValueError, match="finite"):
        fit(small_model(), batch, mse, steps=2, lr=math.inf, progress=False, device="cpu")
    model = small_model()
    with pytest.raises(ValueError, match="finite"):
        fit(model, batch, mse, steps=2, optimizer=torch.optim.SGD(model.parameters(), lr=math.inf),
            progress=False, device="cpu")
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(TrainingDiverged, match="learning rate is inf: it must be a finite") as info:
        fit(model, batch, mse, steps=2, lr=1e-3, schedule=lambda s: math.inf, progress=False, device="cpu")
    assert "try inf" not in str(info.value)
    assert all(torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before))


# ------------------------------------------------------------------------- Medium 17: the messages
def test_load_errors_do_not_pass_on_torchs_advice_to_use_weights_only_false(tmp_path):
    """Medium 17: torch's "weights_only=False will likely succeed" was passed on to the student."""

    class Payload:
        def __reduce__(self):
            return (print, ("never run",))

    torch.save({"format": ckpt_module.FORMAT, "model": {}, "x": Payload()}, tmp_path / "evil.pt")
    torch.save({"format": ckpt_module.FORMAT, "model": {}, "x": datetime.date(2024, 1, 1)}, tmp_path / "date.pt")
    for name in ("evil.pt", "date.pt"):
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(tmp_path / name, small_model())
        message = str(info.value)
        assert "weights_only=False" not in message and "add_safe_globals" not in message
        assert info.value.__cause__ is None  # torch's advice is not in the traceback either


def test_size_mismatch_names_every_parameter_and_both_shapes(tmp_path):
    """Medium 17: the size-mismatch details were cut to "Error(s) in loading state_dict"."""
    path = save_checkpoint(tmp_path / "c.pt", small_model(width=16), step=1)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, small_model(width=8))
    message = str(info.value)
    assert "size mismatch for 0.weight" in message and "torch.Size([16, 4])" in message
    assert "torch.Size([8, 4])" in message and "2.weight" in message


# ------------------------------------------------------------------------------------------- Low items
def test_checkpoints_get_the_usual_file_permissions(tmp_path):
    """Low: checkpoints were written 0600 (mkstemp's mode) whatever the umask."""
    old = os.umask(0o022)
    try:
        path = save_checkpoint(tmp_path / "c.pt", small_model(), step=1)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def _toy(monkeypatch, content: bytes, name="toy", path="toy/file.txt", **kw) -> Resource:
    import hashlib

    res = Resource(name, path, len(content), hashlib.sha256(content).hexdigest(), "toy", "test", **kw)
    monkeypatch.setitem(registry.REGISTRY, name, res)
    return res


def test_remembered_hash_is_not_trusted_when_content_changes_with_the_same_size_and_mtime(monkeypatch, tmp_path):
    """Low: a remembered hash was trusted on (size, mtime, inode) alone: `touch -r` hid a same-size edit."""
    _toy(monkeypatch, b"abc" * 100)
    path = tmp_path / "toy" / "file.txt"
    path.parent.mkdir()
    path.write_bytes(b"abc" * 100)
    safe_files._SHA256_CACHE.clear()
    data.fetch("toy", data_dir=tmp_path)  # verified, hash remembered
    st = path.stat()
    with open(path, "r+b") as f:  # same size, same inode, then the old mtime put back
        f.write(b"x")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(data.ChecksumMismatch):
        data.fetch("toy", data_dir=tmp_path)


def test_a_failed_fetch_does_not_create_a_mistyped_data_folder(monkeypatch, tmp_path):
    """Low: a failed download left the (mistyped) COURSE_DATA_DIR behind as an empty folder."""
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    _toy(monkeypatch, b"abc", urls=((tmp_path / "nowhere" / "file.txt").as_uri(),))
    typo = tmp_path / "cuorse-data"
    with pytest.raises(data.DataUnavailable):
        data.fetch("toy", data_dir=typo, progress=False)
    assert not typo.exists()


# ----------------------------------------------- issue 10 items: weight decay groups, Ctrl+C in scripts
class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 1)

    def forward(self, ids):
        return self.proj(self.norm(self.embed(ids))).mean()


def test_fit_decays_weight_matrices_only():
    """library.md 13: AdamW weight decay hit every parameter: norms, biases and embeddings too."""
    model = _Tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # loss * 0: every gradient is 0, so whatever moves is moved by weight decay alone
    fit(model, lambda s: torch.arange(4), lambda m, ids: m(ids) * 0.0, steps=3, lr=0.1, weight_decay=0.5,
        clip_grad=None, progress=False, device="cpu")
    after = model.state_dict()
    assert not torch.equal(after["proj.weight"], before["proj.weight"])  # a matrix: decayed
    for name in ("embed.weight", "norm.weight", "norm.bias", "proj.bias"):
        assert torch.equal(after[name], before[name]), name


class _TiedLM(nn.Module):
    """Embedding, LayerNorm, an MLP and an output head tied to the embedding (as GPT-2 ties them)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.norm = nn.LayerNorm(16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))
        self.head = nn.Linear(16, 20, bias=False)
        self.head.weight = self.embed.weight


def test_param_groups_split_shared_weights_once():
    from course_utils.train import param_groups

    model = _TiedLM()
    groups = param_groups(model, 0.1)
    decay = {id(p) for p in groups[0]["params"]}
    no_decay = {id(p) for p in groups[1]["params"]}
    assert groups[0]["weight_decay"] == 0.1 and groups[1]["weight_decay"] == 0.0
    assert not decay & no_decay and decay | no_decay == {id(p) for p in model.parameters()}
    for name, p in model.named_parameters():
        is_embedding = any(isinstance(m, nn.Embedding) and m.weight is p for m in model.modules())
        assert (id(p) in decay) == (p.dim() >= 2 and not is_embedding), name
    with pytest.raises(ValueError, match="weight_decay"):
        param_groups(model, -1.0)


def test_gpt_train_decays_weight_matrices_only(monkeypatch, tmp_path):
    """library.md 13 in the GPT trainer: its AdamW got model.parameters() with weight_decay=0.1."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import train_gpt as gpt_train

    seen = []
    real = torch.optim.AdamW

    class Recording(real):
        def __init__(self, params, *args, **kwargs):
            super().__init__(params, *args, **kwargs)
            seen.append(self)

    monkeypatch.setattr(gpt_train.torch.optim, "AdamW", Recording)
    (tmp_path / "t.txt").write_text("to be or not to be, that is the question. " * 40)
    gpt_train.main(["--preset", "tiny", "--steps", "2", "--eval-batches", "1", "--text-file",
                    str(tmp_path / "t.txt"), "--device", "cpu", "--block-size", "16", "--batch-size", "2"])
    (optimizer,) = seen
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed and all(p.dim() >= 2 for g in optimizer.param_groups if g["weight_decay"] > 0
                           for p in g["params"])
    model_params = [p for g in optimizer.param_groups for p in g["params"]]
    assert any(p.dim() == 1 for p in model_params) and len(decayed) < len(model_params)


def _interrupt_at(step_to_stop: int):
    def get_batch(step):
        if step == step_to_stop:
            raise KeyboardInterrupt
        return batch(step)

    return get_batch


def test_fit_in_a_script_re_raises_ctrl_c_after_the_last_checkpoint(tmp_path, capsys):
    """library.md 12: fit swallowed Ctrl+C in scripts too: the GPT trainer and the benchmarks carried on."""
    path = tmp_path / "run.pt"
    with pytest.raises(KeyboardInterrupt) as info:
        fit(small_model(), _interrupt_at(7), mse, steps=20, checkpoint_path=path, checkpoint_every=5,
            progress=False, device="cpu")
    assert len(info.value.history) == 7 and info.value.history.interrupted
    assert load_checkpoint(path, small_model())["step"] == 5
    assert "step 5" in capsys.readouterr().out
    returned = fit(small_model(), _interrupt_at(3), mse, steps=20, progress=False, device="cpu",
                   on_interrupt="return")
    assert returned.interrupted and len(returned) == 3
    with pytest.raises(ValueError, match="on_interrupt"):
        fit(small_model(), batch, mse, steps=2, progress=False, on_interrupt="ignore")


def test_fit_in_a_notebook_kernel_returns_the_history(monkeypatch):
    """The notebook behaviour stays: inside a running kernel, Ctrl+C returns the History."""
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    fake_ipython = types.ModuleType("IPython")
    fake_ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython)
    history = fit(small_model(), _interrupt_at(2), mse, steps=10, progress=False, device="cpu")
    assert history.interrupted and len(history) == 2
    fake_ipython.get_ipython = lambda: None  # ipykernel merely imported (as nbval does): a script
    with pytest.raises(KeyboardInterrupt):
        fit(small_model(), _interrupt_at(2), mse, steps=10, progress=False, device="cpu")


# ------------------------------------------------------------ beyond the review: further hostile cases
@pytest.mark.parametrize("case, kwargs, error, fragment", [
    ("negative lr from a schedule", dict(lr=1e-3, schedule=lambda s: -1.0), ValueError, "must be >= 0"),
    ("a metric that is not a number", dict(eval_fn=lambda m: {"val": "abc"}), TypeError, "not a number"),
    ("a dict as history", dict(history={"step": []}), TypeError, "History.from_dict"),
    ("a folder as checkpoint_path", dict(checkpoint_path="."), ValueError, "is a directory"),
])
def test_further_fit_mistakes_get_a_clear_message(case, kwargs, error, fragment):
    model = small_model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(error, match=fragment):
        fit(model, batch, mse, steps=2, progress=False, device="cpu", **kwargs)
    if "metric" not in case:  # refused before any update (the metric is read after the last one)
        assert all(torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before)), case


def test_a_frozen_or_empty_model_is_named_as_the_problem():
    model = small_model().requires_grad_(False)
    with pytest.raises(ValueError, match="frozen"):
        fit(model, batch, mse, steps=2, progress=False, device="cpu")
    with pytest.raises(ValueError, match="no parameters"):
        fit(nn.ReLU(), batch, lambda m, b: b[0].sum(), steps=2, progress=False, device="cpu")


def test_random_bit_flips_and_truncations_never_load_silently(tmp_path):
    model = small_model()
    path = save_checkpoint(tmp_path / "c.pt", model, torch.optim.AdamW(model.parameters()), step=1)
    raw = path.read_bytes()
    rng = random.Random(1)
    damaged = []
    for _ in range(20):
        bad = bytearray(raw)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        damaged.append(bytes(bad))
    damaged += [raw[:n] for n in (0, 1, 100, len(raw) // 2, len(raw) - 22, len(raw) - 1)]
    for i, content in enumerate(damaged):
        (tmp_path / "d.pt").write_bytes(content)
        fresh = small_model(1)
        try:
            load_checkpoint(tmp_path / "d.pt", fresh)
        except CheckpointError:
            continue
        for a, b in zip(model.state_dict().values(), fresh.state_dict().values()):  # loaded: must be intact
            assert torch.equal(a, b), i


def test_loading_into_a_meta_model_or_a_folder_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "c.pt", small_model(), step=1)
    with torch.device("meta"):
        meta = small_model()
    with pytest.raises(ValueError, match="meta device"):
        load_checkpoint(path, meta)
    with pytest.raises(ValueError, match="is a directory"):
        load_checkpoint(tmp_path, small_model())


