"""English–Chinese Tatoeba pairs (CC BY 2.0 FR, the manythings.org Anki ``cmn-eng.zip``; about 30% of the Chinese
traditional), a split that never tests on a trained English sentence, and BLEU / chrF with sacreBLEU (lesson 10)."""

from __future__ import annotations

import importlib
import os
import random
import re
import warnings
import zipfile
from pathlib import Path

import torch

from ..tokenizers import CharTokenizer, WordTokenizer
from . import samples
from .datasets import DataSource
from .download import DataUnavailable, _download, _NetworkError, downloads_allowed, sha256_file
from .registry import data_dir as _resolve_dir
from .registry import get_resource

ZIP_URLS = ("https://www.manythings.org/anki/cmn-eng.zip",)
ZIP_PATH = "tatoeba_cmn/cmn-eng.zip"
SAMPLE = "tatoeba_cmn_sample.tsv"
CREDIT = "Tatoeba (tatoeba.org, CC BY 2.0 FR) via the manythings.org Anki collection"


class Pairs(list):
    """A ``list`` of ``(english, chinese)`` pairs that also knows its ``name`` and ``source``."""

    def __init__(self, rows=(), name: str = "", source: DataSource | None = None):
        super().__init__(rows)
        self.name, self.source = name, source

    def describe(self) -> str:
        return f"{self.name}: {len(self):,} pairs, {len({en for en, _ in self}):,} distinct English, from {self.source}"


def parse_pairs(text: str, where: str) -> tuple[list[tuple[str, str]], int]:
    """Rows of ``english<TAB>chinese[<TAB>attribution]`` -> (pairs, number of columns). Every line must have line 1's
    layout and two non-empty texts; the file must end with a line break (a cut download usually stops mid-line)."""
    if not text.strip():
        raise ValueError(f"{where} is empty: delete it and load again")
    lines = text.split("\n")
    if lines[-1].strip():
        raise ValueError(f"{where} ends mid-line ({lines[-1][:60]!r}): the file looks cut short; delete it, load again")
    columns, rows = None, []
    for number, line in enumerate(lines[:-1], start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        columns = columns or len(fields)
        if columns not in (2, 3) or len(fields) != columns or not all(f.strip() for f in fields[:2]):
            raise ValueError(f"{where}, line {number}: expected 'english<TAB>chinese[<TAB>attribution]' with both "
                             f"texts, as many columns as line 1, got {line[:80]!r}: is the file damaged?")
        rows.append((fields[0].strip(), fields[1].strip()))
    return rows, columns


def read_pairs(path: str | os.PathLike) -> tuple[list[tuple[str, str]], str]:
    """Pairs of a ``cmn.txt`` file or of the ``cmn.txt`` inside a ``cmn-eng.zip`` -> (pairs, what was read)."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()  # every member's CRC-32: the integrity check a zip carries with it
            if bad is not None:
                raise ValueError(f"{path}: member {bad!r} fails its CRC check (damaged zip): delete it, load again")
            members = [m for m in zf.namelist() if Path(m).name == "cmn.txt"]
            if not members:
                raise ValueError(f"{path} has no cmn.txt (members: {zf.namelist()[:5]}): is this cmn-eng.zip?")
            raw, where = zf.read(members[0]), f"{path}:{members[0]}"
    elif path.suffix == ".zip":
        raise ValueError(f"{path} is not a readable zip (cut short?): delete it and load again")
    else:
        raw, where = path.read_bytes(), str(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} is not UTF-8 ({exc.reason} at byte {exc.start:,}): delete it, load again") from None
    rows, columns = parse_pairs(text, where)
    return rows, f"{where} ({columns} columns)"


def _check_zip(tmp: Path) -> None:
    if not zipfile.is_zipfile(tmp):
        raise ValueError("the reply is not a zip file (a web page instead of the file, or a cut transfer?)")
    read_pairs(tmp)  # CRCs and format: a damaged transfer is refused before it is kept


def load_tatoeba_cmn(data_dir: str | os.PathLike | None = None, *, simplified: bool = True, fallback: bool = True,
                     download: bool = True, progress: bool = True) -> Pairs:
    """Tatoeba pairs ``(english, chinese)`` (Chinese simplified by default) from ``tatoeba_cmn/cmn.txt``, else
    ``cmn-eng.zip`` in the data folder or downloaded, else the bundled sample (``fallback``); damaged: ValueError."""
    root, res = _resolve_dir(data_dir), get_resource("tatoeba-cmn")
    found = [p for p in (root / res.path, root / ZIP_PATH) if p.is_file()]
    kind, failures = "data_dir", []
    if not found and downloads_allowed(download):
        kind, dest = "downloaded", root / ZIP_PATH
        dest.parent.mkdir(parents=True, exist_ok=True)
        for url in ZIP_URLS:  # kept only if it reads back (via a temporary file)
            try:
                _download(url, dest, progress, _check_zip)
                found.append(dest)
                break
            except (_NetworkError, OSError, ValueError) as exc:
                failures.append(f"{url}: {exc}")
    if not found:
        why = ("the download of cmn-eng.zip failed:\n    " + "\n    ".join(failures) if failures
               else "download=False was passed" if not download else "downloads are disabled by COURSE_OFFLINE")
        missing = DataUnavailable(
            f"Tatoeba cmn-eng is not in the data folder (neither {root / res.path} nor {root / ZIP_PATH}) and "
            f"{why}.\n  Get {ZIP_URLS[0]} (or the course's cmn.txt) into {root / 'tatoeba_cmn'}, or point "
            "COURSE_DATA_DIR at a folder that has it (docs/data.md).")
        if not fallback:
            raise missing
        rows, _ = parse_pairs(samples._read(SAMPLE), samples.sample_location(SAMPLE))
        samples.warn_sample("Tatoeba cmn-eng", SAMPLE, f"{len(rows)} pairs", missing)
        pairs = Pairs(rows, "Tatoeba cmn-eng (sample)", DataSource("sample", samples.sample_location(SAMPLE), CREDIT))
    else:
        rows, what = read_pairs(found[0])
        digest = sha256_file(found[0])
        verdict = ("sha256 = the course's copy" if digest == res.sha256  # the same sha256 means the same size
                   else f"sha256 {digest[:16]}…: another release, format checked")
        if digest != res.sha256:  # a cut or edited file parses as well as a release: say so every time
            warnings.warn(f"{found[0]} is not the course's copy (sha256 {digest[:16]}…): {len(rows):,} pairs instead "
                          f"of {res.rows or 0:,}; results will differ from the lesson's. If it was cut short or "
                          "edited, delete it and load again", stacklevel=2)
        pairs = Pairs(rows, "Tatoeba cmn-eng", DataSource(kind, what, f"{verdict}; {CREDIT}"))
    return Pairs(to_simplified(pairs) if simplified else pairs, pairs.name, pairs.source)


def _require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"this needs the optional package {module!r}, which is not installed:\n    "
                          "pip install opencc sacrebleu   (or: pip install -e '.[translation]')") from None


def to_simplified(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Convert the Chinese side of every pair to simplified characters with OpenCC's ``t2s`` configuration."""
    opencc = _require("opencc")
    try:
        converter = opencc.OpenCC("t2s")
    except Exception:  # older OpenCC builds want the file name of the configuration
        converter = opencc.OpenCC("t2s.json")
    return [(en, converter.convert(zh)) for en, zh in pairs]


def english_key(sentence: str) -> str:
    """The key that makes two English sentences "the same" for the split: case, punctuation and spacing do not
    count (Tatoeba has ``Go away!`` and ``Go away.``: testing on one after training on the other would flatter)."""
    return " ".join(re.sub(r"[^\w' ]+", " ", sentence.lower()).split())


def group_by_english(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """English sentence -> its distinct Chinese translations, in first-seen order; sentences with the same
    :func:`english_key` form one group, named by its first-seen spelling."""
    names, groups = {}, {}  # english_key -> first spelling; first spelling -> translations
    for en, zh in pairs:
        refs = groups.setdefault(names.setdefault(english_key(en), " ".join(en.split())), [])
        if zh not in refs:
            refs.append(zh)
    return groups


def grouped_split(pairs: list[tuple[str, str]], n_test: int | float = 0.05,
                  seed: int = 0) -> tuple[list[tuple[str, str]], list[tuple[str, list[str]]]]:
    """Split by English sentence: ``(train pairs, test [(english, [all its translations]), ...])``; ``n_test``
    English sentences (``int``) or a fraction of them (``float`` in (0, 1))."""
    groups = group_by_english(pairs)
    if isinstance(n_test, float):
        if not 0 < n_test < 1:
            raise ValueError(f"a fractional n_test must lie in (0, 1), got {n_test}")
        n_test = max(1, round(n_test * len(groups)))
    if not isinstance(n_test, int) or not 0 < n_test < len(groups):
        raise ValueError(f"n_test must be between 1 and {len(groups) - 1} English sentences, got {n_test!r}")
    english = list(groups)
    random.Random(seed).shuffle(english)
    test = sorted(english[:n_test], key=lambda en: (len(en), en))
    train = [(en, zh) for en in english[n_test:] for zh in groups[en]]   # one spelling per group
    return train, [(en, groups[en]) for en in test]


def _check_refs(hypotheses, references) -> list[list[str | None]]:
    for name, value in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list (one entry per sentence), not a {type(value).__name__}: "
                            f"wrap a single sentence as [{value!r:.30}]")
    if not hypotheses:
        raise ValueError("corpus_bleu got no sentences: pass at least one hypothesis and its references")
    if bad := [h for h in hypotheses if not isinstance(h, str)][:1]:
        raise TypeError(f"each hypothesis must be a str, got {type(bad[0]).__name__} {bad[0]!r:.30}: decode ids first")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists: give one per hypothesis")
    if any(isinstance(r, str) or not r for r in references):
        raise ValueError("references must hold one non-empty *list* of translations per hypothesis, e.g. "
                         "[['我们走吧。'], ['他是老师。', '他是个老师。']]")
    # sacreBLEU wants reference *streams* (the k-th reference of every sentence); None fills missing ones
    return [[r[k] if k < len(r) else None for r in references] for k in range(max(map(len, references), default=0))]


def corpus_bleu(hypotheses: list[str], references: list[list[str]]):
    """sacreBLEU corpus BLEU (``tokenize="zh"``, all references, ``.score`` 0–100): BLEU = BP · exp(Σₙ ¼ log pₙ), pₙ
    the n-gram precision clipped by the *maximum* count over the references (n = 1..4), BP = min(1, exp(1 − r/c))."""
    bleu = _require("sacrebleu").metrics.BLEU(tokenize="zh")
    return bleu.corpus_score(list(hypotheses), _check_refs(hypotheses, references))


def paired_bootstrap(baseline: list[str], system: list[str], references: list[list[str]],
                     n_samples: int = 1000) -> float:
    """p-value of "``system`` is no better than ``baseline``" in BLEU by sacreBLEU's paired bootstrap (Koehn, 2004):
    ``n_samples`` resamplings of the test sentences, both systems scored on each (seed: ``SACREBLEU_SEED``)."""
    if len(baseline) != len(system):
        raise ValueError(f"{len(baseline)} baseline outputs but {len(system)} system outputs: give one per sentence")
    test = _require("sacrebleu.significance").PairedTest([("baseline", list(baseline)), ("system", list(system))],
                                   {"BLEU": _require("sacrebleu").metrics.BLEU(tokenize="zh")},
                                   _check_refs(system, references), test_type="bs", n_samples=n_samples)
    return float(test()[1]["BLEU"][1].p_value)


def corpus_chrf(hypotheses: list[str], references: list[list[str]]):
    """sacreBLEU chrF (character n-grams up to 6, β = 2) against all references; ``.score`` is 0–100."""
    return _require("sacrebleu").metrics.CHRF().corpus_score(list(hypotheses), _check_refs(hypotheses, references))


def make_tokenizers(train_pairs, min_freq: int = 2) -> tuple[WordTokenizer, CharTokenizer]:
    """English: lowercased words seen >= ``min_freq`` times (rarer ones become <unk>); Chinese: every character."""
    src_tok = WordTokenizer.from_texts([en for en, _ in train_pairs], min_freq=min_freq)
    return src_tok, CharTokenizer.from_text("".join(zh for _, zh in train_pairs))


def _bag_of_words(sentences, tok) -> torch.Tensor:
    """Sparse ``(N, V)`` word counts, rows scaled to unit length (so a product is a cosine similarity)."""
    rows, cols = [], []
    for i, s in enumerate(sentences):
        ids = [t for t in tok.encode(s) if t != tok.unk_id]
        rows += [i] * len(ids)
        cols += ids
    x = torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1), torch.ones(len(rows)),
                                (len(sentences), tok.vocab_size), check_invariants=True).coalesce()
    norms = torch.zeros(len(sentences)).index_add_(0, x.indices()[0], x.values() ** 2)
    scale = norms.clamp(min=1e-12).rsqrt()  # an all-<unk> sentence stays a zero row
    return torch.sparse_coo_tensor(x.indices(), x.values() * scale[x.indices()[0]], x.shape,
                                   check_invariants=True).coalesce()


def nearest_neighbour(train_pairs, test_sentences, src_tok) -> list[str]:
    """The baseline to beat, with no model: for each test sentence the Chinese of the training sentence whose
    bag-of-words vector has the largest cosine similarity (ties to the earliest pair)."""
    train = _bag_of_words([en for en, _ in train_pairs], src_tok)  # (N, V)
    test = _bag_of_words(test_sentences, src_tok).to_dense()  # (M, V)
    best = []
    for i in range(0, len(test_sentences), 512):
        best += torch.sparse.mm(train, test[i:i + 512].T).T.argmax(dim=1).tolist()  # (m, N) -> m indices
    return [train_pairs[j][1] for j in best]
