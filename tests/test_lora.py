"""course_utils.lora (lesson 17): the adapted layer starts as the base, merging gives the same outputs, the fused
q, k, v projection gets three independent adapters, trainable counts, the frozen base untouched by training,
adapters saved and loaded alone, and clear errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils import lora
from course_utils.lora import LoRALinear, apply_lora, count_parameters, merge_lora
from course_utils.multihead import MultiHeadAttention
from course_utils.pretrained import BertConfig, SentenceClassifier, SentenceEncoder

CONFIG = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=16)


def tiny_classifier(seed: int = 0) -> SentenceClassifier:
    torch.manual_seed(seed)
    return SentenceClassifier(SentenceEncoder(CONFIG, normalize=False), n_classes=2).eval()


def batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50, (3, 9), generator=g)
    keep = torch.ones(3, 9, dtype=torch.bool)
    keep[1, 6:] = False
    return ids, keep


def randomize_adapters(model: nn.Module, seed: int = 2) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.copy_(torch.randn(m.lora_B.shape, generator=g) * 0.1)


def test_starts_as_the_base_and_merging_gives_the_same_outputs():
    model = tiny_classifier()
    ids, keep = batch()
    before = model(ids, keep)
    names = apply_lora(model.encoder, r=4, alpha=8)
    assert names == [f"bert.encoder.layers.{i}.self_attn.{p}" for p in ("qkv_proj", "out_proj") for i in (0, 1)]
    torch.testing.assert_close(model(ids, keep), before, atol=0, rtol=0)      # B = 0: exactly the base
    randomize_adapters(model)
    adapted = model(ids, keep)
    assert (adapted - before).abs().max() > 1e-3                               # the adapters do something
    merge_lora(model)
    assert (model(ids, keep) - adapted).abs().max() <= 1e-5
    merge_lora(model, unwrap=True)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    assert (model(ids, keep) - adapted).abs().max() <= 1e-5


def test_unmerge_restores_the_base_weight():
    layer = LoRALinear(nn.Linear(6, 9), r=2, alpha=3.0)
    w = layer.base.weight.clone()
    nn.init.normal_(layer.lora_B)
    layer.merge()
    assert layer.merged and not torch.equal(layer.base.weight, w)
    layer.unmerge()
    torch.testing.assert_close(layer.base.weight, w)


def test_the_fused_qkv_adapter_is_three_independent_rank_r_adapters():
    layer = LoRALinear(nn.Linear(8, 24), r=2, alpha=6.0, parts=3)
    nn.init.normal_(layer.lora_B)
    x = torch.randn(5, 8)
    a, b = layer.lora_A.detach(), layer.lora_B.detach()
    blocks = [x @ a[2 * p: 2 * p + 2].T @ b[8 * p: 8 * p + 8].T for p in range(3)]
    want = layer.base(x) + 3.0 * torch.cat(blocks, -1)
    torch.testing.assert_close(layer(x), want)
    torch.testing.assert_close(nn.functional.linear(x, layer.weight, layer.bias), want)
    assert torch.linalg.matrix_rank(layer.delta_weight()[:8]) == 2


def test_attention_reads_the_effective_weight_and_the_gradient_reaches_the_adapters():
    mha = nn.Sequential(MultiHeadAttention(16, 4))
    apply_lora(mha, r=2, alpha=4)
    x = torch.randn(2, 5, 16)
    mha(x).sum().backward()
    qkv = mha[0].qkv_proj
    assert qkv.lora_B.grad is not None and qkv.lora_B.grad.abs().sum() > 0     # through .weight, not forward()
    assert qkv.base.weight.grad is None


def test_trainable_counts():
    model = tiny_classifier()
    full, total = count_parameters(model)
    assert full == total
    apply_lora(model.encoder, r=4, alpha=8)
    trainable, total_after = count_parameters(model)
    d, layers = 32, 2
    assert trainable == layers * 4 * 4 * (d + d) + (d * 2 + 2)                 # q, k, v, o adapters + the head
    assert total_after == total + trainable - (d * 2 + 2)
    assert count_parameters(nn.Linear(3, 3).requires_grad_(False)) == (0, 12)


def test_the_frozen_base_is_untouched_after_training_steps():
    model = tiny_classifier()
    apply_lora(model.encoder, r=4, alpha=8)
    frozen = {k: v.clone() for k, v in model.encoder.state_dict().items() if "lora_" not in k}
    adapters = {k: v.clone() for k, v in model.state_dict().items() if "lora_" in k or k.startswith("classifier.")}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    ids, keep = batch()
    model.train()
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(model(ids, keep), torch.tensor([0, 1, 1])).backward()
        opt.step()
    for k, v in model.encoder.state_dict().items():
        if "lora_" not in k:
            assert torch.equal(v, frozen[k]), k
    changed = [k for k, v in model.state_dict().items() if k in adapters and not torch.equal(v, adapters[k])]
    assert {k.rsplit(".", 1)[-1] for k in changed} >= {"lora_A", "lora_B", "weight", "bias"}


def test_save_and_load_the_adapters_and_the_head_alone(tmp_path):
    model = tiny_classifier()
    apply_lora(model.encoder, r=4, alpha=8)
    randomize_adapters(model)
    nn.init.normal_(model.classifier.weight)
    state = lora.lora_state_dict(model, ("classifier.",))
    assert set(state) == {k for k in model.state_dict() if "lora_" in k} | {"classifier.weight", "classifier.bias"}
    path = tmp_path / "adapters.safetensors"
    lora.save_lora(path, model, extra=("classifier.",))
    fresh = tiny_classifier()                                                  # the same base weights (seed 0)
    apply_lora(fresh.encoder, r=4, alpha=8)
    lora.load_lora(path, fresh)
    ids, keep = batch()
    torch.testing.assert_close(fresh(ids, keep), model(ids, keep), atol=2e-3, rtol=2e-3)   # float16 file
    assert path.stat().st_size < sum(t.numel() for t in state.values()) * 2 + 4096
    with pytest.raises(ValueError, match="apply_lora with the same targets"):
        lora.load_lora(path, tiny_classifier())
    other_rank = tiny_classifier()
    apply_lora(other_rank.encoder, r=2, alpha=8)
    with pytest.raises(ValueError, match="same r and targets"):
        lora.load_lora(path, other_rank)
    with pytest.raises(ValueError, match="no LoRA adapters"):
        lora.lora_state_dict(tiny_classifier())
    merge_lora(model)
    with pytest.raises(ValueError, match="merged"):
        lora.lora_state_dict(model)


@pytest.mark.parametrize("r, match", [(0, "positive rank"), (-3, "positive rank"), (7, "exceeds min"),
                                      (2.5, "must be an int")])
def test_bad_ranks_are_refused(r, match):
    with pytest.raises((ValueError, TypeError), match=match):
        LoRALinear(nn.Linear(6, 12), r=r)


def test_bad_targets_and_layers_are_refused():
    model = tiny_classifier()
    with pytest.raises(ValueError, match=r"no nn.Linear named \['query'\].*named \[.*'qkv_proj'"):
        apply_lora(model.encoder, ["query"])
    with pytest.raises(TypeError, match=r"write targets=\['out_proj'\]"):
        apply_lora(model.encoder, "out_proj")
    with pytest.raises(ValueError, match="targets is empty"):
        apply_lora(model.encoder, [])
    with pytest.raises(TypeError, match="not an nn.Linear"):
        apply_lora(model.encoder, ["norm"])
    with pytest.raises(TypeError, match="wraps an nn.Linear"):
        LoRALinear(nn.Conv1d(3, 3, 1))
    with pytest.raises(ValueError, match="must divide"):
        LoRALinear(nn.Linear(6, 10), r=2, parts=3)
    apply_lora(model.encoder, ["out_proj"], r=2)
    with pytest.raises(ValueError, match="already has LoRA"):
        apply_lora(model.encoder, ["out_proj"], r=2)
