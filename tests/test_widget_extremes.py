"""Every lesson widget survives its controls' extremes: a finite figure or a clear message, never a crash or NaN.

Builders are discovered in ``course_lab.lessons`` (functions named ``build_*`` that return an object with
``controls``), so a new lesson's widget is covered without editing this file. A builder that needs arguments (a
model, a tokenizer) gets them from ``ARGUMENTS`` below, built tiny and untrained; a builder that needs arguments and
has no entry there fails ``test_every_builder_is_covered`` instead of being skipped.
"""

import importlib
import inspect
import math
import pkgutil
import re

import numpy as np
import pytest
import torch

pytest.importorskip("ipywidgets", reason="the widgets need the lab extra: pip install -e .[lab]")
pytest.importorskip("matplotlib", reason="the widgets need the lab extra: pip install -e .[lab]")

import course_lab.lessons as lessons_pkg  # noqa: E402  (after the skip: it needs the lab extra)
from course_lab import registry  # noqa: E402

TEXT = "To be, or not to be, that is the question: ROMEO! Ay me.\n"


def _translation():
    from course_lab.lessons import l10_seq2seq as l10
    from course_utils.models import Transformer

    src_tok, tgt_tok = l10.make_tokenizers()
    torch.manual_seed(0)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                        n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=32).eval()
    return (model, src_tok, tgt_tok), {"max_len": 8}


def _sampling():
    from course_utils.models import GPT
    from course_utils.tokenizers import CharTokenizer

    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(0)
    return (GPT(tok.vocab_size, max_len=48, n_layers=1, n_heads=2, d_model=16, dropout=0.0).eval(), tok), \
        {"n_new": 5}


def _fill_mask():
    from course_utils.models import MaskedLM
    from course_utils.tokenizers import CharTokenizer

    tok = CharTokenizer.from_text(TEXT)
    torch.manual_seed(0)
    model = MaskedLM(tok.vocab_size, d_model=16, n_heads=2, n_layers=1, dropout=0.0, max_len=64).eval()
    return (model, tok, [TEXT.strip(), "ROMEO! Ay me."]), {}


def _similarity():
    from course_utils.pretrained import BertConfig, SentenceEncoder
    from course_utils.wordpiece import WordPieceTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "movie", "was", "wonderful", "i", "enjoyed",
             "this", "film", "."]
    tok = WordPieceTokenizer(vocab)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64)
    return (SentenceEncoder(config, tok).eval(), tok), {}


def _heads():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(1, 6, 16, generator=g), list("abcdef"), torch.randn(48, 16, generator=g)), {}


def _bpe_tokenizers():
    from course_lab.lessons.l15_bpe import DEMO
    from course_utils.bpe import BPETokenizer

    texts = {"en": [p[0] for p in DEMO] * 3, "zh": [p[1] for p in DEMO] * 3}
    texts["both"] = texts["en"] + texts["zh"]
    return {k: BPETokenizer.from_texts(v, 290, min_frequency=1) for k, v in texts.items()}, DEMO


def _bpe_merge():
    tokenizers, demo = _bpe_tokenizers()
    return (tokenizers["both"], [s for pair in demo for s in pair]), {}


def _bpe_cost():
    tokenizers, demo = _bpe_tokenizers()
    return (tokenizers, demo), {}


# "module.builder" -> () -> (args, kwargs): tiny untrained models, enough for the widgets' logic.
ARGUMENTS = {
    "l04_multihead.build_heads_widget": _heads,
    "l10_seq2seq.build_translation_widget": _translation,
    "l11_gpt.build_sampling_widget": _sampling,
    "l12_masked_lm.build_fill_mask_widget": _fill_mask,
    "l13_pretrained.build_similarity_widget": _similarity,
    "l15_bpe.build_merge_widget": _bpe_merge,
    "l15_bpe.build_cost_widget": _bpe_cost,
}


def _needs_arguments(fn) -> bool:
    return any(p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


def _discover():
    """``{"module.build_x": fn}`` for every widget builder of every lesson module."""
    found = {}
    for info in pkgutil.iter_modules(lessons_pkg.__path__):
        module = importlib.import_module(f"course_lab.lessons.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            own = fn.__module__ == module.__name__ or fn.__module__.startswith(module.__name__ + ".")
            if own and name.startswith("build_") and ("widget" in name or "explorer" in name):
                found[f"{info.name}.{name}"] = fn
    return found


DISCOVERED = _discover()
BUILDERS = [pytest.param(fn, ARGUMENTS.get(key), id=key) for key, fn in DISCOVERED.items()]


def test_there_are_widgets_to_check():
    assert len(BUILDERS) >= 13, sorted(DISCOVERED)


def test_every_builder_is_covered():
    """No silent skip: a builder that needs arguments must have an entry in ARGUMENTS, and every entry must
    name a builder that exists and needs them."""
    needing = {key for key, fn in DISCOVERED.items() if _needs_arguments(fn)}
    assert needing == set(ARGUMENTS), (f"add to ARGUMENTS: {sorted(needing - set(ARGUMENTS))}; "
                                       f"remove: {sorted(set(ARGUMENTS) - needing)}")


def _numbers(fig):
    """All numeric data drawn in a figure: images, lines, bars, meshes and scatter offsets."""
    for ax in fig.axes:
        for im in ax.images:
            yield np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), 0.0)
        for line in ax.lines:
            yield np.asarray(line.get_ydata(), dtype=float)
        for patch in ax.patches:
            if hasattr(patch, "get_height"):
                yield np.asarray([patch.get_height()], dtype=float)
        for coll in ax.collections:
            arr = coll.get_array()
            if arr is not None:
                yield np.ma.filled(np.ma.asarray(arr, dtype=float), 0.0)


def _assert_sane(w, what):
    error = getattr(w, "error", None)
    if error:                                  # a clear message shown instead of a figure is allowed
        assert isinstance(error, str) and len(error) > 10, what
        missing = re.match(r"there is no lesson (\d+)", error)  # but a registered lesson always exists
        assert not (missing and int(missing.group(1)) < len(registry.LESSONS)), f"{what}: {error}"
        return
    fig = getattr(w, "figure", None)
    if fig is not None:
        for arr in _numbers(fig):
            assert np.isfinite(arr).all(), f"{what}: non-finite data in the figure"
    for key, value in (getattr(w, "state", None) or {}).items():
        if isinstance(value, float):
            assert math.isfinite(value) or math.isinf(value), f"{what}: state[{key!r}] is NaN"


def _extremes(control):
    if hasattr(control, "min") and hasattr(control, "max"):
        return [control.min, control.max, control.value]
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) else o for o in options]
        return values[:1] + values[-1:]
    if isinstance(getattr(control, "value", None), bool):
        return [not control.value, control.value]
    return []


@pytest.mark.parametrize(("build", "arguments"), BUILDERS)
def test_widget_controls_at_their_extremes(build, arguments):
    import matplotlib.pyplot as plt

    args, kwargs = arguments() if arguments is not None else ((), {})
    w = build(*args, **kwargs)
    controls = getattr(w, "controls", None)
    assert controls, f"{build.__name__} returned no controls"
    items = controls.items() if isinstance(controls, dict) else enumerate(controls)
    for name, control in items:
        for value in _extremes(control):
            control.value = value
            _assert_sane(w, f"{build.__name__}: {name}={value!r}")
    plt.close("all")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_course_map_widget_shows_every_registered_lesson(lang):
    """Every lesson of the registry is in the dropdown and gets its card and part; a number past the last lesson
    gets exactly the message that names the lessons there are."""
    import matplotlib.pyplot as plt

    from course_lab.lessons import l00_welcome as l00

    w = l00.build_course_map_widget(lang)
    values = [option[1] for option in w.controls["lesson"].options]
    assert values == [lesson.number for lesson in registry.LESSONS]
    for lesson in registry.LESSONS:
        w.controls["lesson"].value = lesson.number
        assert w.error is None, w.error
        assert w.state["number"] == lesson.number and w.state["title"] == lesson.title[lang]
        assert w.state["part"] == registry.part(lesson.part).name[lang]
    last = len(registry.LESSONS) - 1
    with pytest.raises(ValueError) as raised:
        l00.render_lesson_card(last + 1, lang)
    assert str(raised.value) == f"there is no lesson {last + 1}: the course has lessons 0 to {last}"
    plt.close("all")
