"""LoRA, low-rank adaptation (lesson 17; Hu et al. 2021): keep a pretrained ``nn.Linear`` W (out × in) frozen and
learn ΔW = (α / r) · B A with A (r × in), B (out × r), r ≪ min(in, out):

    y = x Wᵀ + b + (α / r) · dropout(x) Aᵀ Bᵀ

B starts at zero, so the adapted model starts *exactly* as the pretrained one; A starts random (Kaiming uniform, as
``nn.Linear``), otherwise the gradient of B (∝ A x) and of A (∝ Bᵀ g) would both be zero forever. ``merge_lora``
writes W + (α / r) B A into the weight: the same outputs, no extra cost at inference.

A fused projection (``MultiHeadAttention.qkv_proj`` stacks [W^Q; W^K; W^V]) takes ``parts=3``: one A_p (r × in) per
block and B's rows split in three, B_p ((out / 3) × r), so ΔW = [B_q A_q; B_k A_k; B_v A_v], exactly three separate
rank-r adapters on q, k and v (A is stored stacked, (3 r × in))."""

from __future__ import annotations

import math
import os

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from .validation import check_int, check_number, check_probability

__all__ = ["LoRALinear", "apply_lora", "merge_lora", "lora_state_dict", "load_lora_state_dict", "save_lora",
           "load_lora", "count_parameters", "ATTENTION_TARGETS"]

# q, k, v live in one fused matrix in the course's attention (3 blocks), o is its own.
ATTENTION_TARGETS = {"qkv_proj": 3, "out_proj": 1}


class LoRALinear(nn.Module):
    """A frozen ``base`` ``nn.Linear`` plus a trainable rank-``r`` update; ``forward(x (..., in)) -> (..., out)``."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 16.0, dropout: float = 0.0, parts: int = 1):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRALinear wraps an nn.Linear, got {type(base).__name__}")
        if isinstance(r, int) and not isinstance(r, bool) and r <= 0:
            raise ValueError(f"r must be a positive rank such as 8, got {r}: r = 0 would add nothing to train")
        r, parts = check_int(r, "r", 1), check_int(parts, "parts", 1)
        out_f, in_f = base.weight.shape
        if out_f % parts:
            raise ValueError(f"parts={parts} must divide the {out_f} output features (3 for a fused q,k,v)")
        if r > min(in_f, out_f // parts):
            raise ValueError(f"r={r} exceeds min(in, out) = {min(in_f, out_f // parts)}: B A could not have rank r "
                             "and would hold more numbers than W itself; LoRA needs r much smaller (4, 8, 16)")
        self.alpha = check_number(alpha, "alpha", 0.0)
        self.r, self.parts, self.in_features, self.out_features = r, parts, in_f, out_f
        self.scale = self.alpha / r                       # α / r: changing r keeps the update's size comparable
        self.base = base
        self.base.requires_grad_(False)                   # the pretrained weights stay frozen
        self.dropout = nn.Dropout(check_probability(dropout))
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(parts * r, in_f, device=w.device, dtype=w.dtype))   # (P r, in)
        self.lora_B = nn.Parameter(torch.zeros(out_f, r, device=w.device, dtype=w.dtype))         # (out, r)
        for p in range(parts):                            # each A_p as nn.Linear initialises an (r × in) weight
            nn.init.kaiming_uniform_(self.lora_A.data[p * r: (p + 1) * r], a=math.sqrt(5))
        self.merged = False

    def delta_weight(self) -> torch.Tensor:
        """ΔW = (α / r) · B A, ``(out, in)``; block p of the rows is B_p A_p when ``parts`` > 1."""
        a = self.lora_A.view(self.parts, self.r, self.in_features)                 # (P, r, in)
        b = self.lora_B.view(self.parts, self.out_features // self.parts, self.r)  # (P, out/P, r)
        return self.scale * (b @ a).reshape(self.out_features, self.in_features)

    @property
    def weight(self) -> torch.Tensor:
        """The effective weight W + (α / r) B A (differentiable in A and B), for code that reads ``.weight`` instead
        of calling the layer, e.g. ``MultiHeadAttention``, which slices the fused [W^Q; W^K; W^V] per block."""
        return self.base.weight if self.merged else self.base.weight + self.delta_weight()

    @property
    def bias(self) -> torch.Tensor | None:
        return self.base.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)                                                           # (..., out)
        if self.merged:
            return y
        z = self.dropout(x) @ self.lora_A.t()                                      # (..., P r): r numbers per part
        z = z.unflatten(-1, (self.parts, self.r))                                  # (..., P, r)
        b = self.lora_B.view(self.parts, self.out_features // self.parts, self.r)  # (P, out/P, r)
        update = torch.einsum("...pr,por->...po", z, b).flatten(-2)                # (..., out)
        return y + self.scale * update

    @torch.no_grad()
    def merge(self, merged: bool = True) -> None:
        """W ← W + (α / r) B A; later calls use the merged weight alone. ``merge(False)`` (``unmerge``) undoes it."""
        if self.merged != merged:
            self.base.weight += (1 if merged else -1) * self.delta_weight().to(self.base.weight.dtype)
            self.merged = merged

    def unmerge(self) -> None:
        self.merge(False)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, alpha={self.alpha:g}, "
                f"parts={self.parts}")


def apply_lora(model: nn.Module, targets: dict[str, int] | tuple[str, ...] | list[str] = ATTENTION_TARGETS,
               r: int = 8, alpha: float = 16.0, dropout: float = 0.0, freeze: bool = True) -> list[str]:
    """Replace every ``nn.Linear`` whose attribute name is in ``targets`` (a name → parts dict, or names with 1 part)
    by a ``LoRALinear``; freeze everything else first (``freeze``); return the replaced modules' names."""
    if isinstance(targets, str):
        raise TypeError(f"targets must be a list of names or a dict name -> parts, got the string {targets!r}: "
                        f"write targets=[{targets!r}]")
    parts = dict(targets) if isinstance(targets, dict) else {name: 1 for name in targets}
    if not parts:
        raise ValueError("targets is empty: name the linear layers to adapt, e.g. ['qkv_proj', 'out_proj']")
    if freeze:
        model.requires_grad_(False)
    found: dict[str, list[str]] = {name: [] for name in parts}
    linear_names = set()
    for full, module in list(model.named_modules()):
        for attr, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                linear_names.add(attr)
            if attr in parts:
                if isinstance(child, LoRALinear):
                    raise ValueError(f"{full}.{attr} already has LoRA: apply_lora once (or merge_lora first)")
                if not isinstance(child, nn.Linear):
                    raise TypeError(f"{full}.{attr} is a {type(child).__name__}, not an nn.Linear: LoRA adapts "
                                    "linear layers")
                setattr(module, attr, LoRALinear(child, r, alpha, dropout, parts[attr]))
                found[attr].append(f"{full}.{attr}".lstrip("."))
    missing = [name for name, hits in found.items() if not hits]
    if missing:
        raise ValueError(f"no nn.Linear named {missing} in {type(model).__name__}; its linear layers are named "
                         f"{sorted(linear_names)}")
    return [name for hits in found.values() for name in hits]


def merge_lora(model: nn.Module, unwrap: bool = False) -> nn.Module:
    """Merge every ``LoRALinear`` (W ← W + (α / r) B A); ``unwrap=True`` also puts the plain ``nn.Linear`` back."""
    for module in list(model.modules()):
        for attr, child in list(module.named_children()):
            if isinstance(child, LoRALinear):
                child.merge()
                if unwrap:
                    setattr(module, attr, child.base)
    return model


def lora_state_dict(model: nn.Module, extra: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """The adapters alone (every ``lora_A``/``lora_B``) plus the parameters whose name starts with one of ``extra``
    (e.g. the new classification head, ``("head.",)``): what must be saved, a tiny part of the model."""
    if any(isinstance(m, LoRALinear) and m.merged for m in model.modules()):
        raise ValueError("the adapters are merged into the weights: unmerge (LoRALinear.unmerge) before saving them")
    state = model.state_dict()
    keep = {k: v for k, v in state.items() if k.rsplit(".", 1)[-1] in ("lora_A", "lora_B") or k.startswith(extra)}
    if not any(k.endswith("lora_A") for k in keep):
        raise ValueError("the model has no LoRA adapters: call apply_lora(model, ...) first")
    return keep


def load_lora_state_dict(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy adapters (and extras) saved by ``lora_state_dict`` into a model that ``apply_lora`` prepared the same
    way; every saved key must exist with the same shape, and every adapter of the model must be given."""
    own = model.state_dict()
    unknown = sorted(set(state) - set(own))
    if unknown:
        raise ValueError(f"{len(unknown)} saved key(s) are not in the model, e.g. {unknown[0]!r}: apply_lora with the "
                         "same targets first")
    missing = sorted(k for k in own if k.rsplit(".", 1)[-1] in ("lora_A", "lora_B") and k not in state)
    if missing:
        raise ValueError(f"{len(missing)} adapter(s) of the model are not in the file, e.g. {missing[0]!r}")
    for k, v in state.items():
        if v.shape != own[k].shape:
            raise ValueError(f"{k}: saved shape {tuple(v.shape)}, model {tuple(own[k].shape)}: same r and targets?")
    model.load_state_dict(state, strict=False)


def save_lora(path: str | os.PathLike, model: nn.Module, extra: tuple[str, ...] = (), dtype=torch.float16) -> None:
    """Write ``lora_state_dict`` to a safetensors file (float16 by default), atomically."""
    tmp = f"{path}.tmp"
    save_file({k: v.detach().to(dtype).contiguous().cpu() for k, v in lora_state_dict(model, extra).items()}, tmp)
    os.replace(tmp, path)


def load_lora(path: str | os.PathLike, model: nn.Module) -> None:
    load_lora_state_dict(model, {k: v.float() for k, v in load_file(str(path)).items()})


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` numbers of parameters (``parameters()`` yields a shared tensor once)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)
