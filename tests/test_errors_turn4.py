"""The last cryptic errors (issue 39, section 2; ../shared/reviews/turn4/reliability.md): each of the 17 calls that
ended in a raw error, and the three weak ones, now gets one sentence that says what is wrong and what to do."""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest
import torch

from course_utils import losses, masks
from course_utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from course_utils.tokenizers import Tokenizer


@pytest.fixture
def model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


# --- 1-2: the lesson 10 widget's own keyword, max_len

@pytest.fixture(scope="module")
def l10_parts():
    pytest.importorskip("num2words")
    from course_lab.lessons import l10_seq2seq as l10
    from course_utils.models import Transformer

    src_tok, tgt_tok = l10.make_tokenizers()
    torch.manual_seed(0)
    tiny = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2, n_encoder_layers=1,
                       n_decoder_layers=1, d_ff=32, dropout=0.0, max_len=64).eval()
    return l10, tiny, src_tok, tgt_tok


@pytest.mark.parametrize("max_len, said", [(200, r"max_len=200: .* at most the model's max_len=64"),
                                           (0, r"max_len=0: .* at least 1")])
def test_translation_widget_names_its_own_keyword(l10_parts, max_len, said):
    l10, tiny, src_tok, tgt_tok = l10_parts
    with pytest.raises(ValueError, match=said) as info:
        l10.build_translation_widget(tiny, src_tok, tgt_tok, max_len=max_len, beam_size=1)
    assert "max_new_tokens" not in str(info.value)          # a keyword the widget does not take


# --- 14-15: what is typed into its text box

@pytest.mark.parametrize("typed, said", [("²", "type a whole number such as 20305"),
                                         ("١٢٣", "type a whole number such as 20305"),
                                         ("9" * 5000, "too large: type at most 999,999,999")],
                         ids=["superscript", "arabic-indic", "5000-digits"])
def test_translation_widget_typed_numbers(l10_parts, typed, said):
    l10 = l10_parts[0]
    with pytest.raises(ValueError, match=said) as info:
        l10._parse_number(typed, 1)
    assert len(str(info.value)) < 200                       # one sentence, not 5,000 digits
    assert l10._parse_number(" 20,305 ", 1) == 20305


# --- 3-4, 5-7: checkpoints

def test_foreign_pickle_is_not_a_checkpoint(tmp_path, model):
    p = tmp_path / "c.pt"
    p.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="not a file written by save_checkpoint or torch.save") as info:
        load_checkpoint(p, model)
    assert "delete" not in str(info.value)


def test_checkpoint_model_entry_not_a_state_dict(tmp_path, model):
    p = tmp_path / "c.pt"
    torch.save({"format": "course_utils.checkpoint/1", "model": [1, 2]}, p)
    with pytest.raises(CheckpointError, match=r"its 'model' entry is a list, not a state_dict"):
        load_checkpoint(p, model)


def test_checkpoint_path_through_a_file(tmp_path, model):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match=r"afile is a file, not a folder: choose another checkpoint path"):
        save_checkpoint(afile / "c.pt", model)
    with pytest.raises(ValueError, match=r"afile is a file, not a folder"):
        save_checkpoint(afile / "sub" / "c.pt", model)


def test_fit_checkpoint_path_through_a_file(tmp_path, model):
    from course_utils.train import fit

    notes = tmp_path / "notes.py"
    notes.write_text("x")
    with pytest.raises(ValueError, match=r"notes.py is a file, not a folder"):
        fit(model, lambda step: torch.randn(4, 3), lambda m, x: m(x).pow(2).mean(), steps=1,
            checkpoint_path=notes / "x.pt", checkpoint_every=1, progress=False)


@pytest.mark.parametrize("bad", [123, 1.5, None, ["a.pt"]])
def test_checkpoint_path_of_the_wrong_type(bad, model):
    with pytest.raises(TypeError, match=r"checkpoint path must be a str or pathlib.Path, got "):
        save_checkpoint(bad, model)
    with pytest.raises(TypeError, match=r"checkpoint path must be a str or pathlib.Path"):
        load_checkpoint(bad, model)


def test_read_only_folder_names_the_checkpoint(tmp_path, model, monkeypatch):
    from course_utils import safe_files

    def read_only(*args, dir=None, **kwargs):               # root writes anywhere: simulate a read-only mount
        raise OSError(30, "Read-only file system", str(Path(dir) / ".c.pt.1.x.tmp"))

    monkeypatch.setattr(safe_files.tempfile, "mkstemp", read_only)
    with pytest.raises(OSError, match=r"cannot write .*c\.pt: the folder .* is not writable \(Read-only file "
                                      r"system\): choose a checkpoint path in a folder you can write") as info:
        save_checkpoint(tmp_path / "c.pt", model)
    assert ".tmp" not in str(info.value)


# --- 8: masks that do not broadcast

def test_combine_masks_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"masks of shapes \(2, 3\) and \(4, 5\) do not broadcast"):
        masks.combine_masks(torch.ones(2, 3, dtype=torch.bool), torch.ones(4, 5, dtype=torch.bool))
    assert masks.combine_masks(torch.ones(2, 1, 3, dtype=torch.bool), torch.ones(3, 3, dtype=torch.bool)).shape == (
        2, 3, 3)


# --- 9: targets on another device

def test_targets_on_another_device():
    logits, targets = torch.randn(4, 5), torch.tensor([0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"targets are on meta but logits on cpu: move them with "
                                         r"targets.to\(logits.device\)"):
        losses.cross_entropy(logits, targets.to("meta"))
    with pytest.raises(ValueError, match=r"targets are on meta but logits on cpu"):
        losses.sequence_nll(logits[None], targets[None].to("meta"))


# --- 10-11: tokenizer dicts; weak 3: a directory where a file belongs

def test_tokenizer_dict_without_tokens():
    with pytest.raises(ValueError, match=r"not a saved tokenizer: the dict has no 'tokens' list"):
        Tokenizer.from_dict({"type": "CharTokenizer"})
    with pytest.raises(ValueError, match=r"'tokens' must be a list of strings"):
        Tokenizer.from_dict({"type": "CharTokenizer", "tokens": "abc"})


def test_tokenizer_dict_with_a_foreign_option():
    with pytest.raises(ValueError, match=r"CharTokenizer takes no option 'lowercase' \((WordPieceTokenizer and )?"
                                         r"WordTokenizer do(es)?\)"):
        Tokenizer.from_dict({"type": "CharTokenizer", "tokens": ["a"], "lowercase": True})
    with pytest.raises(ValueError, match=r"WordTokenizer takes no option 'colour'"):
        Tokenizer.from_dict({"type": "WordTokenizer", "tokens": ["a"], "colour": 1})


def test_tokenizer_files_that_are_folders(tmp_path):
    from course_utils.tokenizers import CharTokenizer
    from course_utils.wordpiece import load_vocab

    tok = CharTokenizer(["a", "b"])
    with pytest.raises(ValueError, match=r"is a folder: pass a file name such as .*tokenizer.json"):
        tok.save(tmp_path)
    with pytest.raises(ValueError, match=r"is a folder: pass the tokenizer file .*tokenizer.json"):
        Tokenizer.load(tmp_path)
    with pytest.raises(ValueError, match=r"is a folder: pass the vocabulary file .*vocab.txt"):
        load_vocab(tmp_path)


# --- 12: ~user in COURSE_DATA_DIR

def test_course_data_dir_with_an_unknown_user(monkeypatch):
    from course_utils.data import registry

    monkeypatch.setenv("COURSE_DATA_DIR", "~nosuchuser4242/data")
    with pytest.raises(ValueError, match=r"COURSE_DATA_DIR='~nosuchuser4242/data': there is no user "
                                         r"'nosuchuser4242' .*give an absolute path"):
        registry.data_dir()
    monkeypatch.setenv("COURSE_DATA_DIR", "~/some/data")                 # the user's own home is expanded
    assert registry.data_dir() == Path.home() / "some" / "data"


# --- 13: a slider value not on the slider

def test_cost_widget_value_not_on_the_slider():
    from course_lab.lessons import l14_fast as l14

    with pytest.raises(ValueError, match=r"seq_len=1000 is not one of the slider's values \(128, 256, .*16384\)"):
        l14.build_cost_widget(seq_len=1000)
    with pytest.raises(ValueError, match=r"value='int8' is not one of the options"):
        l14.build_cost_widget(dtype="int8")


# --- 16-17: the exercise checks

def test_check_fed_a_tensor(capsys):
    from course_lab.lessons import l00_welcome as l00

    assert l00.check_attention_memory(lambda b, h, t: torch.tensor([b * h * t * t * 4, 0])) is False
    out = capsys.readouterr().out
    assert "expected one whole number, got a tensor of shape (2,)" in out
    assert "ambiguous" not in out and "Could not check" not in out


@pytest.mark.parametrize("how", [lambda: sys.exit(), lambda: sys.exit(3), lambda: exit(), lambda: quit()])
def test_answer_that_calls_exit(capsys, how):
    from course_lab.lessons import l14_fast as l14

    def fn(*args, **kwargs):
        how()

    assert l14.check_cross_attention_flops(fn) is False
    assert "Your function called exit(): return the value instead" in capsys.readouterr().out


# --- weak 2: an unreadable data file

def test_unreadable_data_file(monkeypatch):
    from course_utils import data, safe_files

    def no_permission(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(safe_files, "open", no_permission, raising=False)
    monkeypatch.setattr(safe_files, "_SHA256_CACHE", {})
    if not (data.data_dir() / "chnsenticorp").is_dir():
        pytest.skip("the ChnSentiCorp file is not in COURSE_DATA_DIR")
    with pytest.raises(PermissionError, match=r"cannot read .*ChnSentiCorp_htl_all.csv: permission denied; "
                                              r"make it readable \(chmod u\+r"):
        data.fetch("chnsenticorp", download=False)


def test_unreadable_file_hash(tmp_path, monkeypatch):
    from course_utils import safe_files

    p = tmp_path / "f.bin"
    p.write_bytes(b"x")
    monkeypatch.setattr(safe_files, "open", lambda path, *a, **k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", str(path))), raising=False)
    with pytest.raises(PermissionError, match=r"cannot read .*f.bin: permission denied; make it readable"):
        safe_files.sha256_file(p)
    assert os.access(p, os.R_OK)
