"""The course's own trained models (lessons 09-12, 17): float16 safetensors plus a JSON manifest (command, commit, seed,
device, minutes, held-out metrics, size, sha256) in ``COURSE_MODELS_DIR`` or the nearest ``course_models/`` up from the
working directory: ``load_course_model("gpt_shakespeare")``. Lesson 17's MiniLM is stored whole (``minilm_classifier``)
or as LoRA adapters and head (``minilm_lora``) over the pretrained all-MiniLM-L6-v2."""

from __future__ import annotations

import copy
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors.torch import load_file, save_model

from ..lora import apply_lora, load_lora_state_dict
from ..models import GPT, EncoderClassifier, MaskedLM, Transformer
from ..modes import model_device
from ..safe_files import file_sha256, verify_file
from ..tokenizers import Tokenizer
from .bert import BertConfig, SentenceClassifier, SentenceEncoder
from .loading import PIP_NAME, load_minilm

# State-dict names before issue 34 (files saved then keep them: they are mapped on load, not re-saved).
_OLD_HEADS = {"generator": "lm_head", "head": "classifier", "decoder": "lm_head"}  # MaskedLM.decoder: weight, bias
_RESIDUALS = {"EncoderLayer": ("self_attn", "ffn"), "DecoderLayer": ("self_attn", "cross_attn", "ffn")}

KINDS = {"gpt": GPT, "transformer": Transformer, "masked_lm": MaskedLM, "encoder_classifier": EncoderClassifier}
MINILM_KINDS = ("minilm_classifier", "minilm_lora")  # lesson 17: the whole fine-tuned MiniLM / its adapters


class CourseModel(NamedTuple):
    model: torch.nn.Module
    tokenizers: dict[str, Tokenizer]
    manifest: dict


def course_models_dir(folder: str | os.PathLike | None = None) -> Path:
    if folder is None and os.environ.get("COURSE_MODELS_DIR"):
        folder = os.environ["COURSE_MODELS_DIR"]
    if folder is not None:
        if not Path(folder).is_dir():
            raise FileNotFoundError(f"course models folder {folder} does not exist")
        return Path(folder)
    for parent in (Path.cwd(), *Path.cwd().parents):
        if (parent / "course_models").is_dir():
            return parent / "course_models"
    raise FileNotFoundError("no course_models/ folder in the working directory or above it: run from the course's "
                            "clone, or set COURSE_MODELS_DIR to the folder that holds the .json manifests")


def save_course_model(folder: str | os.PathLike, name: str, model: torch.nn.Module, *, kind: str, config: dict,
                      tokenizers: dict[str, Tokenizer], metrics: dict, seed: int, minutes: float, **extra) -> Path:
    """Write ``name.safetensors`` (float16, tied weights once) and ``name.json`` (``KINDS[kind](**config)`` rebuilds the
    model, ``extra`` is stored as is) into ``folder``; return the manifest's path."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    return write_course_model(folder, name, model, lambda tmp: save_model(copy.deepcopy(model).cpu().half(), tmp),
                              kind=kind, config=config, tokenizers=tokenizers, metrics=metrics, seed=seed,
                              minutes=minutes, **extra)


def write_course_model(folder, name: str, model: torch.nn.Module, write_weights, *, kind: str, config: dict,
                       tokenizers: dict[str, Tokenizer], metrics: dict, seed: int, minutes: float, **extra) -> Path:
    """The file layer of every course model: ``write_weights(tmp_path)`` writes the weights, then the manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights, manifest_path = folder / f"{name}.safetensors", folder / f"{name}.json"
    tmp = weights.with_suffix(".tmp")
    write_weights(str(tmp))
    os.chmod(tmp, 0o644)
    os.replace(tmp, weights)
    device = model_device(model)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    argv = [Path(sys.executable).name if i == 0 else a for i, a in enumerate(getattr(sys, "orig_argv", sys.argv))]
    manifest = {"name": name, "kind": kind, "config": config,
                "tokenizers": {role: tok.to_dict() for role, tok in tokenizers.items()}, "metrics": metrics,
                "command": " ".join(map(shlex.quote, ["python", *argv[1:]])), "commit": commit, "seed": seed,
                "device": device.type,
                "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu,
                "threads": torch.get_num_threads(), "minutes": round(minutes, 2), "torch": torch.__version__,
                "date": time.strftime("%Y-%m-%d"), "file": weights.name, "dtype": "float16",
                "bytes": weights.stat().st_size, "sha256": file_sha256(weights), **extra}
    tmp = manifest_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, manifest_path)
    return manifest_path


def current_name(key: str, model: torch.nn.Module) -> str:
    """A state-dict ``key`` saved before issue 34 under today's name (``res2`` -> ``ffn_residual`` or, in a decoder
    layer, ``cross_attn_residual``; ``generator``/MaskedLM's ``decoder`` -> ``lm_head``; ``head`` -> ``classifier``)."""
    if old := re.fullmatch(r"(.*)\.res(\d)\.(.*)", key):
        return f"{old[1]}.{_RESIDUALS[type(model.get_submodule(old[1])).__name__][int(old[2]) - 1]}_residual.{old[3]}"
    head, _, rest = key.partition(".")
    return f"{_OLD_HEADS[head]}.{rest}" if head in _OLD_HEADS and not hasattr(model, head) else key


def load_weights(model: torch.nn.Module, path: str | os.PathLike) -> torch.nn.Module:
    """Load safetensors strictly, old names mapped; a tied weight is stored once (missing: shares a loaded tensor)."""
    state, ours = {current_name(k, model): v for k, v in load_file(str(path)).items()}, model.state_dict()
    result, loaded = model.load_state_dict(state, strict=False), {ours[k].data_ptr() for k in state if k in ours}
    missing = [k for k in result.missing_keys if ours[k].data_ptr() not in loaded]
    if missing or result.unexpected_keys:
        raise ValueError(f"{path} does not fit this model: missing {missing}, unexpected {result.unexpected_keys}")
    return model


def load_course_model(name: str, folder: str | os.PathLike | None = None, device: str = "cpu") -> CourseModel:
    """``(model in eval mode, {role: tokenizer}, manifest)``; a missing or damaged weights file (size, sha256 as in
    the manifest) raises an error naming the command that rebuilds it."""
    root = course_models_dir(folder)
    manifest_path = root / f"{name}.json"
    if not manifest_path.is_file():
        known = sorted(p.stem for p in root.glob("*.json"))
        raise FileNotFoundError(f"no course model {name!r} in {root} (known: {', '.join(known) or 'none'})")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    weights = root / manifest["file"]
    verify_file(weights, size=manifest["bytes"], sha256=manifest["sha256"],
                fix=f"Restore it (git checkout -- {weights.name}) or rebuild it: {manifest['command']}")
    tokenizers = {role: Tokenizer.from_dict(d) for role, d in manifest["tokenizers"].items()}
    cfg = manifest["config"]
    if manifest["kind"] == "minilm_classifier":  # every weight is in the file
        encoder = SentenceEncoder(BertConfig(**cfg["bert"]), tokenizers["wordpiece"], "mean", normalize=False)
        model = load_weights(SentenceClassifier(encoder, cfg["n_classes"], cfg["dropout"]).half(), weights).float()
    elif manifest["kind"] in MINILM_KINDS:
        encoder, tokenizer = load_minilm(device="cpu", normalize=False)  # the pretrained base, checked file by file
        if tokenizer.to_dict() != tokenizers["wordpiece"].to_dict():
            raise ValueError(f"the installed {PIP_NAME} has another vocabulary than the one {manifest['name']} was "
                             f"trained with: reinstall it or rebuild the adapters: {manifest['command']}")
        model, lora = SentenceClassifier(encoder, cfg["n_classes"], cfg["dropout"]), cfg["lora"]
        apply_lora(model.encoder, lora["targets"], r=lora["r"], alpha=lora["alpha"], dropout=lora["dropout"])
        load_lora_state_dict(model, {current_name(k, model): v.float() for k, v in load_file(str(weights)).items()})
    else:
        model = load_weights(KINDS[manifest["kind"]](**cfg).half(), weights).float()
    return CourseModel(model.to(device).eval(), tokenizers, manifest)
