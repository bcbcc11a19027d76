"""Bad input gets a clear ValueError / TypeError that names the fix."""

import pytest
import torch

from course_utils import (
    GPT,
    EncoderClassifier,
    KVCache,
    LearnedPositionalEmbedding,
    MaskedLM,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    Transformer,
    attention_with_weights,
)
from course_utils.decoding import greedy_decode
from course_utils.masks import causal_mask, combine_masks


def test_d_model_not_divisible_by_heads():
    with pytest.raises(
        ValueError, match=r"d_model=100 is not divisible by n_heads=8.*multiple of n_heads.*96"
    ):
        MultiHeadAttention(100, 8)


def test_mismatched_qkv_sizes():
    q, k = torch.randn(2, 5, 8), torch.randn(2, 6, 4)
    with pytest.raises(ValueError, match="same feature size d_k"):
        attention_with_weights(q, k, k)
    with pytest.raises(ValueError, match="same number of positions T_k"):
        attention_with_weights(q, torch.randn(2, 6, 8), torch.randn(2, 7, 8))
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="last dimension 4 .* d_model=8"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 4))
    with pytest.raises(ValueError, match="different batch sizes"):
        mha(torch.randn(2, 5, 8), torch.randn(3, 6, 8))
    with pytest.raises(ValueError, match="key and value must have the same length"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.randn(2, 4, 8))


def test_mask_that_cannot_broadcast():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"does not broadcast .*\(B, 1, 1, T_k\)"):
        mha(torch.randn(2, 5, 8), mask=torch.ones(2, 1, 1, 6, dtype=torch.bool))


def test_mask_with_wrong_dtype():
    with pytest.raises(TypeError, match="bool mask .* mask.bool()"):
        MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), mask=torch.ones(5, 5, dtype=torch.long))
    with pytest.raises(TypeError, match="bool masks"):
        combine_masks(causal_mask(3), torch.zeros(3, 3))


def test_sequence_longer_than_positional_table():
    with pytest.raises(ValueError, match=r"longer than the model's context \(max_len=10\).*max_len >= 12"):
        SinusoidalPositionalEncoding(8, max_len=10)(torch.randn(1, 12, 8))
    with pytest.raises(ValueError, match="context"):
        LearnedPositionalEmbedding(max_len=10, d_model=8)(torch.randn(1, 11, 8))
    with pytest.raises(ValueError, match=r"length 9 \(starting at position 0\) .*\(max_len=8\)"):
        GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(1, 9, dtype=torch.long))
    model = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    cache = KVCache()
    model(torch.zeros(1, 8, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"starting at position 8\) is longer than the model's context \(max_len=8"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope"])
def test_every_model_refuses_an_over_long_input_the_same_way(positions):
    """Issue 34: the positions module owns the max_len check, with or without a table (rope has none)."""
    from course_utils import EncoderClassifier, MaskedLM, Transformer

    shape = dict(d_model=8, n_heads=2, d_ff=16, max_len=8, positions=positions)
    ids = torch.ones(2, 9, dtype=torch.long)
    calls = {"GPT": lambda: GPT(10, n_layers=1, **shape)(ids),
             "EncoderClassifier": lambda: EncoderClassifier(10, 2, n_layers=1, **shape)(ids),
             "MaskedLM": lambda: MaskedLM(10, n_layers=1, **shape)(ids),
             "Transformer source": lambda: Transformer(10, 10, n_encoder_layers=1, n_decoder_layers=1, **shape)(
                 ids, ids[:, :3]),
             "Transformer target": lambda: Transformer(10, 10, n_encoder_layers=1, n_decoder_layers=1, **shape)(
                 ids[:, :3], ids)}
    for call in calls.values():
        with pytest.raises(ValueError, match=r"^sequence of length 9 \(starting at position 0\) is longer than the "
                                             r"model's context \(max_len=8\): crop .* max_len >= 9$"):
            call()

def test_token_ids_outside_vocabulary():
    emb = TokenEmbedding(10, 4)
    with pytest.raises(ValueError, match=r"contain 10, outside the vocabulary \[0, 10\).*vocab_size > 10"):
        emb(torch.tensor([[1, 2, 10]]))
    with pytest.raises(ValueError, match="-1, a negative id.*pad id"):
        emb(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
        model(torch.tensor([[1, 2]]), torch.tensor([[1, 12]]))


def test_wrong_rank_input():
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(B, T, d_model\).*unsqueeze\(0\)"):
        mha(torch.randn(5, 8))
    with pytest.raises(ValueError, match=r"\(B, T\) token ids"):
        GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="floating-point"):
        mha(torch.zeros(2, 5, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="torch.Tensor"):
        mha([[0.0] * 8])


def test_impossible_hyper_parameters():
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(8, 2, dropout=1.5)
    with pytest.raises(ValueError, match="positive integers"):
        MultiHeadAttention(8, 0)
    with pytest.raises(ValueError, match="activation"):
        Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, activation="tanh")


def test_inputs_on_another_device_than_the_module():
    """A CPU model fed a tensor from another device (here 'meta', standing in for CUDA) says how to move it."""
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query is on meta but MultiHeadAttention is on cpu.*\.to\("):
        mha(torch.randn(2, 5, 8, device="meta"))
    with pytest.raises(ValueError, match="ids is on meta but the embedding is on cpu"):
        TokenEmbedding(10, 4)(torch.zeros(1, 3, dtype=torch.long, device="meta"))
    q = torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match="k is on meta but q is on cpu"):
        attention_with_weights(q, torch.randn(1, 3, 4, device="meta"), q)
    with pytest.raises(ValueError, match="mask is on meta"):
        attention_with_weights(q, q, q, torch.ones(3, 3, dtype=torch.bool, device="meta"))


def test_decoding_hyper_parameters():
    from course_utils.decoding import beam_search, generate
    from course_utils.sampling import sample_next

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sample_next(torch.zeros(1, 10), temperature=-1.0)
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        sample_next(torch.zeros(1, 10), top_k=-1)
    # greedy (temperature 0) ignores top_k / top_p, but a bad value is still refused, never passed over
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        sample_next(torch.zeros(1, 10), temperature=0, top_k=-1)
    with pytest.raises(ValueError, match="top_p must be in"):
        sample_next(torch.zeros(1, 10), temperature=0, top_p=2.0)
    with pytest.raises(ValueError, match="at least one context token"):
        generate(gpt, torch.zeros(1, 0, dtype=torch.long), 3)
    seq2seq = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_len=12)
    src = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="beam_size must be >= 1"):
        beam_search(seq2seq, src, beam_size=0, max_new_tokens=5, bos_id=1, eos_id=2)
    # reliability.md item 17: B = 0 and a max_new_tokens beyond the positional table fail up front, with the fix
    with pytest.raises(ValueError, match="empty batch"):
        beam_search(seq2seq, src[:0], bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="empty batch"):
        greedy_decode(seq2seq, src[:0], 5, 1, 2)
    with pytest.raises(ValueError, match=r"max_new_tokens=20 .* positional table of 12.*max_new_tokens <= 12"):
        greedy_decode(seq2seq, src, 20, 1, 2)
    with pytest.raises(ValueError, match=r"max_new_tokens <= 12"):
        beam_search(seq2seq, src, max_new_tokens=13, bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="eos_id=10 is outside the target vocabulary"):
        greedy_decode(seq2seq, src, 5, 1, 10)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(temperature=float("nan")), ValueError, "temperature must be a finite number"),
        (dict(temperature="hot"), TypeError, "temperature must be a number"),
        (dict(top_k=2.5), TypeError, "top_k must be an int"),
        (dict(top_k="3"), TypeError, "top_k must be an int"),
        (dict(top_p=0.0), ValueError, "top_p must be in"),
        (dict(top_p=float("nan")), ValueError, "top_p must be a finite"),
        (dict(use_cache="yes"), TypeError, "use_cache must be True or False"),
    ],
)
def test_generation_arguments_get_clear_errors(kwargs, error, fragment):
    """reliability.md Low: NaN temperature, float top_k / beam_size / max_new_tokens and strings."""
    from course_utils.decoding import generate

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(error, match=fragment):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), 3, **kwargs)


def test_count_arguments_must_be_ints():
    from course_utils.decoding import beam_search, generate

    gpt = GPT(10, max_len=8, n_layers=1, n_heads=1, d_model=8)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), 3.0)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        generate(gpt, torch.zeros(1, 2, dtype=torch.long), "3")
    seq2seq = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
    with pytest.raises(TypeError, match="beam_size must be an int"):
        beam_search(seq2seq, torch.ones(1, 3, dtype=torch.long), beam_size=2.0, bos_id=1, eos_id=2)
    with pytest.raises(TypeError, match="src must hold integer token ids"):
        beam_search(seq2seq, torch.ones(1, 3), bos_id=1, eos_id=2)
    with pytest.raises(TypeError, match="max_new_tokens must be an int"):
        greedy_decode(seq2seq, torch.ones(1, 3, dtype=torch.long), 4.0, 1, 2)


@pytest.mark.parametrize(
    "build, error, fragment",
    [
        (lambda: Transformer(10, 10, n_encoder_layers=-1), ValueError, "n_layers must be >= 1"),
        (lambda: GPT(10, n_layers=0), ValueError, "n_layers must be >= 1"),
        (lambda: EncoderClassifier(10, 0), ValueError, "n_classes must be >= 1"),
        (lambda: EncoderClassifier(10, 1), ValueError, "n_classes must be >= 2"),
        (lambda: GPT(10, d_ff=0), ValueError, "d_ff must be >= 1"),
        (lambda: GPT(10, n_layers=2.0), TypeError, "n_layers must be an int"),
        (lambda: GPT(10, dropout="0.1"), TypeError, "dropout must be a float"),
        (lambda: GPT(10, max_len=0), ValueError, "max_len must be >= 1"),
        (lambda: GPT(10, norm_first="False"), TypeError, "norm_first must be True or False"),
        (lambda: GPT(10, eps=0.0), ValueError, "eps must be > 0"),
        (lambda: GPT(10, dropuot=0.1), TypeError, r"unknown keyword\(s\) \['dropuot'\]"),
        (lambda: MaskedLM(10, pad_id=10), ValueError, "pad_id=10 is outside the vocabulary"),
        (lambda: Transformer(10, 10, norm="batch"), ValueError, "norm must be 'layer' or 'rms'"),
        (lambda: GPT(10, 8), TypeError, "positional argument"),
        (lambda: MultiHeadAttention(8, 2, 0.1), TypeError, "positional argument"),
        (lambda: MultiHeadAttention(8.0, 2), TypeError, "d_model must be a positive int"),
    ],
)
def test_invalid_configs_are_refused(build, error, fragment):
    """reliability.md Low: negative layer counts, n_classes=0, d_ff=0 (was silently 4·d) ... and keyword-only args."""
    with pytest.raises(error, match=fragment):
        build()


# ------------------------------------------------------------------------------ issue 24: nothing silent, part 2
def _tiny_checkpoint(tmp_path, **payload):
    from course_utils import checkpoint
    model = torch.nn.Linear(2, 2)
    path = tmp_path / "c.pt"
    if payload:
        torch.save({"format": checkpoint.FORMAT, "step": 0, "model": model.state_dict(), **payload}, path)
    else:
        checkpoint.save_checkpoint(path, model)
    return path, model


@pytest.mark.parametrize("location", ["cuda", "cuda:1", "meta"])
def test_a_device_this_machine_lacks_is_not_called_a_corrupt_file(tmp_path, location):
    from course_utils.checkpoint import load_checkpoint
    if location.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    path, model = _tiny_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="not available here.*map_location=None") as err:
        load_checkpoint(path, model, map_location=location)
    assert "corrupt" not in str(err.value) and "delete" not in str(err.value)
    assert load_checkpoint(path, model, map_location="cpu")["step"] == 0


def test_restore_rng_on_a_file_without_rng_state(tmp_path):
    from course_utils.checkpoint import CheckpointError, load_checkpoint
    path, model = _tiny_checkpoint(tmp_path, optimizer=None, scheduler=None, history=None, extra={})
    with pytest.raises(CheckpointError, match="no RNG state.*restore_rng=False"):
        load_checkpoint(path, model, restore_rng=True)
    assert load_checkpoint(path, model)["step"] == 0


@pytest.mark.parametrize("kwargs, fragment", [
    ({"optimizer": torch.nn.Linear(2, 2)}, "optimizer must be a torch.optim.Optimizer, got Linear"),
    ({"scheduler": torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)}, "scheduler must be"),
    ({"model": 123}, "model must be a torch.nn.Module, got int"),
])
def test_save_checkpoint_refuses_the_wrong_objects(tmp_path, kwargs, fragment):
    from course_utils.checkpoint import save_checkpoint
    model = kwargs.pop("model", torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match=fragment):
        save_checkpoint(tmp_path / "c.pt", model, **kwargs)
    assert not (tmp_path / "c.pt").exists()


def test_wordpiece_config_flags_must_be_json_booleans(tmp_path):
    from course_utils.wordpiece import WordPieceTokenizer
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    config = tmp_path / "tokenizer_config.json"
    for bad in ('{"do_lower_case": "false"}', '{"tokenize_chinese_chars": 0}', '{"strip_accents": "no"}'):
        config.write_text(bad)
        with pytest.raises(ValueError, match="must be JSON true or false"):
            WordPieceTokenizer.from_pretrained(tmp_path)
    config.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        WordPieceTokenizer.from_pretrained(tmp_path)
    config.write_text('{"do_lower_case": false, "strip_accents": null}')
    assert WordPieceTokenizer.from_pretrained(tmp_path).lowercase is False


def test_tokenizers_refuse_what_they_would_coerce():
    from course_utils.tokenizers import Tokenizer, WordTokenizer
    with pytest.raises(TypeError, match="tokens must be str, got int"):
        Tokenizer([1, 2])
    with pytest.raises(TypeError, match="list of token strings"):
        Tokenizer(None)
    with pytest.raises(TypeError, match="lowercase must be True or False"):
        WordTokenizer(["a"], lowercase="false")
    with pytest.raises(TypeError, match="list of strings, got a int"):
        WordTokenizer.from_texts(["ok", 3])
    tok = WordTokenizer.from_texts(["a b"])
    with pytest.raises(TypeError, match="list or 1-D tensor"):
        tok.decode(None)
    assert tok.decode(tok.encode("a b")) == "a b"


@pytest.mark.parametrize("d", [0, 1, -4])
def test_the_layernorm_widget_needs_two_features(d):
    from course_lab.lessons import l06_ffn_norm
    with pytest.raises(ValueError, match="d must be >= 2"):
        l06_ffn_norm.build_layernorm_widget(d=d)


def test_feed_forward_names_the_wrong_input():
    from course_utils.layers import PositionwiseFeedForward
    ffn = PositionwiseFeedForward(8, 16)
    with pytest.raises(ValueError, match="last dimension 7.*d_model=8"):
        ffn(torch.randn(2, 3, 7))
    with pytest.raises(TypeError, match="floating-point"):
        ffn(torch.ones(2, 3, 8, dtype=torch.long))


def test_corpus_bleu_without_sentences_or_with_a_string():
    pytest.importorskip("sacrebleu")
    from course_utils.data.translation import corpus_bleu
    with pytest.raises(ValueError, match="no sentences"):
        corpus_bleu([], [])
    with pytest.raises(TypeError, match="hypotheses must be a list.*not a str"):
        corpus_bleu("我们走吧。", [["我们走吧。"]])
    assert corpus_bleu(["我们走吧。"], [["我们走吧。"]]).score == pytest.approx(100)


def test_decoders_refuse_the_other_kind_of_model():
    from course_utils.decoding import beam_search, generate
    gpt = GPT(10, max_len=8, n_layers=1, n_heads=2, d_model=8)
    s2s = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16)
    ids = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="use greedy_decode or beam_search"):
        generate(s2s, ids, 2)
    with pytest.raises(TypeError, match="continue a GPT with generate"):
        greedy_decode(gpt, ids, 4, 1, 2)
    with pytest.raises(TypeError, match="continue a GPT with generate"):
        beam_search(gpt, ids, max_new_tokens=4, bos_id=1, eos_id=2)
    assert generate(gpt, ids, 2).shape == (1, 5)


def test_kv_cache_reorder_checks_its_index():
    cache = KVCache()
    gpt = GPT(10, max_len=8, n_layers=1, n_heads=2, d_model=8)
    gpt(torch.ones(2, 3, dtype=torch.long), cache=cache)
    with pytest.raises(TypeError, match="1-D torch.long"):
        cache.reorder([0, 1])
    with pytest.raises(ValueError, match=r"outside the cached batch \[0, 2\)"):
        cache.reorder(torch.tensor([2]))
    cache.reorder(torch.tensor([1, 1, 0]))
    assert cache.batch_size == 3


def test_seq2seq_decode_into_a_used_cache_needs_extend():
    model = Transformer(10, 10, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16).eval()
    memory, src_mask = model.encode(torch.ones(2, 4, dtype=torch.long))
    cache = KVCache()
    model.decode(torch.ones(2, 2, dtype=torch.long), memory, src_mask, cache)
    with pytest.raises(ValueError, match="fresh KVCache.*extend=True"):
        model.decode(torch.ones(2, 2, dtype=torch.long), memory, src_mask, cache)
    assert model.decode(torch.ones(2, 2, dtype=torch.long), memory, src_mask, cache, extend=True).shape == (2, 2, 10)


def test_translate_caps_the_output_at_the_models_length():
    from course_utils.decoding import translate
    from course_utils.tokenizers import WordTokenizer
    texts = ["go away " * 10, "hi"]
    src, tgt = WordTokenizer.from_texts(texts), WordTokenizer.from_texts(["走 开"])
    model = Transformer(src.vocab_size, tgt.vocab_size, d_model=8, n_heads=2, n_encoder_layers=1,
                        n_decoder_layers=1, d_ff=16, max_len=40)
    assert 2 * len(src.encode(texts[0])) + 10 > model.max_len  # the old cap asked for more than the table holds
    for method in ("greedy", "beam"):
        out = translate(model, texts, src, tgt, method=method, beam_size=2)
        assert len(out) == 2 and all(isinstance(s, str) for s in out)


@pytest.mark.parametrize("keep", [0.5, 0.9, 1.0])
def test_a_changed_tatoeba_file_warns_with_both_row_counts(tmp_path, monkeypatch, keep):
    """reliability.md (turn 3) row 4: a cmn.txt cut at a line boundary loaded 19,756 of 32,028 pairs silently."""
    import hashlib
    import warnings

    from course_utils.data import translation
    from course_utils.data.registry import Resource
    lines = [f"Sentence {i}.\t第{i}句。\n" for i in range(40)]
    course = "".join(lines).encode("utf-8")
    monkeypatch.setattr(translation, "get_resource", lambda name: Resource(
        "tatoeba-cmn", "tatoeba_cmn/cmn.txt", len(course), hashlib.sha256(course).hexdigest(), "t", "s", rows=40))
    (tmp_path / "tatoeba_cmn").mkdir()
    kept = lines[: int(len(lines) * keep)]
    (tmp_path / "tatoeba_cmn" / "cmn.txt").write_text("".join(kept), encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = translation.load_tatoeba_cmn(tmp_path, simplified=False, download=False)
    messages = [str(w.message) for w in caught if "course's copy" in str(w.message)]
    assert len(pairs) == len(kept)
    if keep == 1.0:
        assert messages == []
    else:
        assert len(messages) == 1 and f"{len(kept):,} pairs instead of 40" in messages[0]
