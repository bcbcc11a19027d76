"""Lesson 09 (encoder-only classifier): the synthetic tasks, the helpers, the sentiment widget, the exercise checks.

Nothing here trains: the widget runs on the tiny untrained model of ``l09.demo_model``.
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
import torch

from course_lab import i18n
from course_lab.lessons import l09_classifier as l09
from course_lab.lessons.l09_classifier import checks as l09_checks  # the checks' private references

matplotlib.use("Agg")


pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


@pytest.fixture(scope="module")
def demo():
    return l09.demo_model()


# --- task 1: the common mistake's synthetic labels --------------------------------------------------------------------

def test_longest_run():
    seqs = torch.tensor([[1, 2, 3, 4], [5, 5, 5, 1], [7, 8, 8, 8], [2, 2, 3, 3]])
    assert l09.longest_run(seqs).tolist() == [1, 3, 3, 2]
    with pytest.raises(ValueError, match=r"\(N, T\)"):
        l09.longest_run(torch.tensor([1, 2, 3]))


def test_the_synthetic_rule_gives_only_ones():
    g = torch.Generator().manual_seed(0)
    seqs = torch.randint(1, 1000, (500, 30), generator=g)
    share = sum(w * (seqs == v).float().mean(1) for v, w in ((1, 0.3), (2, 0.2), (3, 0.1)))
    score = share + 0.2 * seqs.float().var(1, unbiased=False) / 1000 + 0.2 * l09.longest_run(seqs) / 30
    assert (score > 0.5).all() and score.min() > 5                 # the variance term alone dwarfs the threshold
    fig = l09.plot_rule_scores(score)
    ax = fig.axes[0]
    assert sum(p.get_height() for p in ax.patches) == 500
    assert ax.lines[0].get_xdata()[0] == 0.5
    assert "500 of 500" in ax.get_title()


# --- task 2: does A come before B? ---------------------------------------------------------------------------

def test_order_task_is_balanced_and_correct():
    ids, labels = l09.make_order_task(400, min_len=5, max_len=9, seed=3)
    assert ids.shape == (400, 9) and labels.float().mean().item() == 0.5
    assert ((ids == l09.A_ID).sum(1) == 1).all() and ((ids == l09.B_ID).sum(1) == 1).all()
    real = ids != l09.PAD_ID
    lengths = real.sum(1)
    assert lengths.min() >= 5 and lengths.max() <= 9
    assert torch.equal(real, torch.arange(9) < lengths[:, None])   # padding only at the end
    a_pos = (ids == l09.A_ID).float().argmax(1)
    b_pos = (ids == l09.B_ID).float().argmax(1)
    assert torch.equal((a_pos < b_pos).long(), labels)
    again, _ = l09.make_order_task(400, min_len=5, max_len=9, seed=3)
    assert torch.equal(ids, again)
    assert not torch.equal(ids, l09.make_order_task(400, min_len=5, max_len=9, seed=4)[0])
    assert l09.order_tokens(ids[0])[0] in l09.ORDER_VOCAB and "<pad>" not in l09.order_tokens(ids[0])


def test_order_task_bag_of_tokens_carries_no_label_information():
    ids, labels = l09.make_order_task(2000, seed=0)
    counts = torch.stack([torch.bincount(r, minlength=len(l09.ORDER_VOCAB)) for r in ids]).float()
    # a linear probe on the counts cannot beat chance by much (least squares on the bag)
    x = torch.cat([counts, torch.ones(len(ids), 1)], 1)
    w = torch.linalg.lstsq(x, labels.float()[:, None] - 0.5).solution
    acc = ((x @ w).squeeze(1) > 0).long().eq(labels).float().mean().item()
    assert acc < 0.58


@pytest.mark.parametrize("bad", [dict(min_len=1), dict(min_len=8, max_len=6), dict(vocab_size=3)])
def test_order_task_rejects_impossible_settings(bad):
    with pytest.raises(ValueError):
        l09.make_order_task(10, **bad)


def test_plot_accuracies():
    fig = l09.plot_accuracies({"a": 0.99, "b": 0.51, "c": 0.48})
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert widths == pytest.approx([0.99, 0.51, 0.48])
    assert fig.axes[0].lines[0].get_xdata()[0] == 0.5


# --- helpers --------------------------------------------------------------------------------------------------

def test_accuracy_and_evaluate(demo):
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]])
    assert l09.accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        l09.accuracy(logits, torch.tensor([0, 1]))
    model, tok = demo
    ids = tok.encode_batch(list(l09.EXAMPLE_SENTENCES))
    labels = torch.tensor([1, 0, 1, 0, 0, 1, 0, 1])
    model.train()
    out = l09.evaluate(model, ids, labels, batch_size=3)             # chunks of 3 give the same result
    assert model.training                                            # the mode is restored
    model.eval()
    with torch.no_grad():
        logits = model(ids)
    assert out["val_acc"] == pytest.approx(l09.accuracy(logits, labels))
    assert out["val_loss"] == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-5)


def test_predict_and_attention(demo):
    model, tok = demo
    probs = l09.predict(model, tok, ["a fine film .", "zzz qqq"])
    assert probs.shape == (2, 2)
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    with pytest.raises(TypeError):
        l09.predict(model, tok, "a fine film")
    with pytest.raises(ValueError):
        l09.predict(model, tok, ["", "a film"])
    tokens, weights, p = l09.sentence_attention(model, tok, "the film is zzzqqq .")
    assert tokens == ["the", "film", "is", "<unk>", "."]
    assert len(weights) == 1 and weights[0].shape == (1, 2, 5, 5)
    torch.testing.assert_close(weights[0].sum(-1), torch.ones(1, 2, 5))
    torch.testing.assert_close(p, l09.predict(model, tok, ["the film is zzzqqq ."])[0])
    with pytest.raises(ValueError):
        l09.sentence_attention(model, tok, "   ")


def test_plot_predictions(demo):
    model, tok = demo
    probs = l09.predict(model, tok, l09.EXAMPLE_SENTENCES)
    fig = l09.plot_predictions(l09.EXAMPLE_SENTENCES, probs)
    widths = [p.get_width() for p in fig.axes[0].patches]
    np.testing.assert_allclose(widths, probs[:, 1].numpy(), rtol=1e-6)
    with pytest.raises(ValueError):
        l09.plot_predictions(l09.EXAMPLE_SENTENCES[:2], probs)


# --- widget ---------------------------------------------------------------------------------------------------

def _image(w):
    return np.asarray(w.figure.axes[1].images[0].get_array())


def _bars(w):
    return [p.get_height() for p in w.figure.axes[0].patches]


def test_widget_example_text_and_head(demo):
    model, tok = demo
    w = l09.build_sentiment_widget(model, tok)
    assert w.state["sentence"] == l09.EXAMPLE_SENTENCES[0] and w.state["head"] == -1
    np.testing.assert_allclose(_bars(w), w.state["probs"], rtol=1e-6)
    first_probs, first_image = w.state["probs"].copy(), _image(w).copy()

    w.controls["example"].value = l09.EXAMPLE_SENTENCES[1]             # another example
    assert w.state["sentence"] == l09.EXAMPLE_SENTENCES[1]
    assert not np.allclose(w.state["probs"], first_probs)
    assert _image(w).shape != first_image.shape or not np.allclose(_image(w), first_image)

    w.controls["text"].value = "the film is zzzqqq ."                  # typed text wins over the example
    assert w.state["tokens"] == ["the", "film", "is", "<unk>", "."] and w.state["unknown"] == 1
    mean_weights = w.state["weights"].copy()
    np.testing.assert_allclose(_image(w), mean_weights, rtol=1e-6)
    torch.testing.assert_close(torch.tensor(w.state["probs"]),
                               l09.predict(model, tok, ["the film is zzzqqq ."])[0])

    w.controls["head"].value = 1                                       # one head instead of the mean
    assert w.state["head"] == 1
    _, weights, _ = l09.sentence_attention(model, tok, "the film is zzzqqq .")
    np.testing.assert_allclose(w.state["weights"], weights[0][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(_image(w), weights[0][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(weights[0][0].mean(0).numpy(), mean_weights, rtol=1e-6)

    w.set(text="   ", head=-1)                                         # blank text: back to the example
    assert w.state["sentence"] == l09.EXAMPLE_SENTENCES[1] and w.error is None
    assert w.renders == 5                                              # one render per change, one for set()


def test_widget_without_model_uses_the_untrained_demo():
    w = l09.build_sentiment_widget()
    assert len(w.controls["head"].options) == 3                        # mean + 2 heads of the demo model
    assert w.state["label"] in ("negative", "positive")
    assert w.figure.axes[0].get_xticklabels()[1].get_text() == "positive"
    with pytest.raises(ValueError, match="both"):
        l09.build_sentiment_widget(model=l09.demo_model()[0])


def test_widget_speaks_chinese():
    i18n.set_language("zh")
    w = l09.build_sentiment_widget()
    assert w.state["label"] in ("负面", "正面")
    assert "第 1 层" in w.figure.axes[1].get_title()
    assert w.controls["text"].description == "你的句子"


def test_render_rejects_bad_input(demo):
    model, tok = demo
    with pytest.raises(ValueError):
        l09.render_sentence(model, tok, "")
    with pytest.raises(ValueError, match="head"):
        l09.render_sentence(model, tok, "a film", head=5)


# --- exercise checks --------------------------------------------------------------------------------------------

def not_started(*args):
    raise NotImplementedError


def crashes(*args):
    raise RuntimeError("boom")


def max_pool_unmasked(h, keep):
    return h.amax(1)


def max_pool_multiplied(h, keep):
    return (h * keep[..., None]).amax(1)


def max_pool_wrong_dim(h, keep):
    return h.masked_fill(~keep[..., None], float("-inf")).amax(2)[:, :4]


def cls_good(ids, cls_id):
    return torch.cat([torch.full((len(ids), 1), cls_id), ids], dim=1)


def cls_at_the_end(ids, cls_id):
    return torch.cat([ids, torch.full((len(ids), 1), cls_id)], dim=1)


def cls_overwrites(ids, cls_id):
    ids[:, 0] = cls_id                                       # in place, no new column
    return ids


def cls_drops_the_last(ids, cls_id):
    return cls_good(ids, cls_id)[:, :-1]


def cls_as_float(ids, cls_id):
    return cls_good(ids, cls_id).float()


def constant_loss_good(train, dev):
    return -sum(math.log(train.count(y) / len(train)) for y in dev) / len(dev)


def constant_loss_peeking(train, dev):                   # π fitted on the evaluation labels
    return constant_loss_good(dev, dev)


def constant_loss_majority(train, dev):                  # "always the majority", one-hot: log 0
    majority = max(set(train), key=train.count)
    return -torch.log(torch.tensor([1.0 if y == majority else 0.0 for y in dev])).mean().item()


def constant_loss_uniform(train, dev):
    return math.log(len(set(train) | set(dev)))


def constant_loss_bits(train, dev):
    return constant_loss_good(train, dev) / math.log(2)


def constant_loss_on_train(train, dev):
    return constant_loss_good(train, train)


@pytest.mark.parametrize("check, good, bads", [
    (l09.check_max_pool, l09_checks._masked_max_pool, [max_pool_unmasked, max_pool_multiplied, max_pool_wrong_dim]),
    (l09.check_prepend_cls, cls_good, [cls_at_the_end, cls_overwrites, cls_drops_the_last]),
    (l09.check_constant_loss, constant_loss_good, [constant_loss_peeking, constant_loss_majority, constant_loss_uniform,
                                                   constant_loss_bits, constant_loss_on_train]),
])
def test_checks_accept_solution_and_reject_mistakes(check, good, bads, capsys):
    assert check(good) is True
    assert "✓" in capsys.readouterr().out
    for bad in bads:
        assert check(bad) is False, bad.__name__
        out = capsys.readouterr().out
        assert "✗" in out and "✓" not in out, (bad.__name__, out)


def test_check_hints(capsys):
    l09.check_max_pool(max_pool_multiplied)
    assert "-inf" in capsys.readouterr().out
    l09.check_prepend_cls(cls_at_the_end)
    assert "goes in front" in capsys.readouterr().out
    l09.check_prepend_cls(cls_overwrites)  # in place: refused before its result is even compared
    assert "changed its input in place" in capsys.readouterr().out
    l09.check_prepend_cls(cls_drops_the_last)
    assert "(3, 7)" in capsys.readouterr().out
    for wrong, says in ((constant_loss_peeking, "evaluation labels"), (constant_loss_majority, "Infinite"),
                        (constant_loss_uniform, "uniform guess"), (constant_loss_bits, "nats"),
                        (constant_loss_on_train, "training labels")):
        l09.check_constant_loss(wrong)
        assert says in capsys.readouterr().out


def test_check_prepend_cls_wants_integer_ids(capsys):
    assert l09.check_prepend_cls(cls_as_float) is False         # nn.Embedding needs integer ids
    assert "torch.int64" in capsys.readouterr().out


@pytest.mark.parametrize("check", [l09.check_max_pool, l09.check_prepend_cls, l09.check_constant_loss,
                                   l09.check_early_stop])
def test_checks_never_raise(check, capsys):
    assert check(not_started) is False
    assert "Not attempted yet" in capsys.readouterr().out
    assert check(crashes) is False
    assert "boom" in capsys.readouterr().out
    assert check(lambda *a: "nonsense") is False


def stop_good(losses, patience):
    return l09_checks._early_stop(losses, patience)


def stop_in_hindsight(losses, patience):
    return len(losses) - 1, min(range(len(losses)), key=losses.__getitem__)


def stop_one_late(losses, patience):
    return l09_checks._early_stop(losses, patience + 1)


def stop_swapped(losses, patience):
    return l09_checks._early_stop(losses, patience)[::-1]


def test_check_early_stop(capsys):
    assert l09.check_early_stop(stop_good) is True
    assert l09.check_early_stop(lambda losses, patience: list(stop_good(losses, patience))) is True
    assert "step 360" in capsys.readouterr().out
    assert l09.check_early_stop(stop_in_hindsight) is False
    assert "best point in hindsight" in capsys.readouterr().out
    for bad in (stop_one_late, stop_swapped):
        assert l09.check_early_stop(bad) is False
        assert "expected (stop, keep)" in capsys.readouterr().out
    assert l09.check_early_stop(lambda losses, patience: 3) is False
    assert "pair of indices" in capsys.readouterr().out


@pytest.mark.parametrize("losses, patience, want", [
    ([0.493, 0.459, 0.451, 0.471, 0.467], 1, (3, 2)),
    ([1.0, 1.0, 1.0], 2, (2, 0)),                                  # a tie is no improvement
    ([5.0], 3, (0, 0)),
])
def test_reference_early_stop(losses, patience, want):
    assert l09_checks._early_stop(losses, patience) == want
    with pytest.raises(ValueError):
        l09_checks._early_stop(losses, 0)


def test_checks_speak_chinese(capsys):
    i18n.set_language("zh")
    assert l09.check_max_pool(not_started) is False
    assert "还没有作答" in capsys.readouterr().out
    l09.check_max_pool(max_pool_multiplied)
    assert "填充" in capsys.readouterr().out


def test_reference_constant_loss():
    assert l09_checks._constant_loss([1, 1, 0, 0], [0, 1]) == pytest.approx(math.log(2))
    assert l09_checks._constant_loss([1] * 56 + [0] * 44, [1] * 51 + [0] * 49) > math.log(2)   # SST-2's shares
    assert l09_checks._constant_loss([0, 1, 1, 1], [1]) == pytest.approx(-math.log(0.75))
    with pytest.raises(ValueError):
        l09_checks._constant_loss([], [1])
