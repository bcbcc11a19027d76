"""Tests for course_utils.data.translation: the Tatoeba cmn-eng loader (both layouts, zip, damaged files, offline,
download), OpenCC conversion, the split grouped by English sentence and multi-reference BLEU / chrF.

Every file is made here; the real ../shared/data copy is only read by the last test (skipped without it).
"""

import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.data import DataUnavailable, SampleDataWarning, translation
from course_utils.data.registry import Resource

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
ROWS = [("Hi.", "你好。"), ("Hi.", "嗨。"), ("I love you.", "我愛你。"), ("Go away!", "走開！"), ("Go away.", "走开。"),
        ("Tom is here.", "汤姆在这儿。"), ("Let's go.", "我们走吧。")]
ATTRIBUTION = "CC-BY 2.0 (France) Attribution: tatoeba.org #{0} (CK) & #{1} (fucongcong)"


def two_columns(rows=ROWS) -> str:
    return "".join(f"{en}\t{zh}\n" for en, zh in rows)


def three_columns(rows=ROWS) -> str:
    return "".join(f"{en}\t{zh}\t{ATTRIBUTION.format(i, i + 1)}\n" for i, (en, zh) in enumerate(rows))


def make_zip(text: str, member: str = "cmn.txt") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # stored: the test can find and damage the bytes
        zf.writestr(member, text.encode("utf-8"))
        zf.writestr("_about.txt", "Tatoeba, CC BY 2.0 FR")
    return buf.getvalue()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    monkeypatch.delenv("COURSE_OFFLINE", raising=False)
    monkeypatch.setattr(translation, "ZIP_URLS", ("http://127.0.0.1:9/never-used.zip",))


def put(root: Path, name: str, content) -> Path:
    path = root / "tatoeba_cmn" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


# ------------------------------------------------------------------------------------------------- layouts
@pytest.mark.parametrize("layout, columns", [(two_columns, 2), (three_columns, 3)])
def test_both_layouts_give_the_same_pairs_and_say_which_file(tmp_path, layout, columns):
    path = put(tmp_path, "cmn.txt", layout())
    pairs = translation.load_tatoeba_cmn(tmp_path, simplified=False, download=False)
    assert pairs == ROWS
    assert pairs.source.kind == "data_dir" and pairs.source.location == f"{path} ({columns} columns)"
    assert "another release" in pairs.source.detail and "CC BY 2.0 FR" in pairs.source.detail  # not the course's
    assert "7 pairs, 6 distinct English" in pairs.describe()


def test_the_zip_is_read_in_place(tmp_path):
    path = put(tmp_path, "cmn-eng.zip", make_zip(three_columns(), member="cmn-eng/cmn.txt"))
    pairs = translation.load_tatoeba_cmn(tmp_path, simplified=False, download=False)
    assert pairs == ROWS and pairs.source.location == f"{path}:cmn-eng/cmn.txt (3 columns)"


def test_the_course_copy_is_recognised_by_its_sha256(tmp_path, monkeypatch):
    text = two_columns().encode("utf-8")
    put(tmp_path, "cmn.txt", text)
    course = Resource("tatoeba-cmn", "tatoeba_cmn/cmn.txt", len(text), hashlib.sha256(text).hexdigest(), "t", "s")
    monkeypatch.setattr(translation, "get_resource", lambda name: course)
    pairs = translation.load_tatoeba_cmn(tmp_path, simplified=False, download=False)
    assert pairs.source.detail.startswith("sha256 = the course's copy")


# ------------------------------------------------------------------------------------------------- damage
@pytest.mark.parametrize("content, message", [
    (two_columns()[:-4], "cut short"),                                         # a transfer that stopped mid-line
    (two_columns() + "Only English\n", "line 8"),                             # a column lost
    (two_columns() + "A\tB\tC\tD\n", "line 8"),                               # too many
    (two_columns(ROWS[:2]) + three_columns(ROWS[2:]), "line 3"),              # layouts mixed
    ("Hi.\t\n", "line 1"),                                                     # an empty translation
    (two_columns().encode("utf-8")[:-9] + b"\xff\xfe\n", "not UTF-8"),         # bytes that are not text
    ("", "empty"),
])
def test_a_damaged_file_raises_with_the_fix_and_never_falls_back(tmp_path, content, message):
    put(tmp_path, "cmn.txt", content)
    with pytest.raises(ValueError, match=message):
        translation.load_tatoeba_cmn(tmp_path, simplified=False, download=False, fallback=True)


def test_a_zip_with_a_bad_crc_or_no_cmn_txt_is_refused(tmp_path):
    good = make_zip(two_columns())
    at = good.index("汤姆".encode())
    put(tmp_path, "cmn-eng.zip", good[:at] + "汤汤".encode() + good[at + 6:])   # same length, other bytes
    with pytest.raises(ValueError, match="CRC"):
        translation.load_tatoeba_cmn(tmp_path, download=False)
    put(tmp_path, "cmn-eng.zip", make_zip(two_columns(), member="fra.txt"))
    with pytest.raises(ValueError, match="no cmn.txt"):
        translation.load_tatoeba_cmn(tmp_path, download=False)
    put(tmp_path, "cmn-eng.zip", good[: len(good) // 2])
    with pytest.raises(ValueError, match="not a readable zip"):
        translation.load_tatoeba_cmn(tmp_path, download=False)


# ------------------------------------------------------------------------------------------------- offline
def test_offline_gives_the_bundled_sample_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    monkeypatch.setattr("urllib.request.urlopen", lambda *a, **k: pytest.fail("went online"))
    with pytest.warns(SampleDataWarning, match="tatoeba_cmn_sample.tsv"):
        pairs = translation.load_tatoeba_cmn(tmp_path, simplified=False)
    assert 300 <= len(pairs) <= 500 and pairs.source.kind == "sample" and "Tatoeba" in pairs.source.detail
    assert len(translation.group_by_english(pairs)) < len(pairs)          # some sentences have several references
    with pytest.raises(DataUnavailable, match="COURSE_OFFLINE") as err:
        translation.load_tatoeba_cmn(tmp_path, fallback=False)
    assert "cmn-eng.zip" in str(err.value) and str(tmp_path) in str(err.value)
    assert not (tmp_path / "tatoeba_cmn").exists()                          # nothing was created


def test_download_keeps_a_good_zip_and_refuses_a_web_page(tmp_path, monkeypatch):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    (upstream / "cmn-eng.zip").write_bytes(make_zip(three_columns()))
    (upstream / "page.zip").write_text("<html>Please log in to the Wi-Fi</html>")
    root = tmp_path / "data"
    monkeypatch.setattr(translation, "ZIP_URLS", ((upstream / "page.zip").as_uri(),))
    with pytest.raises(DataUnavailable, match="not a zip"):
        translation.load_tatoeba_cmn(root, fallback=False, progress=False)
    assert [p.name for p in (root / "tatoeba_cmn").iterdir()] == []           # no half file left behind
    monkeypatch.setattr(translation, "ZIP_URLS", ((upstream / "cmn-eng.zip").as_uri(),))
    pairs = translation.load_tatoeba_cmn(root, simplified=False, progress=False)
    assert pairs == ROWS and pairs.source.kind == "downloaded"
    assert (root / translation.ZIP_PATH).read_bytes() == (upstream / "cmn-eng.zip").read_bytes()
    again = translation.load_tatoeba_cmn(root, simplified=False, download=False)
    assert again == ROWS and again.source.kind == "data_dir"


# ------------------------------------------------------------------------------------------------- OpenCC
def test_traditional_characters_become_simplified(tmp_path):
    pytest.importorskip("opencc")
    put(tmp_path, "cmn.txt", two_columns())
    pairs = translation.load_tatoeba_cmn(tmp_path, download=False)
    assert ("I love you.", "我爱你。") in pairs and ("Go away!", "走开！") in pairs
    assert ("Tom is here.", "汤姆在这儿。") in pairs                                  # simplified stays as it was


def test_without_opencc_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "opencc", None)
    with pytest.raises(ImportError, match="pip install opencc"):
        translation.to_simplified(ROWS)


# ------------------------------------------------------------------------------------------------- split
def test_grouped_split_keeps_every_test_sentence_out_of_training():
    pairs = [(f"Sentence {i % 40}{'!' if i % 3 else '.'}", f"句子{i}") for i in range(200)]
    train, test = translation.grouped_split(pairs, 10, seed=1)
    assert len(test) == 10
    train_keys = {translation.english_key(en) for en, _ in train}
    assert not train_keys & {translation.english_key(en) for en, _ in test}   # "Sentence 3!" = "sentence 3."
    assert len(train) + sum(len(refs) for _, refs in test) == len(set(pairs))  # every pair is used once
    assert all(len(refs) == 5 for _, refs in test)                              # all references travel together
    assert translation.grouped_split(pairs, 10, seed=1) == (train, test)        # the seed fixes the split
    assert translation.grouped_split(pairs, 0.25)[1].__len__() == 10
    for bad in (0, 40, 1.5, "10"):
        with pytest.raises(ValueError, match="n_test"):
            translation.grouped_split(pairs, bad)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "A.", "b c", "B c!", "d", "e f", "g"]),
                          st.sampled_from(["一", "二", "三", "四"])), min_size=3, max_size=30), st.integers(0, 9))
def test_grouped_split_property(pairs, seed):
    groups = translation.group_by_english(pairs)
    if len(groups) < 2:
        return
    train, test = translation.grouped_split(pairs, 1, seed=seed)
    key = translation.english_key
    assert not {key(en) for en, _ in train} & {key(en) for en, _ in test}
    used = [(key(en), zh) for en, zh in train] + [(key(en), zh) for en, refs in test for zh in refs]
    assert sorted(used) == sorted({(key(en), zh) for en, zh in pairs})          # each distinct pair once


# ------------------------------------------------------------------------------------------------- metrics
def test_bleu_uses_every_reference_and_matches_sacrebleu():
    sacrebleu = pytest.importorskip("sacrebleu")
    hyps = ["他是个老师。", "我们走吧。"]
    refs = [["他是老师。", "他是个老师。"], ["我们走吧。"]]
    assert translation.corpus_bleu(hyps, refs).score == pytest.approx(100.0)   # hyp 1 is reference 2
    assert translation.corpus_bleu(hyps, [r[:1] for r in refs]).score < 80
    streams = [["他是老师。", "我们走吧。"], ["他是个老师。", None]]
    expected = sacrebleu.corpus_bleu(hyps, streams, tokenize="zh").score
    assert translation.corpus_bleu(hyps, refs).score == pytest.approx(expected)
    assert translation.corpus_chrf(hyps, refs).score == pytest.approx(sacrebleu.corpus_chrf(hyps, streams).score)
    assert translation.corpus_chrf(hyps, refs).score == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1"):
        translation.corpus_bleu(hyps, refs[:1])
    with pytest.raises(ValueError, match="list"):
        translation.corpus_bleu(hyps, ["他是老师。", "我们走吧。"])


def test_tokenize_zh_counts_characters():
    pytest.importorskip("sacrebleu")
    score = translation.corpus_bleu(["我们走吧"], [["我们走了"]])
    assert score.precisions[0] == pytest.approx(75.0)                     # 3 of 4 characters match


# ------------------------------------------------------------------------------------------------- real file
@pytest.mark.skipif(not (SHARED / "tatoeba_cmn" / "cmn.txt").is_file(), reason="no ../shared/data here")
def test_the_shared_copy_is_the_course_copy():
    pytest.importorskip("opencc")
    pairs = translation.load_tatoeba_cmn(SHARED, download=False)
    assert len(pairs) == 32_028 and pairs.source.detail.startswith("sha256 = the course's copy")
    assert ("Who?", "谁？") in pairs                                        # 誰 in the file
    train, test = translation.grouped_split(pairs, 1500)
    assert len(test) == 1500 and sum(len(r) for _, r in test) >= 1500


# ------------------------------------------------------------------------------------------------- lesson helpers
def test_nearest_neighbour_baseline_and_translate():
    import torch

    from course_utils.data.translation import make_tokenizers, nearest_neighbour
    from course_utils.decoding import greedy_decode, translate
    from course_utils.models import Transformer

    train = [("Tom is here.", "汤姆在这儿。"), ("I love you.", "我爱你。"), ("Let's go.", "我们走吧。"),
             ("Tom is tall.", "汤姆很高。"), ("You love Tom.", "你爱汤姆。")] * 2
    src_tok, tgt_tok = make_tokenizers(train, min_freq=2)
    assert nearest_neighbour(train, ["Let's go!", "tom is TALL", "I love you"], src_tok) == [
        "我们走吧。", "汤姆很高。", "我爱你。"]
    assert nearest_neighbour(train, ["Zebras?"], src_tok) == [train[0][1]]    # nothing shared: the first pair
    torch.manual_seed(0)
    model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                        n_decoder_layers=1, d_ff=32, dropout=0.0)
    sentences = [en for en, _ in train[:5]]
    src = src_tok.encode_batch(sentences)
    ids = greedy_decode(model, src, 2 * src.size(1) + 10, tgt_tok.bos_id, tgt_tok.eos_id)
    assert translate(model, sentences, src_tok, tgt_tok) == [tgt_tok.decode(r) for r in ids]
    beam1 = translate(model, sentences, src_tok, tgt_tok, method="beam", beam_size=1)
    assert beam1 == translate(model, sentences, src_tok, tgt_tok, batch_size=2)        # beam 1 = greedy, any batch
    short = translate(model, sentences, src_tok, tgt_tok, max_new_tokens=2)
    assert all(len(tgt_tok.encode(t)) <= 2 for t in short)
    model.train()
    translate(model, sentences[:1], src_tok, tgt_tok)
    assert model.training                                                         # the caller's mode is kept
    with pytest.raises(ValueError, match="greedy"):
        translate(model, sentences, src_tok, tgt_tok, method="sample")
