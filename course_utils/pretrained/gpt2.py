"""GPT-2's weights in the course's own ``GPT`` (lessons 11, 13): the same block with the tanh GELU; ``Conv1D``'s ``W``
``(in, out)`` is transposed into ``nn.Linear``'s ``(out, in)``, ``lm_head.weight`` is the tied ``wte``."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import load_file

from ..models import GPT
from ..tokenizers import read_json_file
from .known_files import GPT2, check_model_files
from .loading import PretrainedNotFoundError, copy_checkpoint, hf_cache_root

_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # (in, out) storage: transpose
_BLOCK = (("ln_1", "self_attn_residual.norm"), ("attn.c_attn", "self_attn.qkv_proj"),
          ("attn.c_proj", "self_attn.out_proj"), ("ln_2", "ffn_residual.norm"), ("mlp.c_fc", "ffn.linear1"),
          ("mlp.c_proj", "ffn.linear2"))
GET_GPT2 = ("pip install huggingface_hub, then: huggingface-cli download gpt2 config.json model.safetensors "
            "vocab.json merges.txt tokenizer.json --local-dir gpt2 (about 550 MB), and pass that folder")


def gpt2_key_mapping(n_layers: int) -> list[tuple[str, str, bool]]:
    """``[(GPT-2 name, our parameter name, transpose?), …]``: [W_Q | W_K | W_V] of ``c_attn`` is our ``qkv_proj``."""
    rows = [("wte.weight", "embed.embedding.weight", False), ("wpe.weight", "pos.embedding.weight", False),
            ("ln_f.weight", "blocks.norm.weight", False), ("ln_f.bias", "blocks.norm.bias", False)]
    for i in range(n_layers):
        rows += [(f"h.{i}.{theirs}.{kind}", f"blocks.layers.{i}.{ours}.{kind}", theirs in _CONV1D and kind == "weight")
                 for theirs, ours in _BLOCK for kind in ("weight", "bias")]
    return rows


def gpt2_from_config(config: dict) -> GPT:
    """An untrained ``GPT`` shaped as a GPT-2 ``config.json`` (n_embd, n_head, n_layer, n_positions, vocab_size)."""
    if config.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(f"activation_function={config['activation_function']!r}: GPT-2 uses the tanh GELU "
                         "('gelu_new'); this loader builds only that")
    return GPT(config["vocab_size"], max_len=config["n_positions"], n_layers=config["n_layer"],
               n_heads=config["n_head"], d_model=config["n_embd"], d_ff=config.get("n_inner"),
               activation="gelu_tanh", eps=config.get("layer_norm_epsilon", 1e-5), dropout=0.0)


def load_gpt2_weights(model: GPT, tensors: dict[str, torch.Tensor]) -> list[dict]:
    """Copy a GPT-2 checkpoint ``{name: tensor}`` into ``model`` strictly (``loading.copy_checkpoint``)."""
    tensors = {k.removeprefix("transformer."): v for k, v in tensors.items()
               if not k.endswith((".attn.bias", ".attn.masked_bias")) and k != "lm_head.weight"}  # buffers, tied
    mapping = gpt2_key_mapping(len(model.blocks.layers))
    return copy_checkpoint(model, tensors, [((theirs,), ours) for theirs, ours, _ in mapping],
                           fix="build the model with gpt2_from_config(config.json)",
                           transpose=frozenset(ours for _, ours, flip in mapping if flip))


def find_gpt2_dir(path: str | os.PathLike | None = None, *, verify: bool = True) -> Path:
    """``path``, else the Hugging Face cache's newest ``gpt2`` snapshot, with config.json and model.safetensors;
    ``verify`` as in ``loading.find_minilm_dir`` (against ``known_files.GPT2``)."""
    if path is not None:
        candidates = [Path(path)]
    else:
        snapshots = (hf_cache_root() / "models--gpt2" / "snapshots").glob("*")
        candidates = sorted(snapshots, key=os.path.getmtime, reverse=True)
    for folder in candidates:
        if all((folder / n).is_file() for n in ("config.json", "model.safetensors")):
            return check_model_files(folder, GPT2, verify=verify, remedy=f"Download the official file ({GET_GPT2}), "
                                     "or load these weights on purpose: verify=False")
    raise PretrainedNotFoundError(f"no GPT-2 weights in {path or 'the Hugging Face cache'}: {GET_GPT2}")


def load_gpt2(path: str | os.PathLike | None = None, *, verify: bool = True) -> GPT:
    """GPT-2 (124M for ``gpt2``) in the course's ``GPT``, in eval mode on the CPU; see ``find_gpt2_dir``."""
    folder = find_gpt2_dir(path, verify=verify)
    model = gpt2_from_config(read_json_file(folder / "config.json", "GPT-2 configuration"))
    load_gpt2_weights(model, load_file(str(folder / "model.safetensors"), device="cpu"))
    return model.eval()
