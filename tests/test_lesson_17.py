"""Lesson 17 (fine-tuning, LoRA): the counts the widget shows agree with a real model, the merge widget's rounding,
the figures read from files, evaluation, and every exercise check on other right answers.

Everything runs on a tiny random BERT (fast, no download); the course models are tested in
tests/test_course_models.py.
"""

from __future__ import annotations

import json

import exercise_answers_17 as answers
import pytest
import torch

from course_lab.lessons import l17_fine_tuning as l17
from course_utils.lora import apply_lora, count_parameters
from course_utils.pretrained import BertConfig, SentenceClassifier, SentenceEncoder
from course_utils.wordpiece import WordPieceTokenizer

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "movie", "not", "very", "."]


def tiny(d=16, d_ff=32, layers=2):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=d, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=d_ff, max_position_embeddings=32)
    return SentenceClassifier(SentenceEncoder(config, WordPieceTokenizer(VOCAB), normalize=False)).eval()


@pytest.mark.parametrize("targets, names", [("q, k, v, o", {"qkv_proj": 3, "out_proj": 1}),
                                            ("q, k, v, o + FFN", {"qkv_proj": 3, "out_proj": 1, "linear1": 1,
                                                                  "linear2": 1})])
def test_the_widget_counts_are_a_real_models(targets, names):
    model = tiny()
    total = sum(p.numel() for p in model.encoder.parameters())
    apply_lora(model.encoder, names, r=4, alpha=8)
    trainable, _ = count_parameters(model)
    c = l17.lora_counts(4, targets, d_model=16, d_ff=32, n_layers=2, total=total)
    assert c["lora"] == trainable and c["full"] == total + 34 and c["adapter_bytes_fp16"] == 2 * trainable


def test_the_widget_counts_for_minilm_and_q_v_only():
    c = l17.lora_counts(8, "q, k, v, o")
    assert c["lora"] == 148_226 and c["full"] == 22_713_986
    assert l17.lora_counts(8, "q, v")["lora"] == 6 * 2 * 8 * 768 + 770
    assert l17.lora_counts(192, "q, k, v, o")["lora"] - 770 == 6 * 4 * 384 * 384     # r = d/2: no saving left
    with pytest.raises(ValueError, match="between 1 and 384"):
        l17.lora_counts(385, "q, k, v, o")
    with pytest.raises(ValueError, match="targets must be one of"):
        l17.lora_counts(8, "everything")


def test_the_widgets_render_and_report():
    w = l17.build_rank_widget()
    assert w.state["lora"] == 148_226 and w.renders == 1
    assert w.set(r=1, targets="q, v")["lora"] == 6 * 2 * 768 + 770
    m = l17.build_merge_widget()
    assert m.state["relative_gap"] < 1e-3 and m.state["erased"] < 0.05
    bf16 = m.set(log_size=-4.0, dtype="bfloat16")
    assert bf16["erased"] > 0.9 and bf16["relative_gap"] > 0.5                     # the update is rounded away
    assert m.set(log_size=-1.0, dtype="float32")["relative_gap"] < 1e-4
    with pytest.raises(ValueError, match="between 1e-6 and 1"):
        l17.merge_gap(2.0, "float32")


def test_predict_batches_by_length_and_keeps_the_order():
    model = tiny()
    texts = ["a very very very good movie .", "bad", "not a good movie", "good ."]
    tok = model.encoder.tokenizer
    got = l17.predict(model, tok, texts, batch_size=2)
    ids, keep = tok.encode_batch_with_mask(texts)
    with torch.no_grad():
        want = model(ids, keep).argmax(-1)
    assert torch.equal(got, want) and not model.training


def test_figures_come_from_the_files(tmp_path):
    m = {"metrics": {"dev_accuracy": 0.9, "test_accuracy": 0.91}}
    (tmp_path / "minilm_sst2_lora.json").write_text(json.dumps(m))
    (tmp_path / "sst2_classifier.json").write_text(json.dumps({"metrics": {"dev_accuracy": 0.8, "steps": 7}}))
    assert l17.course_model_figures(tmp_path) == {"minilm_sst2_lora": m}
    l09 = l17.lesson09_figures(tmp_path)
    cpu = json.loads((l17.RESULTS_DIR / "sst2_from_scratch.json").read_text())
    assert l09 == {"course_dev": 0.8, "course_steps": 7, "cpu_dev": cpu["dev_accuracy"], "majority": cpu["baseline"]}


def test_the_comparison_plot():
    fig = l17.plot_comparison([("probe", 0.8, 0.75, 0.85), ("LoRA", 0.85, 0.8, 0.9)])
    assert len(fig.axes[0].patches) == 2


@pytest.mark.parametrize("check, right", [(c, r) for c, rs in answers.ALSO_RIGHT.items() for r in rs])
def test_the_checks_accept_other_right_answers(check, right, capsys):
    assert getattr(l17, check)(right) is True, capsys.readouterr().out


def test_the_checks_accept_the_answers_and_refuse_the_mistakes(capsys):
    for a in answers.L17:
        check = getattr(l17, a.check)
        assert check(a.correct) is True, (a.check, capsys.readouterr().out)
        assert check(a.wrong) is False and check(a.shortcut) is False
        assert a.says in capsys.readouterr().out
        for wrong, says in a.also:
            assert check(wrong) is False and says in capsys.readouterr().out


def test_the_prediction_check_explains_the_first_step(capsys):
    assert l17.check_which_change(lambda steps: set() if steps == 0 else {"A", "B"}) is False
    assert "A has not moved" in capsys.readouterr().out
    assert l17.check_which_change(lambda steps: set() if steps == 0 else {"B"}) is False
    assert "no longer zero" in capsys.readouterr().out
