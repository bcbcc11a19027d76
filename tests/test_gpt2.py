"""GPT-2's weights in the course's own GPT: the mapping (names, Conv1D transposes, tanh GELU) checked offline
against ``transformers.GPT2LMHeadModel`` built from a small random ``GPT2Config`` (nothing is downloaded)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from course_utils.pretrained import PretrainedNotFoundError, UnverifiedWeightsWarning
from course_utils.pretrained.gpt2 import find_gpt2_dir, gpt2_from_config, load_gpt2, load_gpt2_weights
from course_utils.safe_files import FileMismatchError

transformers = pytest.importorskip("transformers")

SMALL = dict(vocab_size=97, n_positions=24, n_embd=32, n_layer=2, n_head=4)


def _reference(seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(**SMALL, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random LayerNorm weights and biases too, so a swapped or missed one shows
        for name, p in model.named_parameters():
            if ".ln_" in name or "ln_f" in name or name.endswith("bias"):
                p.normal_(0.0, 0.5 if name.endswith("weight") else 0.1).add_(1.0 if name.endswith("weight") else 0.0)
    return config, model


def test_gpt2_logits_match_transformers():
    config, ref = _reference()
    ours = gpt2_from_config(config.to_dict()).eval()
    report = load_gpt2_weights(ours, ref.state_dict())
    # c_attn, attn c_proj, c_fc, mlp c_proj
    assert sum(row["how"] == "transpose" for row in report) == 4 * SMALL["n_layer"]
    ids = torch.randint(0, SMALL["vocab_size"], (3, SMALL["n_positions"]))
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), ref(ids).logits, atol=1e-5, rtol=1e-5)


def test_load_gpt2_reads_a_folder_and_says_how_to_get_missing_weights(tmp_path):
    config, ref = _reference(1)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")
    # the Hub's model.safetensors has no "transformer." prefix and keeps no lm_head (tied)
    tensors = {k.removeprefix("transformer."): v.contiguous() for k, v in ref.state_dict().items()
               if k != "lm_head.weight"}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    ids = torch.randint(0, SMALL["vocab_size"], (1, 10))
    # not the official weights (known_files.GPT2): refused, unless loaded on purpose with verify=False
    with pytest.raises(FileMismatchError, match="openai-community/gpt2/resolve/607a30d7.*/model.safetensors"):
        load_gpt2(tmp_path)
    with pytest.warns(UnverifiedWeightsWarning), torch.no_grad():
        torch.testing.assert_close(load_gpt2(tmp_path, verify=False)(ids), ref(ids).logits, atol=1e-5, rtol=1e-5)
    with pytest.raises(PretrainedNotFoundError, match="huggingface-cli download gpt2"):
        find_gpt2_dir(tmp_path / "nowhere")


def test_a_wrong_checkpoint_is_refused_with_the_fix():
    config, ref = _reference()
    tensors = dict(ref.state_dict())
    tensors.pop("transformer.h.1.mlp.c_fc.bias")
    with pytest.raises(ValueError, match="lacks.*h.1.mlp.c_fc.bias.*gpt2_from_config"):
        load_gpt2_weights(gpt2_from_config(config.to_dict()), tensors)
    bigger = gpt2_from_config({**config.to_dict(), "n_embd": 64})
    with pytest.raises(ValueError, match="cannot fill"):
        load_gpt2_weights(bigger, ref.state_dict())
    with pytest.raises(ValueError, match="tanh GELU"):
        gpt2_from_config({**config.to_dict(), "activation_function": "relu"})


def test_generation_path_of_lesson_13_matches_transformers_greedy():
    """The else branch of lesson 13's GPT-2 cell, on random small weights: load, then greedy ``generate`` with the
    KV cache; the tokens equal ``GPT2LMHeadModel.generate``'s greedy ones."""
    from course_utils.decoding import generate

    config, ref = _reference(2)
    ours = gpt2_from_config(config.to_dict()).eval()
    load_gpt2_weights(ours, ref.state_dict())
    prompt = torch.randint(0, SMALL["vocab_size"], (1, 5))
    with torch.no_grad():
        mine = generate(ours, prompt, 8, temperature=0.0)
        theirs = ref.generate(prompt, max_new_tokens=8, do_sample=False, attention_mask=torch.ones_like(prompt),
                              pad_token_id=0)
    assert torch.equal(mine, theirs)
