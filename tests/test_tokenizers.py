"""Tests for course_utils.tokenizers: special ids, encode/decode round trips, errors, batching, saving."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.tokenizers import (
    BOS_ID,
    EOS_ID,
    MASK_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    pad_batch,
)

# printable ASCII, a few accented letters, Chinese characters, whitespace of several kinds
TEXT = st.text(alphabet=st.sampled_from(list(" \n\t!\"'(),-.:;?09AZaz_éüß") + list("我们很好酒店。，")),
               max_size=60)


def test_special_tokens_have_fixed_ids_in_both_tokenizers():
    assert SPECIAL_TOKENS == ("<pad>", "<unk>", "<bos>", "<eos>", "<mask>")
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID) == (0, 1, 2, 3, 4)
    for tok in (CharTokenizer.from_text("abc"), WordTokenizer.from_texts(["a b c"])):
        assert tok.itos[:5] == list(SPECIAL_TOKENS)
        assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
        assert (tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id) == (0, 1, 2, 3, 4)


def test_char_vocabulary_is_sorted_distinct_characters():
    tok = CharTokenizer.from_text("banana!")
    assert tok.itos[5:] == ["!", "a", "b", "n"]
    assert tok.vocab_size == len(tok) == 9
    assert tok.encode("ban") == [7, 6, 8]
    assert tok.encode("ab", add_bos=True, add_eos=True) == [BOS_ID, 6, 7, EOS_ID]


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_char_round_trip(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text, add_bos=True, add_eos=True)
    assert len(ids) == len(text) + 2
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(TEXT, TEXT)
def test_char_unknown_characters_map_to_unk(train, other):
    tok = CharTokenizer.from_text(train)
    ids = tok.encode(other)
    for ch, i in zip(other, ids):
        assert (i == UNK_ID) == (ch not in set(train))
    assert tok.decode(ids) == "".join(ch if ch in set(train) else "<unk>" for ch in other)


def test_decode_skip_special_false_shows_every_token():
    tok = CharTokenizer.from_text("hi")
    ids = [BOS_ID, 5, PAD_ID, MASK_ID, UNK_ID, 6, EOS_ID]
    assert tok.decode(ids) == "h<unk>i"
    assert tok.decode(ids, skip_special=False) == "<bos>h<pad><mask><unk>i<eos>"


@pytest.mark.parametrize("bad", [7, 100, -1])
def test_decode_out_of_range_names_vocabulary_size(bad):
    tok = CharTokenizer.from_text("hi")  # vocab_size 7
    with pytest.raises(ValueError, match=r"vocab_size=7.*\[0, 6\]"):
        tok.decode([5, bad])
    with pytest.raises(ValueError, match="vocab_size=7"):
        tok.decode(torch.tensor([bad]))


def test_decode_accepts_tensors_and_numpy_but_rejects_floats_and_batches():
    tok = CharTokenizer.from_text("hi")
    assert tok.decode(torch.tensor([5, 6])) == tok.decode(np.array([5, 6])) == "hi"
    with pytest.raises(TypeError, match="integers"):
        tok.decode([5.0])
    with pytest.raises(TypeError, match="integers"):
        tok.decode([True])
    with pytest.raises(ValueError, match="1-D"):
        tok.decode(torch.tensor([[5, 6]]))
    with pytest.raises(ValueError, match="vocab_size=7"):
        tok.decode(np.array([9]))


def test_word_tokenize_splits_words_punctuation_and_cjk():
    tok = WordTokenizer.from_texts(["x"])
    assert tok.tokenize("Don't STOP, it's 3.14!") == ["don't", "stop", ",", "it's", "3", ".", "14", "!"]
    assert tok.tokenize("我们很好。Hi") == ["我", "们", "很", "好", "。", "hi"]
    cased = WordTokenizer.from_texts(["x"], lowercase=False)
    assert cased.tokenize("Hello World") == ["Hello", "World"]


def test_word_vocabulary_frequency_order_min_freq_and_max_size():
    texts = ["the cat sat", "the cat ran", "the dog"]
    tok = WordTokenizer.from_texts(texts)
    assert tok.itos[5:] == ["the", "cat", "dog", "ran", "sat"]  # by count, ties alphabetical
    assert WordTokenizer.from_texts(texts, min_freq=2).itos[5:] == ["the", "cat"]
    small = WordTokenizer.from_texts(texts, max_size=6)
    assert small.vocab_size == 6 and small.itos[5] == "the"
    assert small.encode("the cat") == [5, UNK_ID]


def test_word_tokenizer_argument_errors():
    with pytest.raises(TypeError, match="list of strings"):
        WordTokenizer.from_texts("a single string")
    with pytest.raises(ValueError, match="max_size"):
        WordTokenizer.from_texts(["a"], max_size=4)
    with pytest.raises(ValueError, match="min_freq"):
        WordTokenizer.from_texts(["a"], min_freq=0)
    with pytest.raises(TypeError, match="str"):
        CharTokenizer.from_text(["a", "b"])
    with pytest.raises(TypeError, match="encode_batch"):
        CharTokenizer.from_text("a").encode(["a"])


@settings(max_examples=150, deadline=None)
@given(TEXT, st.booleans())
def test_word_round_trip_preserves_tokens(text, lowercase):
    tok = WordTokenizer.from_texts([text], lowercase=lowercase)
    ids = tok.encode(text, add_bos=True, add_eos=True)
    assert UNK_ID not in ids
    decoded = tok.decode(ids)
    assert tok.tokenize(decoded) == tok.tokenize(text)
    assert tok.encode(decoded) == ids[1:-1]


def test_word_decode_spacing():
    tok = WordTokenizer.from_texts(["hello , world ! 我们 好"])
    assert tok.decode(tok.encode("Hello,   world!")) == "hello , world !"
    assert tok.decode(tok.encode("我们好")) == "我们好"


def test_pad_batch_shapes_values_and_truncation():
    out = pad_batch([[5, 6, 7], [8], []])
    assert out.dtype == torch.long and out.shape == (3, 3)
    assert out.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert pad_batch([torch.tensor([1, 2]), [3]], pad_id=9).tolist() == [[1, 2], [3, 9]]
    assert pad_batch([[1, 2, 3], [4]], max_len=2).tolist() == [[1, 2], [4, 0]]
    assert pad_batch([[1]], max_len=4).tolist() == [[1, 0, 0, 0]]
    assert pad_batch([]).shape == (0, 0)
    with pytest.raises(ValueError, match="max_len"):
        pad_batch([[1]], max_len=-1)


def test_encode_batch_pads_with_pad_id():
    tok = CharTokenizer.from_text("abc")
    batch = tok.encode_batch(["abc", "a"], add_eos=True)
    assert batch.shape == (2, 4)
    assert batch.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID]]
    assert [tok.decode(row) for row in batch] == ["abc", "a"]
    with pytest.raises(TypeError, match="list of strings"):
        tok.encode_batch("abc")


def test_save_and_load_round_trip(tmp_path):
    cased = WordTokenizer.from_texts(["Hi there"], lowercase=False)
    for tok in (CharTokenizer.from_text("héllo 世界"), cased):
        tok.save(tmp_path / "tok.json")
        again = Tokenizer.load(tmp_path / "tok.json")
        assert type(again) is type(tok) and again.itos == tok.itos
        assert again.encode("Hi héllo 世界") == tok.encode("Hi héllo 世界")
    assert Tokenizer.load(tmp_path / "tok.json").lowercase is False
    with pytest.raises(ValueError, match="unknown tokenizer type"):
        Tokenizer.from_dict({"type": "Bpe", "tokens": []})
