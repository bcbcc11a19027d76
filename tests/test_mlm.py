"""course_utils.mlm: BERT's 15 % / 80-10-10 masking, the MLM loss and the accuracy measures."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from course_utils.mlm import IGNORE_INDEX, mask_tokens, masked_accuracy, masked_logits, mlm_loss, unigram_baseline

V, PAD, UNK, BOS, EOS, MASK = 50, 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, BOS, EOS, MASK)


def _batch(b=64, t=128, seed=0, pad_from=None):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (b, t), generator=g)
    ids[:, 0] = BOS
    if pad_from is not None:
        ids[:, pad_from:] = PAD
    return ids


def _z(successes: int, trials: int, q: float) -> float:
    """How many standard deviations an observed count is from its binomial expectation."""
    return abs(successes - trials * q) / math.sqrt(trials * q * (1 - q))


def test_fractions_match_bert_over_many_tokens(device):
    ids = _batch(256, 256, pad_from=200).to(device)   # 51,200 ordinary positions
    g = torch.Generator(device=device).manual_seed(0)
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, generator=g)
    assert inputs.device == ids.device and labels.device == ids.device
    eligible = ~torch.isin(ids, torch.tensor(SPECIAL, device=device))
    selected = labels != IGNORE_INDEX
    n_eligible, n_sel = int(eligible.sum()), int(selected.sum())
    assert _z(n_sel, n_eligible, 0.15) < 5                       # 15 % of the ordinary positions
    masked = int((selected & (inputs == MASK)).sum())
    unchanged = int((selected & (inputs == ids)).sum())
    replaced = n_sel - masked - unchanged
    assert _z(masked, n_sel, 0.8) < 5
    # "random" draws the original id again 1 time in 45 (45 ordinary ids): it then counts as unchanged
    q_random = 0.1 * (1 - 1 / (V - len(SPECIAL)))
    assert _z(replaced, n_sel, q_random) < 5
    assert _z(unchanged, n_sel, 1 - 0.8 - q_random) < 5


def test_labels_are_ignore_index_exactly_where_not_selected():
    ids = _batch(pad_from=100)
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, generator=torch.Generator().manual_seed(1))
    selected = labels != IGNORE_INDEX
    assert torch.equal(labels[selected], ids[selected])           # the original token is the target
    assert torch.equal(inputs[~selected], ids[~selected])         # nothing else is touched
    changed = inputs != ids
    assert not (changed & ~selected).any()
    assert ids.shape == inputs.shape == labels.shape and inputs.dtype == labels.dtype == ids.dtype


def test_special_tokens_are_never_selected_nor_drawn():
    ids = _batch(128, 64)
    ids[:, 10:20] = torch.tensor(SPECIAL).repeat(2)               # specials in the middle too
    ids[:, 50:] = PAD
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, p=1.0, generator=torch.Generator().manual_seed(2))
    special = torch.isin(ids, torch.tensor(SPECIAL))
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(inputs[special], ids[special])
    assert (labels[~special] != IGNORE_INDEX).all()               # p = 1: every ordinary token selected
    random_positions = (inputs != ids) & (inputs != MASK)
    assert random_positions.any()
    assert not torch.isin(inputs[random_positions], torch.tensor(SPECIAL)).any()


def test_deterministic_with_a_generator_and_ids_untouched():
    ids = _batch()
    before = ids.clone()
    a = mask_tokens(ids, V, MASK, SPECIAL, generator=torch.Generator().manual_seed(7))
    b = mask_tokens(ids, V, MASK, SPECIAL, generator=torch.Generator().manual_seed(7))
    c = mask_tokens(ids, V, MASK, SPECIAL, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
    assert torch.equal(ids, before)
    torch.manual_seed(3)
    d = mask_tokens(ids, V, MASK, SPECIAL)
    torch.manual_seed(3)
    e = mask_tokens(ids, V, MASK, SPECIAL)
    assert torch.equal(d[0], e[0]) and torch.equal(d[1], e[1])    # the global RNG without a generator


def test_p_zero():
    ids = _batch(16, 32)
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, p=0.0)
    assert torch.equal(inputs, ids) and (labels == IGNORE_INDEX).all()


@given(b=st.integers(1, 4), t=st.integers(1, 24), p=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1),
       n_pad=st.integers(0, 24))
def test_properties(b, t, p, seed, n_pad):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (b, t), generator=g)
    ids[:, max(t - n_pad, 0):] = PAD
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, p=p, generator=g)
    special = torch.isin(ids, torch.tensor(SPECIAL))
    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(inputs[~selected], ids[~selected])
    assert ((inputs >= 0) & (inputs < V)).all()
    assert not torch.isin(inputs[selected], torch.tensor([PAD, UNK, BOS, EOS])).any()


def test_one_dimensional_and_empty_inputs():
    ids = torch.arange(5, 45)
    inputs, labels = mask_tokens(ids, V, MASK, SPECIAL, p=0.5, generator=torch.Generator().manual_seed(0))
    assert inputs.shape == labels.shape == (40,)
    empty = torch.zeros(2, 0, dtype=torch.long)
    inputs, labels = mask_tokens(empty, V, MASK, SPECIAL)
    assert inputs.shape == labels.shape == (2, 0)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(ids=torch.rand(2, 3)), TypeError, "integer token ids"),
    (dict(ids=[[5, 6]]), TypeError, "torch.Tensor"),
    (dict(vocab_size=1), ValueError, "vocab_size"),
    (dict(mask_id=V), ValueError, "mask_id=50 is outside"),
    (dict(special_ids=(0, 99)), ValueError, "special id=99"),
    (dict(p=1.5), ValueError, r"p must be a probability"),
    (dict(ids=torch.tensor([[5, 60]])), ValueError, "ids must lie in"),
])
def test_errors_say_what_to_do(kwargs, error, match):
    args = dict(ids=torch.tensor([[5, 6, 7]]), vocab_size=V, mask_id=MASK, special_ids=SPECIAL)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        mask_tokens(**args)


def test_loss_and_accuracy_use_selected_positions_only():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(3, 7, V, generator=g)
    labels = torch.full((3, 7), IGNORE_INDEX)
    labels[0, 2], labels[1, 5], labels[2, 0] = 9, 11, 12
    keep = labels != IGNORE_INDEX
    torch.testing.assert_close(mlm_loss(logits, labels), F.cross_entropy(logits[keep], labels[keep]))
    logits[0, 2, 9] = logits[1, 5, 11] = 100.0                   # two of the three are right
    assert masked_accuracy(logits, labels) == pytest.approx(2 / 3)
    assert masked_accuracy(logits, labels, k=V) == 1.0
    with pytest.raises(ValueError, match="do not match"):
        mlm_loss(logits, labels[:, :3])
    with pytest.raises(ValueError, match="nothing to score"):
        masked_accuracy(logits, torch.full((3, 7), IGNORE_INDEX))


def test_unigram_baseline():
    train = torch.tensor([PAD, PAD, PAD, 7, 7, 8, 9])            # PAD is the most frequent but special
    labels = torch.tensor([[7, IGNORE_INDEX, 8, 7]])
    best, acc = unigram_baseline(train, labels, V, special_ids=SPECIAL)
    assert best == 7 and acc == pytest.approx(2 / 3)


def test_masked_lm_embeddings_start_at_the_same_scale():
    """Regression: with nn.Embedding's default N(0, 1) positions next to N(0, 0.02) tokens, the token signal was
    50× weaker than the position signal after embed_norm and the model stayed at the unigram baseline."""
    from course_utils.models import MaskedLM

    torch.manual_seed(0)
    model = MaskedLM(500, d_model=64, n_heads=4, n_layers=1, max_len=128)
    token_std = float(model.embed.weight.detach().std())
    position_std = float(model.pos.embedding.weight.detach().std())
    assert token_std == pytest.approx(0.02, rel=0.1) and position_std == pytest.approx(0.02, rel=0.1)
    model.eval()
    ids = torch.randint(5, 500, (1, 12))
    other = ids.clone()
    other[0, 3] = (ids[0, 3] + 1 - 5) % 495 + 5                     # another token at one position
    with torch.no_grad():
        a, b = model(ids), model(other)
    assert (a[0, 3] - b[0, 3]).abs().max() > 0.05                   # the token itself visibly matters


def test_masked_logits_are_the_model_at_the_selected_positions():
    """One MLM forward: mlm.masked_logits is MaskedLM.forward(select=...), equal to the full logits indexed."""
    from course_utils.models import MaskedLM

    torch.manual_seed(0)
    model = MaskedLM(40, d_model=16, n_heads=2, n_layers=1, max_len=16).eval()
    ids = torch.randint(5, 40, (3, 10))
    ids[2, 6:] = 0                                                   # padding
    inputs, labels = mask_tokens(ids, 40, 4, SPECIAL, p=0.4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, targets = masked_logits(model, inputs, labels)
        full = model(inputs)
    keep = labels != IGNORE_INDEX
    assert logits.shape == (int(keep.sum()), 40) and torch.equal(targets, labels[keep])
    torch.testing.assert_close(logits, full[keep], atol=1e-6, rtol=1e-6)
    with pytest.raises(TypeError, match="bool keep-mask"):
        model(inputs, select=keep.float())
