"""Language detection, pick/tr, and agreement between the UI labels and docs/glossary.md."""

import re
from pathlib import Path

import pytest

from course_lab import i18n


@pytest.fixture(autouse=True)
def neutral_environment(monkeypatch, tmp_path):
    """Start every test from "no hint at all": no env variables, a working directory without en/zh."""
    monkeypatch.delenv("COURSE_LANG", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    neutral = tmp_path / "work"
    neutral.mkdir()
    monkeypatch.chdir(neutral)
    i18n.set_language(None)
    yield
    i18n.set_language(None)


def test_default_is_english():
    assert i18n.current_language() == "en"


@pytest.mark.parametrize("value, expected", [("zh", "zh"), ("en", "en"), ("zh-CN", "zh"), (" ZH_cn ", "zh"),
                                             ("English", "en")])
def test_course_lang_env(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_LANG", value)
    assert i18n.current_language() == expected


def test_invalid_course_lang_says_how_to_fix(monkeypatch):
    monkeypatch.setenv("COURSE_LANG", "fr")
    with pytest.raises(ValueError, match=r"COURSE_LANG='fr'.*'en'.*'zh'"):
        i18n.current_language()


@pytest.mark.parametrize("session, expected", [
    ("/home/ada/course/notebooks/zh/03_attention.ipynb", "zh"),
    ("notebooks/en/03_attention.ipynb", "en"),
    ("C:\\Users\\ada\\course\\notebooks\\zh\\01_intro.ipynb", "zh"),
    ("/srv/zh/course/notebooks/en/01_intro.ipynb", "en"),   # the deepest folder is the most specific
])
def test_jupyter_session_path(monkeypatch, session, expected):
    monkeypatch.setenv("JPY_SESSION_NAME", session)
    assert i18n.current_language() == expected


def test_session_file_name_is_not_a_folder(monkeypatch):
    # Only folders count: a notebook file that happens to be called "zh" says nothing about the language.
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/ada/notes/zh")
    assert i18n.current_language() == "en"


def test_working_directory(monkeypatch, tmp_path):
    folder = tmp_path / "course" / "notebooks" / "zh"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    assert i18n.current_language() == "zh"
    # A session name without a language folder (older servers use an id) falls through to the directory.
    monkeypatch.setenv("JPY_SESSION_NAME", "5b1e3c2a-untitled")
    assert i18n.current_language() == "zh"


def test_priority_env_then_session_then_cwd(monkeypatch, tmp_path):
    folder = tmp_path / "notebooks" / "zh"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("JPY_SESSION_NAME", "/course/notebooks/en/02.ipynb")
    assert i18n.current_language() == "en"          # session path beats the working directory
    monkeypatch.setenv("COURSE_LANG", "zh")
    assert i18n.current_language() == "zh"          # the environment variable beats the session path
    i18n.set_language("en")
    assert i18n.current_language() == "en"          # an explicit call beats everything
    i18n.set_language(None)
    assert i18n.current_language() == "zh"


def test_set_language_rejects_unknown():
    with pytest.raises(ValueError, match="'de'"):
        i18n.set_language("de")
    with pytest.raises(TypeError):
        i18n.set_language(1)


def test_pick():
    texts = {"en": "Attention", "zh": "注意力"}
    assert i18n.pick(texts) == "Attention"
    assert i18n.pick(texts, "zh") == "注意力"
    i18n.set_language("zh")
    assert i18n.pick(texts) == "注意力"


def test_pick_missing_language_is_clear():
    with pytest.raises(ValueError, match=r"no text for language 'zh'.*'en'.*add a 'zh' entry") as info:
        i18n.pick({"en": "only English"}, "zh")
    assert isinstance(info.value, KeyError)  # `except KeyError` works too
    with pytest.raises(TypeError, match="pick"):
        i18n.pick("not a dict")


def test_tr_labels_and_templates():
    assert i18n.tr("position") == "Position"
    assert i18n.tr("position", "zh") == "位置"
    assert i18n.tr("layer_n", "en", n=3) == "Layer 3"
    assert i18n.tr("layer_n", "zh", n=3) == "第 3 层"
    with pytest.raises(ValueError, match="needs the field 'n'"):
        i18n.tr("layer_n")
    with pytest.raises(ValueError, match="did you mean 'position'"):
        i18n.tr("positon")


def test_every_label_has_both_languages():
    for key, texts in i18n.LABELS.items():
        assert set(texts) == set(i18n.LANGUAGES), key
        assert all(t.strip() for t in texts.values()), key


GLOSSARY = Path(__file__).resolve().parents[1] / "docs" / "glossary.md"


def test_glossary_file_has_the_course_terms():
    pairs = i18n.glossary(GLOSSARY)
    terms = dict(pairs)
    assert len(pairs) >= 60
    assert len(terms) == len(pairs), "a term appears twice in docs/glossary.md"
    required = """
        token; tokenization; vocabulary; embedding; embedding matrix; positional encoding; attention;
        self-attention; cross-attention; query; key; value; scaled dot-product attention;
        attention weights; multi-head attention; head; projection; mask; padding mask; causal mask;
        look-ahead; softmax; logits; feed-forward network; residual connection; layer normalization;
        RMSNorm; pre-norm; post-norm; encoder; decoder; encoder-decoder; sequence-to-sequence;
        teacher forcing; cross-entropy; label smoothing; perplexity; greedy decoding; beam search;
        temperature; top-k sampling; KV cache; learning rate; warm-up; gradient clipping;
        mixed precision; checkpoint; overfitting; validation set; batch; epoch; step;
        masked language model; fine-tuning; linear probe; pretrained; sentence embedding; dropout;
        parameter; gradient"""
    missing = [t for t in (" ".join(x.split()) for x in required.split(";")) if t not in terms]
    assert not missing
    # The standard terms Chinese teachers use.
    expected = {"attention mechanism": "注意力机制", "self-attention": "自注意力",
                "multi-head attention": "多头注意力", "positional encoding": "位置编码",
                "layer normalization": "层归一化", "residual connection": "残差连接",
                "feed-forward network": "前馈网络", "mask": "掩码", "causal mask": "因果掩码",
                "cross-entropy": "交叉熵", "label smoothing": "标签平滑", "perplexity": "困惑度",
                "beam search": "束搜索", "teacher forcing": "教师强制", "vocabulary": "词表", "token": "词元"}
    assert {k: terms[k] for k in expected} == expected


def _glossary_terms_in(text: str, terms: dict[str, str]):
    lowered = text.lower()
    return [t for t in terms if re.search(rf"(?<![\w-]){re.escape(t.lower())}(?![\w-])", lowered)]


def test_ui_labels_agree_with_glossary():
    terms = dict(i18n.glossary(GLOSSARY))
    checked = 0
    for key, texts in i18n.LABELS.items():
        en, zh = texts["en"], texts["zh"]
        if "{" in en:  # templates: check them filled in
            fields = {name: 1 for name in re.findall(r"{(\w+)}", en)}
            en, zh = en.format(**fields), zh.format(**fields)
        if en.lower() in terms:
            assert zh == terms[en.lower()], f"tr({key!r}) says {zh!r}, glossary says {terms[en.lower()]!r}"
        for term in _glossary_terms_in(en, terms):
            assert terms[term] in zh, f"tr({key!r}) = {zh!r} should contain {terms[term]!r} for {term!r}"
            checked += 1
    assert checked >= 20  # the check really ran over most labels


def test_glossary_label_disagreement_is_detected(monkeypatch):
    # The check above must be able to fail: a wrong translation of a glossary term is caught.
    monkeypatch.setitem(i18n.LABELS, "position", {"en": "Position", "zh": "方位"})
    with pytest.raises(AssertionError, match="方位"):
        test_ui_labels_agree_with_glossary()


def test_parse_glossary_markdown():
    md = ("# T\n\nintro | not a table row\n\n| English | 简体中文 | note |\n|---|:---:|---|\n"
          "| **token** | `词元` | unit |\n| head | 注意力头 | |\n\nafter\n| other | 表 | x |\n")
    assert i18n.parse_glossary(md) == [("token", "词元"), ("head", "注意力头")]


def test_glossary_without_a_path_gives_the_labels(tmp_path):
    pairs = i18n.glossary()
    assert ("position", "位置") in pairs
    assert all("{" not in en for en, _ in pairs)
    with pytest.raises(FileNotFoundError, match="missing.md"):
        i18n.glossary(tmp_path / "missing.md")


def test_parse_rejected_variants_column():
    md = ("| English | 简体中文 | note | rejected (不采用) |\n|---|---|---|---|\n"
          "| layer normalization | 层归一化 | LayerNorm | 层标准化, 层规范化 |\n| head | 注意力头 | | |\n")
    assert i18n.parse_rejected(md) == [("层标准化", "层归一化", "layer normalization"),
                                       ("层规范化", "层归一化", "layer normalization")]
    assert i18n.parse_glossary(md) == [("layer normalization", "层归一化"), ("head", "注意力头")]
    assert i18n.parse_rejected("| English | 简体中文 | note |\n|---|---|---|\n| head | 注意力头 | |\n") == []
