"""What the Chinese notebooks *print* is Chinese too: no English labels, headers or messages in their outputs.

The builder's one-language rule (tools/one_language.py) reads the code of a cell; it cannot see what the code prints
at run time (a label of three English words, a table header made in course_lab, a dict with English keys). This test
reads the outputs of the executed Chinese notebooks and flags every English word that is not

- a code identifier (``d_model``, ``nn.MHA``, ``tensor(``, ``eval()``, ``mask[:, None]``, CamelCase,
  ``name=value`` where ``name`` is a keyword argument the notebook's code passes, a dict key the code indexes with:
  ``report["device"]``), a number, a shape or a tensor repr;
- a unit or an acronym (``ms``, ``GiB``, ``CPU``, ``BLEU``);
- a name or term of :data:`ALLOWED` (the glossary keeps softmax, logits, dropout, Transformer, top-k in English;
  packages and models keep their names);
- a string shown as a value in a repr (``['the', 'cats']``: tokens are data); dict *keys* are labels and are checked;
- lesson data in English: the output of a code cell tagged :data:`DATA_TAG` in the source (the English sentences a
  lesson translates or classifies, generated Shakespeare, tokenizer pieces), which is not checked;
- a library's own message, ``SomeError: ...`` or ``SomeWarning: ...`` (a warning on stderr with the lines of its
  reason): libraries speak English (PyTorch does, and so does course_utils, which has no language layer), so the
  lesson prints it as it is and **explains it in Chinese**: a line with Chinese after it in the same cell's output
  (the sample-data warning is followed by course_lab.data_text's Chinese line), or Chinese before it on its own
  line (``✗ 无法检查你的答案（AttributeError：…）``); the test requires one of the two.

Where the executed notebooks come from. Running every Chinese notebook again here would double the time of
``make test``; instead this test reads the copies that the same pytest run wrote: ``make test`` runs
``notebooks/en notebooks/zh tests`` in that order, and ``notebooks/conftest.py`` writes every notebook that ran
without a failure to ``build/executed/zh/``, stamped with the sha256 of the committed notebook. A copy that is
missing (the notebook failed or did not run) or stale (its stamp is not the committed notebook's) means there is
nothing trustworthy to read: locally the notebook's test is skipped with the command that runs it; under ``CI`` (set
by .ci/run, which runs ``make test``, where every notebook runs first) it fails. The scanner itself is tested on the
known English lines in :func:`test_the_scanner_flags_what_it_is_for`, which needs no executed notebook.

The same executed copies, English and Chinese, also answer a second question: run on the course's own data (as in
CI), did any lesson warn that its data differ and skip a comparison? See
:func:`test_no_lesson_warns_about_its_data_on_the_course_data`.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks" / "zh").glob("*.ipynb"))
EXECUTED = ROOT / "build" / "executed" / "zh"
DATA_TAG = "english-data"
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef\u3000-\u303f]")

# English that a Chinese edition keeps, each for a reason.
ALLOWED = {
    # terms the glossary (docs/glossary.md) keeps in English, as Chinese practitioners write them
    "softmax", "logit", "logits", "dropout", "transformer", "transformers", "top-k", "top-p", "memory", "token",
    "ids", "top", "eps", "autocast", "nn",
    # maths and code-level function names as they appear in formulas (log|V|, sqrt(d), std 版本, |x|·exp)
    "log", "exp", "sqrt", "std", "max", "min", "argmax", "eval", "train", "relu", "gelu", "tanh", "inf", "nan",
    # units
    "ms", "ns", "us", "gib", "mib", "kib", "gb", "mb", "kb", "gflop", "gflops", "flop", "flops", "nats",
    # device names as torch spells them, and the packages and models the lessons name
    "cpu", "cuda", "mps", "python", "torch", "numpy", "matplotlib", "ipywidgets", "pytorch", "tokenizers",
    "sentence-transformers", "safetensors", "hugging", "face", "tatoeba", "shakespeare", "tiny-shakespeare",
    "opencc", "wordpiece", "chrf", "x86", "zh", "en", "cmn-eng", "anki", "llama", "llamamlp", "minilm",
    # smoothing methods by their names, as Chinese texts on language models write them (add-k 平滑, Kneser–Ney 平滑)
    "add-k", "kneser", "ney",
    # a font's name (lesson 00 says which font draws Chinese here)
    "wenquanyi", "micro", "hei", "noto", "sans", "serif", "cjk", "sc", "droid", "fallback", "source", "han",
}

# Case matters for these: He (He et al.'s initialisation), Python's constants.
NAMES = {"He", "True", "False", "None"}

# Inside a line: a library's message (everything after "ValueError: " or "SampleDataWarning: ").
LIBRARY_MESSAGE = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Warning)[:：] ?")
# Strings shown in a repr: '...' or "..." (not an apostrophe inside a word: don't, it's).
_QUOTED = re.compile(r"""(?<![A-Za-z])'(?:[^'\\\n]|\\.)*'(?![A-Za-z])|"(?:[^"\\\n]|\\.)*\"""")
# Not words: paths and URLs, dotted and snake_case names, words with digits, CamelCase, tensor/Size reprs.
_CODE = re.compile(r"\b[A-Z]\w*\([^()]*\)|`[^`]*`|https?://\S+|\S*/\S*/\S*|\S*[._]\w\S*|\w*\d\w*|"
                   r"\b[A-Za-z]*[a-z][A-Z]\w*|^\s*\(\w+\):|\b\w+[(\[]|--[\w-]+|<[a-z/]+>|\[[A-Z]+\]|##\w+")
_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")


def _function_names(notebook: dict) -> set[str]:
    """Functions and classes the notebook's code defines or imports (``fit``): a bare word of output may name one."""
    names = set()
    for tree in _trees(notebook):
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def _trees(notebook: dict) -> list[ast.Module]:
    """The code cells of the notebook as Python (IPython magics commented out; a cell that does not parse is left
    out)."""
    trees = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join("#" + line if line.lstrip().startswith(("%", "!")) else line
                         for line in "".join(cell["source"]).split("\n"))
        try:
            trees.append(ast.parse(code))
        except SyntaxError:
            continue
    return trees


def _keyword_names(notebook: dict) -> set[str]:
    """Names the notebook's code uses as identifiers: keyword arguments and parameters (``compile=False``) and
    string keys it indexes with (``report["device"]``), so that ``name=value`` or a ``name  value`` column prints
    code."""
    names = set()
    for tree in _trees(notebook):
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg:
                names.add(node.arg)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                  and isinstance(node.slice.value, str) and node.slice.value.isidentifier()):
                names.add(node.slice.value)
    return names


def english_words(line: str, keywords: frozenset[str] | set[str] = frozenset(),
                  names: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """The English words of one output line that a Chinese reader should not meet (see the module docstring).
    ``keywords`` may appear as ``name=value``, a dict key or a first column; ``names`` anywhere (functions)."""
    found = []
    for match in _QUOTED.finditer(line):  # dict keys are labels: check them; other quoted strings are data
        if line[match.end():].lstrip().startswith(":") and line[:match.start()].rstrip()[-1:] in "{,":
            key = match.group(0)[1:-1]
            found += [] if key in keywords else english_words(key, keywords, names)
    text = _QUOTED.sub(" ", line)
    text = re.sub(r"^\s*(\w+)\s", lambda m: " " if m.group(1) in keywords else m.group(0), text)  # a key column
    text = re.sub(r"\b(\w+)=(?:'[^']*'|\w+)", lambda m: " " if m.group(1) in keywords or
                  m.group(0).endswith(("=True", "=False", "=None")) else m.group(0).replace("=", " "), text)
    text = _CODE.sub(" ", text).replace("→", " ")
    for word in _WORD.findall(text):
        if len(word) < 2 or word.isupper() or word.lower() in ALLOWED or word in NAMES or word in names:
            continue
        if word.lower().endswith("s") and word.lower()[:-1] in ALLOWED:
            continue
        found.append(word)
    return found


def output_texts(cell: dict) -> list[str]:
    """The text a reader sees in a cell's outputs, as lines: streams, results, errors, markdown and HTML, and the
    labels of a widget (its descriptions and HTML titles; a widget's options are data)."""
    texts = []
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream" and out.get("name") == "stderr" and LIBRARY_MESSAGE.search("".join(out["text"])):
            # a warning: "file.py:12: SampleDataWarning: message" and its reason on the following lines, one message
            texts.append(" ".join("".join(out["text"]).split("\n")))
        elif kind == "stream":
            texts.append("".join(out["text"]))
        elif kind == "error":
            texts.append(f"{out['ename']}: {out['evalue']}")
        else:
            data = out.get("data", {})
            plain = "".join(data.get("text/plain", ""))
            if "application/vnd.jupyter.widget-view+json" in data:
                texts += [re.sub(r"<[^>]+>", " ", m) for m in
                          re.findall(r"(?:description|HTML\(value|placeholder)='([^']*)'", plain)]
            elif "text/markdown" in data:
                texts.append(re.sub(r"`[^`]*`", " ", "".join(data["text/markdown"])))
            elif "text/html" in data:
                texts.append(re.sub(r"<[^>]+>", " ", "".join(data["text/html"])))
            elif not re.fullmatch(r"<(?:Figure|IPython)[^>]*>", plain.strip()):
                texts.append(plain)
    return [line for text in texts for line in text.splitlines()]


def problems_in(notebook: dict, name: str) -> list[str]:
    """Every English word of the notebook's outputs, and every library message with no Chinese line after it."""
    keywords, functions = _keyword_names(notebook), _function_names(notebook)
    problems = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or DATA_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        lines = output_texts(cell)
        for row, line in enumerate(lines):
            message = LIBRARY_MESSAGE.search(line)
            shown = line[:message.start()] if message else line
            words = english_words(shown, keywords, functions)
            if words:
                problems.append(f"{name}, cell {index}: {', '.join(dict.fromkeys(words))} in {line.strip()[:90]!r}")
            explained = CJK.search(shown) or any(CJK.search(after) for after in lines[row + 1:])
            if message and not explained:
                problems.append(f"{name}, cell {index}: the library's message {line.strip()[:70]!r} has no Chinese "
                                "explanation after it")
    return problems


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _executed(notebook: Path) -> dict:
    """The copy of ``notebook`` that this pytest run (or an earlier one) executed; skip or fail when there is none."""
    copy = EXECUTED.parent / notebook.parent.name / notebook.name
    run = f"pytest --nbval-lax --nbval-current-env notebooks/{notebook.parent.name}/{notebook.name}"
    reason = None
    if not copy.is_file():
        reason = f"no executed copy {copy.relative_to(ROOT)} (the notebook failed or did not run): {run}"
    else:
        executed = json.loads(copy.read_text(encoding="utf-8"))
        stamp = executed.get("metadata", {}).get("course_executed", {}).get("source_sha256")
        if stamp != hashlib.sha256(notebook.read_bytes()).hexdigest():
            reason = f"{copy.relative_to(ROOT)} is older than the committed notebook: {run}"
    if reason and _in_ci():
        pytest.fail(f"{reason} (CI is set: make test runs every notebook before tests/, so this is a failure)",
                    pytrace=False)
    if reason:
        pytest.skip(reason)
    return executed


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_chinese_notebook_prints_no_english(notebook):
    problems = problems_in(_executed(notebook), notebook.stem)
    assert not problems, (f"{len(problems)} English output line(s) in the Chinese notebook: print them through "
                          "pick()/tr(), or, for a library's message, print a Chinese explanation after it:\n"
                          + "\n".join(problems))


# The datasets the lessons train on, as the course's own copies (name in course_utils.data.registry).
LESSON_DATASETS = ("tiny-shakespeare", "sst2-train", "sst2-dev", "tatoeba-cmn")


@functools.lru_cache(maxsize=1)
def _course_copies_in_data_dir() -> bool:
    """True when COURSE_DATA_DIR holds the course's copy (same sha256) of every dataset a lesson trains on, as in CI."""
    from course_utils.data.download import sha256_file
    from course_utils.data.registry import get_resource

    folder = os.environ.get("COURSE_DATA_DIR")
    if not folder:
        return False
    for name in LESSON_DATASETS:
        resource = get_resource(name)
        path = Path(folder) / resource.path
        if not path.is_file() or sha256_file(path) != resource.sha256:
            return False
    return True


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*/*.ipynb")),
                         ids=lambda path: f"{path.parent.name}-{path.stem}")
def test_no_lesson_warns_about_its_data_on_the_course_data(notebook):
    """On the course's own data every comparison with a course model runs: no "⚠" line or sample-data warning
    (sample data, another release, a vocabulary or split that differs), since each means a comparison or an assert
    was skipped. Without those copies (a student offline, another release) the lessons say so and go on."""
    if not _course_copies_in_data_dir():
        pytest.skip("COURSE_DATA_DIR does not hold the course's copies of the lessons' datasets")
    signs = ("⚠", "SampleDataWarning", "not the course's copy")
    warned = [line for cell in _executed(notebook)["cells"] if cell["cell_type"] == "code"
              for line in output_texts(cell) if any(sign in line for sign in signs)]
    assert not warned, f"{notebook.parent.name}/{notebook.name} ran on the course's data but warned: {warned}"


def test_the_scanner_flags_what_it_is_for():
    flagged = [  # lines the Chinese notebooks printed before this test existed
        "(2, 6, 16) -> (2, 6, 16) | weights (2, 4, 6, 6)",
        "   additive: d_k=4:  0.68  d_k=16:  0.75",
        "{'I_h ⊗ A': 0.0164, 'block-diag': 0.1252, 'full': 1.0}",
        "float32    -inf masked_fill  leak=0  full row=[nan, nan, nan, nan]",
        "masked_attention (naive):       tensor([nan, nan, nan, nan])",
        "float16   float64→cast                     -              2.44e-04",
        "counted 50,331,648  formula 50,331,648",
        "T=  128: projections    0.15 GFLOP | QKᵀ and AV     0.03 GFLOP | T² share 14.3%",
        "layer 0 keys: (1, 4, 40, 16) (B, h, T, d_k);  cache size 40960 bytes",
        "SST-2 [dev]: 872 examples (negative 428, positive 444) from data folder: /data/sst2/dev.tsv",
        "loss 4.209, log|V| = 4.248",
        "{'selected': 0.149, 'mask': 0.807, 'random': 0.098, 'unchanged': 0.095} 共 51200 个普通词元",
    ]
    for line in flagged:
        assert english_words(line), line
    clean = [
        "d_model = 512, h =  8, d_k =  64: 1,050,624",
        "torch.Size([21, 8]) torch.Size([2, 9]) -> torch.Size([2, 9, 8])",
        "8 ['the', 'cats', 'sat', 'on', 'the', 'flat', 'mats', '.']",
        "tensor([[1, 1, 1, 1, 0, 0],",
        "与 nn.LayerNorm 的最大绝对差： 8.881784197001252e-16",
        "|V| =     12: NLL = 2.485 = log|V|, 困惑度 = 12.0",
        "CPU · torch.float32 · d_model=256, h=8",
        "eval()：你的 logits 与 course_utils 的最大差值 = 4.2e-07；train()：你的模型调用两次相差 0.94（dropout）",
        "T=   64：nn.MHA     4.41 ms | 我们的     3.79 ms",
        "norm_first=False: 4.76837158203125e-07",
        "{'sentence-transformers': '6.2.0', 'tokenizers': '0.23.3', 'torch': '2.13.0+cpu'}",
    ]
    for line in clean:
        assert not english_words(line), (line, english_words(line))
    assert english_words("CPU · amp=off  compile=False") and not english_words("CPU · amp=off  compile=False",
                                                                                 {"amp", "compile"})
    # A library's message is allowed when the lesson explains it in Chinese; a Chinese label before it is checked.
    cell = {"cell_type": "code", "metadata": {}, "source": "",
            "outputs": [{"output_type": "stream", "name": "stdout",
                         "text": "ValueError: sequence of length 20 is longer than the positional table\n"}]}
    notebook = {"cells": [cell]}
    assert problems_in(notebook, "nb") == ["nb, cell 0: the library's message 'ValueError: sequence of length 20 "
                                           "is longer than the positional table' has no Chinese explanation after it"]
    cell["outputs"][0]["text"] += "位置表只有 16 行：截短输入，或用更大的 max_len 构建模型。\n"
    assert problems_in(notebook, "nb") == []
    cell["metadata"]["tags"] = [DATA_TAG]
    cell["outputs"][0]["text"] = "Could I use your phone?\n"
    assert problems_in(notebook, "nb") == []
    cell["metadata"]["tags"] = []
    assert problems_in(notebook, "nb") == ["nb, cell 0: Could, use, your, phone in 'Could I use your phone?'"]


def test_data_lines_in_each_language():
    """The loaders' describe() stays English (course_utils has no language layer); course_lab says it in Chinese."""
    from course_lab.data_text import describe
    from course_utils.data.datasets import DataSource, Examples, Text
    from course_utils.data.translation import CREDIT, Pairs

    rows = Examples([("good", 1), ("bad", 0), ("fine", 1)], "SST-2", "dev", DataSource("data_dir", "/d/sst2/dev.tsv"))
    assert describe(rows, "en") == rows.describe()
    assert describe(rows, "zh") == "SST-2 开发集：3 个样本（负面 1，正面 2），来自数据目录：/d/sst2/dev.tsv。"
    sample = Examples([("good", 1)], "SST-2 (sample)", "train",
                      DataSource("sample", "samples/sentiment_en.tsv", "split 'train': every 5th row is held out"))
    assert describe(sample, "zh").startswith("SST-2 训练集：1 个样本（正面 1），来自课程附带的小样本："
                                             "samples/sentiment_en.tsv（训练集：每 5 行留出一行）。这不是完整的数据集")
    assert describe(sample, "zh").endswith("。") and "。。" not in describe(sample, "zh")
    text = Text("abca", "tiny-shakespeare (sample)",
                DataSource("sample", "samples/prose_en.txt", "original prose, CC0"))
    assert describe(text, "zh").startswith("tiny-shakespeare：4 个字符，其中不同的 3 个，来自课程附带的小样本："
                                           "samples/prose_en.txt（课程自写的英文文本，CC0）。这不是完整的数据集")
    pairs = Pairs([("Hi.", "你好。"), ("Hi.", "嗨。")], "Tatoeba cmn-eng",
                  DataSource("data_dir", "/d/cmn.txt (2 columns)", f"sha256 = the course's copy; {CREDIT}"))
    line = describe(pairs, "zh")
    assert line.startswith("Tatoeba cmn-eng：2 个句对，其中不同的英文句子 1 个，来自数据目录：/d/cmn.txt（2 列）")
    for zh in (describe(rows, "zh"), describe(text, "zh"), line):
        assert not english_words(zh), zh
    assert english_words(rows.describe()) and english_words(pairs.describe())
