"""Hostile rerun for issue 24, classes 2-7: the rows of ``reviews/turn3/reliability.md``'s "25 worst" table and
new cases of the same classes, each run and classified by what actually happened:

* ``OK``: a legitimate call returned a finite result that passes the case's own check;
* ``clear``: a wrong call raised a ValueError / TypeError (or subclass) from course code whose message says what to
  do (the case's ``says`` pattern, when it has one, must match: a wrong diagnosis is *cryptic*);
* ``silent``: a wrong call returned, or a legitimate call returned a wrong result;
* ``cryptic``: an error raised inside a library (torch, sacreBLEU...) or with the wrong diagnosis;
* ``refused``: a legitimate call was refused;  ``crash``: any other exception;  ``NaN``: a non-finite result;
* ``hang``: no answer within ``LIMIT_S`` seconds (SIGALRM).

Rows of class 1 (exercise checks, another issue) run too but are reported apart. Usage::

    PYTHONPATH=. COURSE_DATA_DIR=... python tools/hostile_rerun.py [-v]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import math
import os
import re
import signal
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import course_utils as cu
from course_utils import checkpoint as ckpt_mod
from course_utils.data import registry
from course_utils.data.datasets import Examples, train_test_split
from course_utils.data.registry import Resource
from course_utils.decoding import beam_search, generate, greedy_decode
from course_utils.layers import PositionwiseFeedForward
from course_utils.masks import causal_mask, padding_mask, to_torch_attn_mask
from course_utils.sampling import sample_next, sampling_distribution
from course_utils.tokenizers import Tokenizer, WordTokenizer, pad_batch
from course_utils.wordpiece import WordPieceTokenizer

LIMIT_S = 300  # generous: the shared 2-core machine runs at a load of 10-15
OUTCOMES = ("OK", "clear", "silent", "cryptic", "refused", "crash", "NaN", "hang")
COURSE = ("/course_utils/", "/course_lab/")
ERROR = object()  # a case whose right outcome is a refusal


class Hang(BaseException):  # BaseException: a student-code `except Exception` cannot swallow it
    pass


@dataclass
class Case:
    cls: str  # "1".."7": the class
    row: str  # "R3" for the review's row 3, "N12" for a new case
    what: str
    run: Callable[[], Any]
    expect: Any = ERROR  # ERROR, or a predicate the result must satisfy
    says: str = ""  # regex the error message must match (the right diagnosis)


def _finite(x) -> bool:
    return not isinstance(x, torch.Tensor) or not x.is_floating_point() or bool(torch.isfinite(x).all())


def classify(case: Case) -> tuple[str, str]:
    """Run ``case`` under a time limit; return (outcome, detail)."""
    def alarm(*_):
        raise Hang()
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT_S)
    try:
        result = case.run()
    except Hang:
        return "hang", f"> {LIMIT_S} s"
    except Exception as err:  # noqa: BLE001 - every exception is classified
        where = traceback.extract_tb(err.__traceback__)[-1].filename.replace(os.sep, "/")
        msg = f"{type(err).__name__}: {err}".replace("\n", " ")
        own = type(err).__module__.startswith(("course_utils", "course_lab"))  # e.g. ChecksumMismatch
        if not (own or isinstance(err, (ValueError, TypeError, FileNotFoundError))):
            return "crash", msg
        if not any(part in where for part in COURSE):
            return "cryptic", f"{msg} (raised in {where})"
        if case.expect is not ERROR:
            return "refused", msg
        if case.says and not re.search(case.says, str(err), re.S):
            return "cryptic", f"{msg} (expected /{case.says}/)"
        return "clear", msg
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if case.expect is ERROR:
        return "silent", f"returned {str(result)[:80]!r}"
    if not _finite(result):
        return "NaN", "non-finite result"
    return ("OK", "") if case.expect(result) else ("silent", f"wrong result {str(result)[:80]!r}")


# ------------------------------------------------------------------------------------------------- fixtures
torch.manual_seed(0)
TMP = Path(tempfile.mkdtemp(prefix="hostile24-"))
X = torch.randn(2, 5, 8)
MHA = cu.MultiHeadAttention(8, 2).eval()
GPT = cu.GPT(20, max_len=16, n_layers=1, n_heads=2, d_model=8, dropout=0.0).eval()
S2S = cu.Transformer(30, 30, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16, max_len=40,
                     dropout=0.0).eval()
CLS = cu.EncoderClassifier(20, d_model=8, n_heads=2, n_layers=1, d_ff=16, n_classes=2, dropout=0.0).eval()
MLM = cu.MaskedLM(20, d_model=8, n_heads=2, n_layers=1, d_ff=16).eval()
IDS = torch.tensor([[1, 2, 3, 0, 0], [0, 0, 4, 5, 6]])  # one right-padded, one left-padded row
CAUSAL = causal_mask(5)
PM = padding_mask(IDS)  # (B, 1, 1, T)


torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1)  # import torch.optim's lazy modules before timing


def close(a, b, tol=1e-5) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=tol, rtol=tol))


def mha(mask, x=X):
    with torch.no_grad():
        return MHA(x, mask=mask)


def mha_equals(mask, ref_kwargs, x=X):
    return lambda: close(mha(mask, x), MHA(x, **ref_kwargs).detach())


def gpt_cache(first, second, **kw):
    def run():
        cache = cu.KVCache()
        with torch.no_grad():
            a = GPT(first, cache=cache)
            b = GPT(second, cache=cache, **kw)
            full = GPT(torch.cat([first, second], dim=1))
        return close(torch.cat([a, b], 1), full, 1e-4)
    return run


def decode_twice():
    memory, src_mask = S2S.encode(torch.randint(1, 30, (2, 6)))
    cache = cu.KVCache()
    S2S.decode(torch.ones(2, 3, dtype=torch.long), memory, src_mask, cache)
    return S2S.decode(torch.ones(2, 3, dtype=torch.long), memory, src_mask, cache)


def reorder(index):
    cache = cu.KVCache()
    with torch.no_grad():
        GPT(torch.randint(0, 20, (2, 3)), cache=cache)
    cache.reorder(index)
    return cache.batch_size


def wordpiece_config(cfg):
    folder = TMP / f"wp{abs(hash(json.dumps(cfg)))}"
    folder.mkdir(exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]))
    (folder / "tokenizer_config.json").write_text(json.dumps(cfg))
    return WordPieceTokenizer.from_pretrained(folder)


def tiny_model():
    return torch.nn.Linear(2, 2)


def save(**kw):
    m = kw.pop("model", None) or tiny_model()
    return ckpt_mod.save_checkpoint(TMP / "c.pt", m, **kw)


def load(map_location=None, restore_rng=False, path=None):
    m = tiny_model()
    path = path or ckpt_mod.save_checkpoint(TMP / "ok.pt", m)
    return ckpt_mod.load_checkpoint(path, m, map_location=map_location, restore_rng=restore_rng)["step"] == 0


def no_rng_file():
    m = tiny_model()
    path = TMP / "norng.pt"
    torch.save({"format": ckpt_mod.FORMAT, "step": 0, "model": m.state_dict(), "optimizer": None,
                "scheduler": None, "history": None, "extra": {}}, path)
    return path


def split(n, test_size=0.2):
    train, test = train_test_split(Examples([(f"t{i}", i % 2) for i in range(n)]), test_size)
    return len(train), len(test)


def widget(d):
    from course_lab.lessons import l06_ffn_norm
    w = l06_ffn_norm.build_layernorm_widget(d=d)
    return all(math.isfinite(v) for v in (w.state["in_mean"], w.state["in_std"], w.state["out_std"]))


def sample_greedy(tau):
    logits = torch.randn(4, 30) * 3
    return torch.equal(sample_next(logits, tau), logits.argmax(-1, keepdim=True))


def translate(method):
    from course_utils.decoding import translate as decode_texts
    texts = ["go away " * 10, "come here", "i see"]
    src = WordTokenizer.from_texts(texts)
    tgt = WordTokenizer.from_texts(["走 开", "来 这 里"])
    model = cu.Transformer(src.vocab_size, tgt.vocab_size, d_model=8, n_heads=2, n_encoder_layers=1,
                           n_decoder_layers=1, d_ff=16, max_len=40)  # 2 × 20 source tokens + 10 > 40
    out = decode_texts(model, texts, src, tgt, method=method, beam_size=2)
    return len(out) == 3 and all(isinstance(s, str) for s in out)


def cmn(lines: list[str], n_course: int):
    """A data folder whose cmn.txt holds ``lines``; the registry's copy is ``n_course`` known rows."""
    from course_utils.data import translation
    root = TMP / f"cmn{len(lines)}-{abs(hash(tuple(lines)))}"
    (root / "tatoeba_cmn").mkdir(parents=True, exist_ok=True)
    text = "".join(f"{line}\n" for line in lines)
    (root / "tatoeba_cmn" / "cmn.txt").write_text(text, encoding="utf-8")
    full = "".join(f"{line}\n" for line in FULL_CMN).encode("utf-8")
    res = Resource("tatoeba-cmn", "tatoeba_cmn/cmn.txt", len(full), hashlib.sha256(full).hexdigest(), "t", "s",
                   rows=n_course)
    saved = dict(registry.REGISTRY)
    registry.REGISTRY["tatoeba-cmn"] = res
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pairs = translation.load_tatoeba_cmn(root, simplified=False, download=False)
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved)
    return len(pairs), [str(w.message) for w in caught]


FULL_CMN = [f"Sentence number {i}.\t第{i}句。" for i in range(40)]


def warned_counts(n, n_course):
    def check(result):
        got, messages = result
        return got == n and any(f"{n:,} pairs" in m and f"{n_course:,}" in m for m in messages)
    return check


def corpus_bleu(h, r):
    from course_utils.data.translation import corpus_bleu as bleu
    return bleu(h, r)


def class1_rows() -> list[Case]:
    """The review's class-1 rows (exercise checks: another issue), run as they were reported."""
    from course_lab.lessons import l00_welcome, l05_masking
    from course_lab.lessons.l09_classifier import checks

    def mutating(ids, pad_id):
        ids.zero_()
        return torch.eye(ids.shape[1], dtype=torch.bool)[None, None].expand(ids.shape[0], 1, -1, -1)

    def spin(ids, pad_id):
        while True:
            pass
    def constant_loss_as_str(train, dev):  # the right loss, returned as a string
        return str(-sum(math.log(train.count(y) / len(train)) for y in dev) / len(dev))
    refused = lambda r: r is False  # noqa: E731 - an exercise check refuses by returning False
    return [
        Case("1", "R1", "l05.check_left_padded_mask(fn mutating ids)", lambda: l05_masking.check_left_padded_mask(
            mutating), refused),
        Case("1", "R2", "check_constant_loss(str)", lambda: checks.check_constant_loss(
            constant_loss_as_str), refused),
        Case("1", "R15", "exercise check fed while True", lambda: l05_masking.check_left_padded_mask(spin), refused),
        Case("1", "R24", "l00.check_attention_memory(tensor)", lambda: l00_welcome.check_attention_memory(
            lambda b, h, t: torch.tensor([b * h * t * t * 4, 0])), refused),
    ]


def _hostile_students() -> dict[str, Callable]:
    """Answers no check may accept: each stands for a class of student mistakes, not for one exercise."""
    def spin(*args, **kwargs):
        while True:
            pass

    def raises(*args, **kwargs):
        raise RuntimeError("the student's own bug")

    def mutates(*args, **kwargs):
        for value in [*args, *kwargs.values()]:
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(t, torch.Tensor) and not t.requires_grad:
                    t.zero_()
        return args[0] if args else None

    return {"while True": spin, "returns a str": lambda *a, **k: "0.5", "returns None": lambda *a, **k: None,
            "raises": raises, "zeroes its inputs in place": mutates,
            "returns NaN": lambda *a, **k: torch.tensor(float("nan"))}


def class1_sweep() -> list[Case]:
    """Every ``check_*`` of every lesson, fed every hostile answer: each must be refused (the check returns False,
    prints why, and neither hangs nor raises). New checks join the sweep by their name alone."""
    import contextlib
    import importlib
    import pkgutil

    import course_lab.exercises as ex
    import course_lab.lessons as lessons

    checks = {}
    for info in pkgutil.walk_packages(lessons.__path__, lessons.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, fn in vars(module).items():
            if name.startswith("check_") and callable(fn) and getattr(fn, "__module__", "") == module.__name__:
                checks[f"{info.name.rsplit('lessons.', 1)[1]}.{name}"] = fn

    def run_check(check, student):
        saved, ex.TIME_LIMIT_S = ex.TIME_LIMIT_S, 0.2  # a spinning answer costs 0.2 s, not twenty
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                return check(student)
        finally:
            ex.TIME_LIMIT_S = saved

    refused = lambda r: r is False  # noqa: E731
    return [Case("1", f"N1{i:03d}", f"{name}({what})", lambda c=check, s=student: run_check(c, s), refused)
            for i, ((name, check), (what, student)) in enumerate(
                (pair, hostile) for pair in sorted(checks.items()) for hostile in _hostile_students().items())]


def cases() -> list[Case]:
    x4 = torch.randn(4, 4, 8)
    pm4 = torch.arange(4) < torch.tensor([4, 3, 2, 1])[:, None]  # a (B, T) padding mask with B == T
    left = padding_mask(torch.tensor([[0, 0, 1, 2, 3], [0, 0, 0, 0, 0]]))  # an all-padding row too
    p1, p2 = torch.randint(0, 20, (1, 4)), torch.randint(0, 20, (1, 3))
    return [
        # ---- class 2: masks that mean the opposite
        Case("2", "R3", "mha(x, mask=~causal_mask(5))", lambda: mha(~CAUSAL), says="inverted.*~mask"),
        Case("2", "R6", "mha(x(4,4,8), mask=pm(4,4)) with B == T", lambda: mha(pm4, x4), says="key_keep_mask"),
        Case("2", "N1", "mha(x, mask=causal) = is_causal", mha_equals(CAUSAL, {"is_causal": True}), bool),
        Case("2", "N2", "mha(x, mask=padding_mask) (left and right padding)", lambda: mha(PM), _finite),
        Case("2", "N3", "mha(x, mask=causal & left padding): pad queries get zero rows (out = out_proj bias)",
             lambda: mha(CAUSAL & left), lambda out: close(out[0, :2], MHA.out_proj.bias.detach().expand(2, 8))
             and close(out[1], MHA.out_proj.bias.detach().expand(5, 8))),
        Case("2", "N4", "mha(x, mask=~(causal & padding))", lambda: mha(~(CAUSAL & PM)), says="inverted"),
        Case("2", "N5", "mha(x, mask=~causal[None, None])", lambda: mha(~CAUSAL[None, None]), says="inverted"),
        Case("2", "N6", "mha(x, mask=to_torch_attn_mask(causal))", lambda: mha(to_torch_attn_mask(CAUSAL)),
             says="inverted"),
        Case("2", "N7", "mha(x, mask=~causal expanded to (B, h, T, T))",
             lambda: mha((~CAUSAL).expand(2, 2, 5, 5)), says="inverted"),
        Case("2", "N8", "Encoder(x, ~causal)", lambda: cu.Encoder(1, 8, 2, 16).eval()(X, ~CAUSAL), says="inverted"),
        Case("2", "N9", "mha(x(3,3,8), mask=causal_mask(3)) with B == T",
             mha_equals(causal_mask(3), {"is_causal": True}, torch.randn(3, 3, 8)), bool),
        Case("2", "N10", "mha(x(4,4,8), mask=all-True (4, 4))",
             mha_equals(torch.ones(4, 4, dtype=torch.bool), {}, x4), bool),
        Case("2", "N11", "mha(x, mask=eye(5)) (each token sees itself only)",
             lambda: mha(torch.eye(5, dtype=torch.bool)), _finite),
        Case("2", "N12", "mha(x(4,4,8), mask=~causal(4)) with B == T", lambda: mha(~causal_mask(4), x4),
             says="ambiguous|inverted"),
        Case("2", "N13", "mha(x, mask=pm(2,5)[None, None]) read as keys", lambda: mha(PM[:, 0, 0][:, None, None]),
             _finite),
        # ---- class 3: KV cache continued by another prompt
        Case("3", "R5", "gpt(p1, cache=c); gpt(p2, cache=c)", gpt_cache(p1, p2), says="fresh KVCache|extend=True"),
        Case("3", "N14", "gpt(p1, cache=c); gpt(next token, cache=c) = full", gpt_cache(p1, p2[:, :1]), bool),
        Case("3", "N15", "gpt(p1, c); gpt(3 tokens, c, extend=True) = full", gpt_cache(p1, p2, extend=True), bool),
        Case("3", "N16", "gpt(..., extend='yes')", gpt_cache(p1, p2, extend="yes"), says="True or False"),
        Case("3", "N17", "Transformer.decode: 3 tokens into a non-empty cache", decode_twice, says="extend=True"),
        Case("3", "N18", "cache.reorder(tensor([5])) for a batch of 2", lambda: reorder(torch.tensor([5])),
             says="outside the cached batch"),
        Case("3", "N19", "cache.reorder([0, 1]) (a list)", lambda: reorder([0, 1]), says="1-D torch.long"),
        Case("3", "N20", "cache.reorder(tensor([1, 0]))", lambda: reorder(torch.tensor([1, 0])), lambda r: r == 2),
        # ---- class 4: inputs coerced instead of refused
        Case("4", "R7", "sinusoidal_encoding(4, 8, dtype=torch.int64)",
             lambda: cu.sinusoidal_encoding(4, 8, dtype=torch.int64), says="float dtype"),
        Case("4", "N21", "sinusoidal_encoding(dtype=torch.bool)",
             lambda: cu.sinusoidal_encoding(4, 8, dtype=torch.bool),
             says="float dtype"),
        Case("4", "N22", "sinusoidal_encoding(dtype='float32')", lambda: cu.sinusoidal_encoding(4, 8, dtype="float32"),
             says="torch.float32"),
        Case("4", "N23", "sinusoidal_encoding(dtype=torch.float16)",
             lambda: cu.sinusoidal_encoding(4, 8, dtype=torch.float16), lambda t: t.dtype == torch.float16),
        Case("4", "R8", "Tokenizer([1, 2])", lambda: Tokenizer([1, 2]), says="must be str"),
        Case("4", "N24", "Tokenizer(None)", lambda: Tokenizer(None), says="list of token strings"),
        Case("4", "N25", "Tokenizer('abc')", lambda: Tokenizer("abc"), says="list of token strings"),
        Case("4", "R9", "pad_batch([[1.5, 2], [3]])", lambda: pad_batch([[1.5, 2], [3]]), says="int"),
        Case("4", "R10", "pad_batch([[[1,2],[3,4]],[5]])", lambda: pad_batch([[[1, 2], [3, 4]], [5]]), says="flat"),
        Case("4", "N26", "pad_batch([[True, 2]])", lambda: pad_batch([[True, 2]]), says="int ids"),
        Case("4", "N27", "pad_batch(['ab', 'c'])", lambda: pad_batch(["ab", "c"]), says="tokenizer"),
        Case("4", "N28", "pad_batch([tensor([1., 2.])])", lambda: pad_batch([torch.tensor([1.0, 2.0])]), says="int"),
        Case("4", "N29", "pad_batch([[1, 2], [], tensor([3])])", lambda: pad_batch([[1, 2], [], torch.tensor([3])]),
             lambda t: t.tolist() == [[1, 2], [0, 0], [3, 0]]),
        Case("4", "R11", "WordPiece config do_lower_case: 'false'",
             lambda: wordpiece_config({"do_lower_case": "false"}),
             says="true or false"),
        Case("4", "N30", "WordPiece config tokenize_chinese_chars: 0",
             lambda: wordpiece_config({"tokenize_chinese_chars": 0}), says="true or false"),
        Case("4", "N31", "WordPiece config strip_accents: 'no'", lambda: wordpiece_config({"strip_accents": "no"}),
             says="true or false"),
        Case("4", "N32", "WordPiece config do_lower_case: false", lambda: wordpiece_config({"do_lower_case": False}),
             lambda t: t.lowercase is False),
        Case("4", "N33", "WordPiece config is a JSON list", lambda: wordpiece_config([1, 2]), says="JSON object"),
        Case("4", "N34", "WordTokenizer(tokens, lowercase='false')", lambda: WordTokenizer(["a"], lowercase="false"),
             says="True or False"),
        Case("4", "N35", "WordTokenizer.from_texts([1, 2])", lambda: WordTokenizer.from_texts([1, 2]),
             says="list of strings"),
        Case("4", "R12", "save_checkpoint(p, m, optimizer=m)", lambda: save(optimizer=tiny_model()),
             says="torch.optim.Optimizer"),
        Case("4", "N36", "save_checkpoint(p, m, scheduler=optimizer)",
             lambda: save(scheduler=torch.optim.SGD(tiny_model().parameters(), lr=0.1)), says="scheduler"),
        Case("4", "N37", "save_checkpoint(p, 123)", lambda: save(model=123), says="nn.Module"),
        Case("4", "N38", "save_checkpoint with a real optimizer",
             lambda: save(optimizer=torch.optim.SGD(tiny_model().parameters(), lr=0.1)), lambda p: p.is_file()),
        Case("4", "R13", "train_test_split(Examples([('a', 0)]), 0.2)", lambda: split(1), says="at least 2"),
        Case("4", "N39", "train_test_split of 0 examples", lambda: split(0), says="at least 2"),
        Case("4", "N40", "train_test_split(2 examples, 0.9)", lambda: split(2, 0.9), lambda r: r == (1, 1)),
        Case("4", "N41", "train_test_split(test_size=True)", lambda: split(5, True), says="fraction"),
        Case("4", "R16", "l06.build_layernorm_widget(d=0)", lambda: widget(0), says=">= 2"),
        Case("4", "N42", "l06.build_layernorm_widget(d=1)", lambda: widget(1), says=">= 2"),
        Case("4", "N43", "l06.build_layernorm_widget(d=-4)", lambda: widget(-4), says=">= 2"),
        Case("4", "N44", "l06.build_layernorm_widget(d=2)", lambda: widget(2), bool),
        # ---- class 5: wrong diagnoses
        Case("5", "R17", "load_checkpoint(map_location='cuda') on a CPU machine", lambda: load("cuda"),
             says="^(?!.*(corrupt|delete)).*not available.*map_location=None"),
        Case("5", "N45", "load_checkpoint(map_location=torch.device('cuda:0'))",
             lambda: load(torch.device("cuda:0")), says="^(?!.*corrupt).*not available"),
        Case("5", "N46", "load_checkpoint(map_location='meta')", lambda: load("meta"),
             says="^(?!.*corrupt).*not available"),
        Case("5", "N47", "load_checkpoint(map_location='cpu')", lambda: load("cpu"), bool),
        Case("5", "R18", "sample_next(logits, temperature=1e-45) = argmax", lambda: sample_greedy(1e-45), bool),
        Case("5", "N48", "sample_next(logits, temperature=1e-30) = argmax", lambda: sample_greedy(1e-30), bool),
        Case("5", "N49", "sampling_distribution(logits * 1e30, 1e-45) sums to 1",
             lambda: sampling_distribution(torch.randn(3, 9) * 1e30, 1e-45).sum(-1),
             lambda s: close(s, torch.ones(3))),
        Case("5", "N50", "generate(gpt, ids, 4, temperature=1e-45)",
             lambda: generate(GPT, torch.zeros(1, 2, dtype=torch.long), 4, temperature=1e-45),
             lambda t: torch.equal(t, generate(GPT, torch.zeros(1, 2, dtype=torch.long), 4, temperature=0.0))),
        Case("5", "N66", "sampling_distribution(logits (2, 0))", lambda: sampling_distribution(torch.zeros(2, 0)),
             says="V >= 1"),
        Case("5", "R19", "decoding.translate(model max_len=40, 'go away ' * 10), greedy",
             lambda: translate("greedy"), bool),
        Case("5", "N51", "decoding.translate(..., method='beam')", lambda: translate("beam"), bool),
        # ---- class 6: data that changed silently
        Case("6", "R4", "load_tatoeba_cmn on a cmn.txt cut at a line boundary", lambda: cmn(FULL_CMN[:25], 40),
             warned_counts(25, 40)),
        Case("6", "N52", "load_tatoeba_cmn on an edited cmn.txt (same rows)",
             lambda: cmn(FULL_CMN[:-1] + ["Edited.\t改了。"], 40), warned_counts(40, 40)),
        Case("6", "N53", "load_tatoeba_cmn on the course's copy: no warning", lambda: cmn(FULL_CMN, 40),
             lambda r: r == (40, [])),
        # ---- class 7: raw library errors
        Case("7", "R20a", "gpt(ids.short())", lambda: GPT(torch.ones(1, 3).short()), says=r"\.long\(\)"),
        Case("7", "R20b", "Transformer(uint8 src)", lambda: S2S(torch.ones(1, 3, dtype=torch.uint8),
                                                                torch.ones(1, 2, dtype=torch.long)), says=r"\.long"),
        Case("7", "R20c", "EncoderClassifier(uint8)", lambda: CLS(torch.ones(1, 3, dtype=torch.uint8)),
             says=r"\.long"),
        Case("7", "R20d", "TokenEmbedding(uint8)",
             lambda: cu.TokenEmbedding(10, 8)(torch.ones(1, 3, dtype=torch.uint8)),
             says=r"\.long"),
        Case("7", "N54", "MaskedLM(int8)", lambda: MLM(torch.ones(1, 3, dtype=torch.int8)), says=r"\.long"),
        Case("7", "N55", "gpt(int32 ids)", lambda: GPT(torch.ones(1, 3, dtype=torch.int32)),
             lambda t: t.shape == (1, 3, 20)),
        Case("7", "R21", "PositionwiseFeedForward(8,16)(randn(2,3,7))",
             lambda: PositionwiseFeedForward(8, 16)(torch.randn(2, 3, 7)), says="d_model=8"),
        Case("7", "N56", "PositionwiseFeedForward(8,16)(long input)",
             lambda: PositionwiseFeedForward(8, 16)(torch.ones(2, 3, 8, dtype=torch.long)), says="floating-point"),
        Case("7", "R22", "load_checkpoint(restore_rng=True) on a file without rng",
             lambda: load(restore_rng=True, path=no_rng_file()), says="no RNG state"),
        Case("7", "R23a", "corpus_bleu([], [])", lambda: corpus_bleu([], []), says="no sentences"),
        Case("7", "R23b", "corpus_bleu(str, [[str]])", lambda: corpus_bleu("我们走吧。", [["我们走吧。"]]),
             says="must be a list"),
        Case("7", "N57", "corpus_bleu([1], [['a']])", lambda: corpus_bleu([1], [["a"]]), says="must be a str"),
        Case("7", "N58", "corpus_bleu(['我们走吧。'], [['我们走吧。']]) = 100",
             lambda: corpus_bleu(["我们走吧。"], [["我们走吧。"]]).score, lambda s: abs(s - 100) < 1e-6),
        Case("7", "N60", "tokenizer.decode(None)", lambda: WordTokenizer(["a"]).decode(None), says="list or 1-D"),
        Case("7", "N61", "tokenizer.decode(tensor(3)) (0-d)", lambda: WordTokenizer(["a"]).decode(torch.tensor(3)),
             says="1-D"),
        Case("7", "N62", "greedy_decode(gpt, ...)",
             lambda: greedy_decode(GPT, torch.ones(1, 3, dtype=torch.long), 4, 1, 2), says="generate"),
        Case("7", "N63", "generate(transformer, ...)", lambda: generate(S2S, torch.ones(1, 3, dtype=torch.long), 2),
             says="greedy_decode"),
        Case("7", "N64", "generate(EncoderClassifier, ...)",
             lambda: generate(CLS, torch.ones(1, 3, dtype=torch.long), 2), says="decoder-only"),
        Case("7", "N65", "beam_search(gpt, ...)",
             lambda: beam_search(GPT, torch.ones(1, 3, dtype=torch.long), max_new_tokens=4, bos_id=1, eos_id=2),
             says="generate"),
    ]


def run(include_class1: bool = True, verbose: bool = False) -> tuple[dict, list]:
    """Run every case; return (counts per class group, rows)."""
    all_cases = cases() + (class1_rows() + class1_sweep() if include_class1 else [])
    rows = []
    for case in all_cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome, detail = classify(case)
        rows.append((case, outcome, detail))
        if verbose:
            print(f"{case.row:>5} c{case.cls} {outcome:8} {case.what} | {detail[:150]}")
    counts = {group: collections.Counter(o for c, o, _ in rows if (c.cls == "1") == (group == "class 1"))
              for group in ("classes 2-7", "class 1")}
    return counts, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    parser.add_argument("--no-class1", action="store_true", help="skip the exercise-check rows")
    args = parser.parse_args()
    counts, rows = run(not args.no_class1, args.verbose)
    for group, counter in counts.items():
        review = sum(1 for c, _, _ in rows if c.row.startswith("R") and (c.cls == "1") == (group == "class 1"))
        new = sum(1 for c, _, _ in rows if c.row.startswith("N") and (c.cls == "1") == (group == "class 1"))
        print(f"{group}: {review} review rows + {new} new cases: "
              + ", ".join(f"{o} {counter.get(o, 0)}" for o in OUTCOMES))
    bad = [(c, o, d) for c, o, d in rows if c.cls != "1" and o not in ("OK", "clear")]
    for c, o, d in bad:
        print(f"  {c.row} {o}: {c.what}: {d[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
