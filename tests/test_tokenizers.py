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
    read_json_file,
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
    with pytest.raises(TypeError, match="max_len must be an int, got float 1.5"):  # not silently cut to 1
        pad_batch([[1, 2]], max_len=1.5)


def test_encode_batch_pads_with_pad_id():
    tok = CharTokenizer.from_text("abc")
    batch = tok.encode_batch(["abc", "a"], add_eos=True)
    assert batch.shape == (2, 4)
    assert batch.tolist() == [[5, 6, 7, EOS_ID], [5, EOS_ID, PAD_ID, PAD_ID]]
    assert [tok.decode(row) for row in batch] == ["abc", "a"]
    with pytest.raises(TypeError, match="list of texts"):
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


# --------------------------------------------------------------------------------------------- one protocol
TOY_WORDPIECE = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "."]


def _three_tokenizers():
    from course_utils.wordpiece import WordPieceTokenizer

    return (CharTokenizer.from_text("the cat sat."), WordTokenizer.from_texts(["the cat sat ."]),
            WordPieceTokenizer(TOY_WORDPIECE))


@pytest.mark.parametrize("tok", _three_tokenizers(), ids=["char", "word", "wordpiece"])
def test_every_tokenizer_follows_one_protocol(tok):
    """Same names, same arguments, same return types for the character, word and WordPiece tokenizers."""
    assert isinstance(tok, Tokenizer)
    assert tok.vocab_size == len(tok) == len(tok.itos) == len(set(tok.stoi.values()))
    assert {tok.pad_id, tok.unk_id, tok.mask_id} <= set(tok.special_ids)
    assert tok.tokens_to_ids(tok.ids_to_tokens([tok.pad_id, tok.mask_id])) == [tok.pad_id, tok.mask_id]
    plain = tok.encode("the cat")
    assert all(isinstance(i, int) for i in plain) and tok.decode(plain) == "the cat"
    cut = tok.encode("the cat sat.", max_len=3)
    assert len(cut) == 3
    ids, keep = tok.encode_batch_with_mask(["the cat sat.", "the"], pad_to=20)
    assert ids.dtype == torch.long and keep.dtype == torch.bool and ids.shape == keep.shape == (2, 20)
    assert torch.equal(ids, tok.encode_batch(["the cat sat.", "the"], pad_to=20))
    assert torch.equal(ids[~keep], torch.full_like(ids[~keep], tok.pad_id))          # padding is pad_id ...
    assert keep.sum(1).tolist() == [len(tok.encode("the cat sat.")), len(tok.encode("the"))]  # ... and only it
    assert tok.decode(ids[1]) == "the" and tok.decode(ids[1], skip_special=False) != "the"
    assert torch.equal(tok.pad_batch([tok.encode("the"), tok.encode("")]), tok.encode_batch(["the", ""]))
    # ids are integers of the vocabulary: floats, strings and out-of-range ids are refused with the reason
    for bad, error in (([1.0], TypeError), (["5"], TypeError), ("55", TypeError), ([True], TypeError),
                       ([tok.vocab_size], ValueError), (torch.tensor([[1, 2]]), ValueError)):
        with pytest.raises(error):
            tok.decode(bad)
    with pytest.raises(ValueError, match="max_len must be an int"):
        tok.encode("the", max_len=0)
    with pytest.raises(ValueError, match="pad_to=1 is shorter"):
        tok.encode_batch(["the cat"], pad_to=1)


@pytest.mark.parametrize("tok", _three_tokenizers(), ids=["char", "word", "wordpiece"])
def test_every_tokenizer_saves_and_loads(tok, tmp_path):
    tok.save(tmp_path / "tok.json")
    again = Tokenizer.load(tmp_path / "tok.json")
    assert type(again) is type(tok) and again.itos == tok.itos
    assert again.encode("the cat sat.") == tok.encode("the cat sat.")


def test_loaders_name_the_file_they_cannot_read(tmp_path):
    from course_utils.wordpiece import WordPieceTokenizer, load_vocab

    truncated = tmp_path / "tok.json"
    truncated.write_text('{"type": "CharTokenizer", "tok', encoding="utf-8")
    with pytest.raises(ValueError, match=r"tok\.json: this tokenizer file is not valid JSON"):
        Tokenizer.load(truncated)
    latin1 = tmp_path / "vocab.txt"
    latin1.write_bytes("[PAD]\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"vocab\.txt: this vocab.txt is not UTF-8"):
        load_vocab(latin1)
    (tmp_path / "tokenizer_config.json").write_bytes(b"\xff\xfe{")
    latin1.write_text("\n".join(TOY_WORDPIECE), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer_config\.json: this tokenizer configuration is not UTF-8"):
        WordPieceTokenizer.from_pretrained(tmp_path)
    not_a_tokenizer = tmp_path / "list.json"
    not_a_tokenizer.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match=r"list\.json: not a tokenizer saved by Tokenizer.save"):
        Tokenizer.load(not_a_tokenizer)
    assert read_json_file(not_a_tokenizer) == [1, 2]
