"""``fit``'s run, not its maths: the checkpoint file (resume, save every ``every`` steps and at the end) and Ctrl+C."""

from __future__ import annotations

import os
import sys
from typing import Any

from .checkpoint import load_checkpoint, save_checkpoint
from .history import History
from .safe_files import defer_interrupts
from .validation import check_file_path, check_int


class Resumable:
    """``path`` (None: nothing is written), ``every`` steps (0: at the end), ``resume`` from an existing file,
    ``on_interrupt`` = ``"return"`` / ``"raise"`` / ``"auto"`` (return in a Jupyter kernel, raise in a script)."""

    def __init__(self, path: str | os.PathLike | None, every: int = 0, resume: bool = True, on_interrupt: str = "auto"):
        self.every = check_int(every, "checkpoint_every", 0)
        if self.every and path is None:
            raise ValueError(f"checkpoint_every={every} needs checkpoint_path='runs/model.pt'")
        if on_interrupt not in ("auto", "return", "raise"):
            raise ValueError(f"on_interrupt={on_interrupt!r} is not supported: use 'auto', 'return' or 'raise'")
        if on_interrupt == "auto":  # a running Jupyter kernel keeps the curve; a script (or a torchrun rank) stops
            ipython = sys.modules.get("IPython") if "ipykernel" in sys.modules else None  # nbval: no kernel
            kernel = getattr(ipython and ipython.get_ipython(), "kernel", None)
            on_interrupt = "return" if kernel is not None else "raise"
        self.path = check_file_path(path) if path is not None else None
        self.resuming = self.path is not None and resume and self.path.exists()
        self.on_interrupt, self.last_saved = on_interrupt, 0

    def restore(self, model, optimizer, scheduler, scaler, history: History, start: int, steps: int) -> int:
        """Load the checkpoint when resuming (``history`` is updated in place); return the first step to run."""
        if self.resuming:
            ckpt = load_checkpoint(self.path, model, optimizer, scheduler, restore_rng=True)
            start = ckpt["step"]
            # the checkpoint's history is the truth at its step; update in place, the caller's object follows
            history.__dict__.update(History.from_dict(ckpt["history"] or History().to_dict()).__dict__)
            if scaler is not None and "grad_scaler" in ckpt["extra"]:
                scaler.load_state_dict(ckpt["extra"]["grad_scaler"])
            print(f"Resuming from {self.path} at step {start}/{steps}.")
        history.interrupted = False
        if start >= steps:
            print(f"Already at step {start} >= steps={steps}: nothing to train (raise steps to go on).")
        self.last_saved = start
        return start

    def save_if_due(self, done: int, steps: int, model, optimizer, scheduler, history: History, scaler,
                    **extra: Any) -> None:
        """Write the checkpoint after update ``done`` when it is the last or a multiple of ``every``."""
        if self.path is None or not (done == steps or (self.every and done % self.every == 0)):
            return
        extra["steps"] = steps
        if scaler is not None:
            extra["grad_scaler"] = scaler.state_dict()
        with defer_interrupts():  # Ctrl+C now waits for the file to be complete (and last_saved set)
            save_checkpoint(self.path, model, optimizer, scheduler, done, history, extra)
            self.last_saved = done

    def interrupted(self, err: KeyboardInterrupt, step: int, steps: int, history: History) -> bool:
        """Ctrl+C: mark ``history`` and say where the run can go on from; True when the caller must re-raise."""
        history.interrupted = True
        how = (f"The last complete checkpoint ({self.path}, step {self.last_saved}) is intact: run the same fit(...) "
               "call again (resume=True) to continue from there." if self.path is not None and self.path.exists()
               else "No checkpoint was written (pass checkpoint_path=... to make the run resumable).")
        kept = ("The returned History holds the curve so far." if self.on_interrupt == "return"
                else "Stopping (fit(..., on_interrupt='return') returns the History instead).")
        print(f"\nInterrupted at step {step}/{steps}. {how} {kept}", flush=True)
        if self.on_interrupt == "raise":
            err.history = history
        return self.on_interrupt == "raise"

    def last_good(self) -> str:
        """A sentence naming the last checkpoint, for an error message ("" when there is none)."""
        return f" The last good checkpoint is {self.path}." if self.path is not None and self.path.exists() else ""
