"""Every public inference path under the three ways people run a model for inference: ``torch.inference_mode()``
(the standard one; its tensors keep no version counter), ``torch.no_grad()`` and bf16 autocast (issue 39, section
2). Under the first two the results equal a plain call's; under autocast they are finite and of the same shape.
The course models (course_models/) and the lesson widgets that call a model run here too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from course_utils.decoding import beam_search, generate, greedy_decode, stream_tokens, translate
from course_utils.kv_cache import KVCache
from course_utils.models import GPT, Transformer

ROOT = Path(__file__).resolve().parents[1] / "course_models"
MODES = {
    "inference_mode": torch.inference_mode,
    "no_grad": torch.no_grad,
    "bf16_autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
}
EXACT = ("inference_mode", "no_grad")      # the same numbers as a plain call; autocast rounds differently


def _same(mode, got, want):
    if isinstance(want, torch.Tensor):
        assert got.shape == want.shape
        if mode in EXACT:
            assert torch.equal(got, want)
        elif got.is_floating_point():
            assert torch.isfinite(got).all()
    elif mode in EXACT:
        assert got == want
    else:
        assert type(got) is type(want) and (not isinstance(want, list) or len(got) == len(want))


@pytest.fixture(scope="module")
def seq2seq():
    torch.manual_seed(0)
    return Transformer(20, 22, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=2, d_ff=32, dropout=0.0,
                       max_len=32).eval()


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return GPT(30, max_len=16, n_layers=2, n_heads=2, d_model=16).eval()


@pytest.mark.parametrize("mode", MODES)
def test_seq2seq_decoding(seq2seq, mode):
    src = torch.randint(5, 20, (3, 7), generator=torch.Generator().manual_seed(1))
    calls = {
        "greedy": lambda: greedy_decode(seq2seq, src, 6, 1, 2),
        "greedy_no_cache": lambda: greedy_decode(seq2seq, src, 6, 1, 2, use_cache=False),
        "beam": lambda: beam_search(seq2seq, src, beam_size=3, max_new_tokens=6, bos_id=1, eos_id=2),
        "encode": lambda: seq2seq.encode(src)[0],
    }
    for call in calls.values():
        want = call()
        with MODES[mode]():
            got = call()
        _same(mode, got, want)


@pytest.mark.parametrize("mode", MODES)
def test_cross_attention_cache_of_an_inference_memory(seq2seq, mode):
    """The cache keys cross-attention on the memory's version counter, which inference tensors do not have."""
    src = torch.randint(5, 20, (2, 5))
    with MODES[mode]():
        memory, src_mask = seq2seq.encode(src)
        cache = KVCache()
        ys = torch.ones(2, 1, dtype=torch.long)
        for _ in range(3):
            logits = seq2seq.decode(ys[:, -1:], memory, src_mask, cache)[:, -1]
            ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
        other = seq2seq.encode(torch.randint(5, 20, (2, 5)))[0]
        with pytest.raises(ValueError, match="another encoder memory"):
            seq2seq.decode(ys[:, -1:], other, src_mask, cache)


@pytest.mark.parametrize("mode", MODES)
def test_gpt_generation(gpt, mode):
    ids = torch.randint(0, 30, (2, 5), generator=torch.Generator().manual_seed(2))
    calls = {
        "generate": lambda: generate(gpt, ids, 20, temperature=0.0),     # past the window: the cache restarts
        "generate_no_cache": lambda: generate(gpt, ids, 4, temperature=0.0, use_cache=False),
        "sampled": lambda: generate(gpt, ids, 6, generator=torch.Generator().manual_seed(0)),
        "stream": lambda: torch.cat(list(stream_tokens(gpt, ids, 5, top_k=3, generator=torch.Generator()
                                                      .manual_seed(0))), dim=1),
        "forward": lambda: gpt(ids),
    }
    for call in calls.values():
        want = call()
        with MODES[mode]():
            got = call()
        _same(mode, got, want)


# --- the course models (course_models/) and the lessons' model calls

def _course(name):
    from course_utils.pretrained.course_models import load_course_model

    if not (ROOT / f"{name}.json").is_file():
        pytest.skip(f"course_models/{name}.json is not here")
    return load_course_model(name, ROOT)


@pytest.mark.parametrize("mode", MODES)
def test_course_translator(mode):
    model, toks, _ = _course("translator_en_zh")
    src_tok, tgt_tok = toks["source"], toks["target"]
    texts = ["I'm busy.", "Thank you very much.", "Where is the station?"]
    want = {m: translate(model, texts, src_tok, tgt_tok, method=m, beam_size=2) for m in ("greedy", "beam")}
    with MODES[mode]():
        for method in ("greedy", "beam"):
            _same(mode, translate(model, texts, src_tok, tgt_tok, method=method, beam_size=2), want[method])
    assert all(want["greedy"])                                     # Chinese text, not empty strings


@pytest.mark.parametrize("mode", MODES)
def test_the_lesson_10_widget_and_attention_maps(seq2seq, mode):
    pytest.importorskip("num2words")
    from course_lab.lessons import l10_seq2seq as l10

    src_tok, tgt_tok = l10.make_tokenizers()
    torch.manual_seed(0)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                        n_decoder_layers=2, d_ff=32, dropout=0.0, max_len=32).eval()
    with MODES[mode]():
        attn = l10.cross_attention_maps(model, 312, src_tok, tgt_tok)
        assert torch.isfinite(torch.as_tensor(attn["weights"]).float()).all()
        w = l10.build_translation_widget(model, src_tok, tgt_tok, number=312, beam_size=2, max_len=8)
        try:
            assert w.error is None and w.renders >= 1
            w.set(number=20305, text="", layer=-1, head=-1)
            assert w.error is None and w.state["greedy"] is not None
        finally:
            w.close()


@pytest.mark.parametrize("mode", MODES)
def test_course_gpt_and_the_lesson_11_widget(mode):
    from course_lab.lessons import l11_gpt as l11

    model, toks, _ = _course("gpt_shakespeare")
    tok = next(iter(toks.values()))
    ids = l11.encode_prompt(tok, "ROMEO:\n")
    want = generate(model, ids, 12, temperature=0.0)
    with MODES[mode]():
        _same(mode, generate(model, ids, 12, temperature=0.0), want)
        probs = l11.next_token_probs(model, tok, "ROMEO:\n")
        probs = probs[0] if isinstance(probs, tuple) else probs
        assert torch.isfinite(probs).all()
        w = l11.build_sampling_widget(model, tok, n_new=20)
        try:
            assert w.error is None and w.renders >= 1
            w.set(temperature=0.5, top_k=5)
            assert w.error is None
        finally:
            w.close()


@pytest.mark.parametrize("mode", MODES)
def test_course_mlm_and_the_lesson_12_widget(mode):
    from course_lab.lessons import l12_masked_lm as l12

    model, toks, _ = _course("mlm_shakespeare")
    tok = next(iter(toks.values()))
    tokens = l12.tokens_of(tok, "to be or not to be")
    want = l12.fill_mask(model, tok, tokens, 2, k=3)
    with MODES[mode]():
        got = l12.fill_mask(model, tok, tokens, 2, k=3)
        if mode in EXACT:
            assert got == want
        else:
            assert len(got[0]) == 3
        w = l12.build_fill_mask_widget(model, tok, ["to be or not to be", "the king is dead"])
        try:
            assert w.error is None and w.renders >= 1
        finally:
            w.close()


@pytest.mark.parametrize("mode", MODES)
def test_course_classifier_and_the_lesson_09_widget(mode):
    from course_lab.lessons import l09_classifier as l09

    model, toks, _ = _course("sst2_classifier")
    tok = next(iter(toks.values()))
    sentences = ["a wonderful , moving film", "a dull and lifeless mess"]
    want = l09.predict(model, tok, sentences)
    ids = tok.pad_batch([tok.encode(s) for s in sentences])
    with MODES[mode]():
        _same(mode, l09.predict(model, tok, sentences), want)
        scores = l09.evaluate(model, ids, torch.tensor([1, 0]))
        assert 0.0 <= scores["val_acc"] <= 1.0
        tokens, weights, probs = l09.sentence_attention(model, tok, sentences[0])
        assert all(torch.isfinite(w).all() for w in weights)
        w = l09.build_sentiment_widget(model, tok)
        try:
            assert w.error is None and w.renders >= 1
        finally:
            w.close()
    if mode in EXACT:
        assert want[0].argmax() == 1 and want[1].argmax() == 0        # the course model gets these two right


def test_the_modes_leave_no_state_behind(seq2seq):
    """After an inference_mode call, ordinary calls (and training) still work: nothing cached an inference tensor."""
    src = torch.randint(5, 20, (2, 5))
    with torch.inference_mode():
        greedy_decode(seq2seq, src, 4, 1, 2)
    seq2seq.train()
    seq2seq(src, torch.randint(5, 20, (2, 4))).float().mean().backward()
    seq2seq.eval()
    assert all(p.grad is not None for p in seq2seq.parameters() if p.requires_grad)


@pytest.mark.parametrize("mode", MODES)
def test_the_lesson_13_similarity_widget(mode):
    """Lesson 13's sentence comparison (and its widget) under every mode: bf16 similarities reach numpy as float32."""
    import numpy as np

    from course_lab.lessons import l13_pretrained as l13
    model, toks, _ = _course("minilm_sst2_full")
    encoder, tok = model.encoder, toks["wordpiece"]                 # a SentenceEncoder, as load_minilm() gives
    want = l13.compare_sentences(encoder, tok, "a fine film", "a good movie")
    with MODES[mode]():
        got = l13.compare_sentences(encoder, tok, "a fine film", "a good movie")
        widget = l13.build_similarity_widget(encoder, tok)
    assert widget.error is None and widget.renders == 1 and got["tokens_a"] == want["tokens_a"]
    assert np.isfinite(got["token_similarity"]).all()
    assert got["token_similarity"].shape == want["token_similarity"].shape
    assert mode not in EXACT or got["similarity"] == want["similarity"]
