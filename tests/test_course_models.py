"""The course's own trained models (course_models/): complete manifests, verified weights, clear errors for a
missing or damaged file, the save -> load round trip, and each held-out metric recomputed on a slice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import course_utils as cu
from course_utils import safe_files
from course_utils.pretrained.course_models import course_models_dir, load_course_model, save_course_model
from course_utils.safe_files import FileMismatchError
from course_utils.tokenizers import CharTokenizer

ROOT = Path(__file__).resolve().parents[1] / "course_models"
NAMES = ["gpt_shakespeare", "translator_en_zh", "mlm_shakespeare", "sst2_classifier"]
FIELDS = {"name", "kind", "config", "tokenizers", "metrics", "command", "commit", "seed", "device", "device_name",
          "threads", "minutes", "torch", "file", "dtype", "bytes", "sha256"}


def manifest(name: str) -> dict:
    return json.loads((ROOT / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_every_course_model_has_a_complete_manifest_and_loads_in_eval_mode(name):
    m = manifest(name)
    assert FIELDS <= set(m), FIELDS - set(m)
    assert m["name"] == name and m["dtype"] == "float16" and m["minutes"] > 0
    assert m["command"].startswith("python ") and "--save-as" in m["command"]
    assert (ROOT / m["file"]).stat().st_size == m["bytes"] <= 25 * 2**20
    model, tokenizers, loaded = load_course_model(name, ROOT)
    assert not model.training and loaded == m and tokenizers


# The committed files keep the names of before issue 34 (no 25 MB re-save): each maps to exactly one of today's.
OLD_TO_NEW = {"blocks.layers.0.res1.norm.weight": "blocks.layers.0.self_attn_residual.norm.weight",
              "blocks.layers.3.res2.norm.bias": "blocks.layers.3.ffn_residual.norm.bias",
              "decoder.layers.1.res2.norm.weight": "decoder.layers.1.cross_attn_residual.norm.weight",
              "decoder.layers.1.res3.norm.weight": "decoder.layers.1.ffn_residual.norm.weight",
              "encoder.layers.1.res2.norm.weight": "encoder.layers.1.ffn_residual.norm.weight",
              "generator.bias": "lm_head.bias", "decoder.bias": "lm_head.bias", "head.weight": "classifier.weight"}


@pytest.mark.parametrize("name", NAMES)
def test_the_committed_files_load_with_identical_weights_under_todays_names(name):
    from safetensors.torch import load_file

    from course_utils.pretrained.course_models import current_name

    model = load_course_model(name, ROOT).model
    ours, stored = model.state_dict(), load_file(str(ROOT / manifest(name)["file"]))
    mapped = {current_name(k, model): k for k in stored}
    assert len(mapped) == len(stored) and set(mapped) <= set(ours), set(mapped) - set(ours)
    for new, old in mapped.items():  # float16 on disk, float32 in memory: the cast back is exact
        assert torch.equal(ours[new].half(), stored[old]), (old, new)
    renamed = {old: new for new, old in mapped.items() if old != new}
    assert renamed and all(OLD_TO_NEW[k] == v for k, v in renamed.items() if k in OLD_TO_NEW)
    assert not any(".res" in k or k.startswith(("generator.", "head.")) for k in ours)


def test_all_course_models_together_stay_small():
    assert sum(manifest(name)["bytes"] for name in NAMES) <= 80 * 2**20


@pytest.fixture
def copy_of(tmp_path):
    def make(name: str) -> Path:
        m = manifest(name)
        for file in (f"{name}.json", m["file"]):
            shutil.copy(ROOT / file, tmp_path / file)
        return tmp_path / m["file"]
    return make


def test_a_changed_byte_or_a_truncated_file_is_refused_with_the_command_that_rebuilds_it(copy_of):
    weights = copy_of("sst2_classifier")
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(FileMismatchError, match="sha256") as err:
        load_course_model("sst2_classifier", weights.parent)
    assert manifest("sst2_classifier")["command"] in str(err.value)
    weights.write_bytes(bytes(data[:1000]))
    with pytest.raises(FileMismatchError, match="1,000 bytes"):
        load_course_model("sst2_classifier", weights.parent)


def test_missing_weights_and_missing_manifest_are_clear_errors(copy_of):
    weights = copy_of("sst2_classifier")
    weights.unlink()
    with pytest.raises(FileNotFoundError, match="is missing: .*train_sst2"):
        load_course_model("sst2_classifier", weights.parent)
    with pytest.raises(FileNotFoundError, match="no course model 'nope'.*known: sst2_classifier"):
        load_course_model("nope", weights.parent)


def test_the_folder_comes_from_the_environment_or_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_MODELS_DIR", raising=False)
    monkeypatch.chdir(ROOT.parent / "notebooks")
    assert course_models_dir() == ROOT.parent / "course_models"
    monkeypatch.setenv("COURSE_MODELS_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        course_models_dir()
    monkeypatch.delenv("COURSE_MODELS_DIR")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="COURSE_MODELS_DIR"):
        course_models_dir()


def test_the_hash_of_an_unchanged_file_is_computed_once(tmp_path, monkeypatch):
    file = tmp_path / "w.bin"
    file.write_bytes(b"x" * 5000)
    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: reads.append(path) or real_open(path, *a, **k))
    first = safe_files.file_sha256(file)
    assert safe_files.file_sha256(file) == first and len(reads) == 1
    file.write_bytes(b"y" * 5001)
    assert safe_files.file_sha256(file) != first and len(reads) == 2


def test_save_then_load_gives_the_same_model_up_to_float16(tmp_path):
    tok = CharTokenizer.from_text("to be or not to be")
    config = dict(vocab_size=tok.vocab_size, max_len=16, n_layers=1, n_heads=2, d_model=16)
    torch.manual_seed(0)
    model = cu.GPT(**config).eval()
    path = save_course_model(tmp_path, "tiny", model, kind="gpt", config=config, tokenizers={"chars": tok},
                             metrics={"val_loss": 1.0}, seed=0, minutes=0.01)
    loaded, tokenizers, m = load_course_model("tiny", tmp_path)
    assert path.name == "tiny.json" and m["sha256"] == safe_files.file_sha256(tmp_path / "tiny.safetensors")
    assert tokenizers["chars"].itos == tok.itos
    x = torch.randint(0, tok.vocab_size, (2, 8))
    torch.testing.assert_close(loaded(x), model.half().float()(x))
    with pytest.raises(ValueError, match="kind must be one of"):
        save_course_model(tmp_path, "bad", model, kind="cnn", config=config, tokenizers={}, metrics={}, seed=0,
                          minutes=0)


def _text_split():
    from course_utils.data import load_tiny_shakespeare
    from course_utils.lm_data import split_ids

    text = load_tiny_shakespeare(progress=False)
    if text.source.kind == "sample":
        pytest.skip("tiny-shakespeare is not available (set COURSE_DATA_DIR)")
    tok = CharTokenizer.from_text(text)
    return tok, split_ids(torch.tensor(tok.encode(text)), 0.1)


@torch.no_grad()
def test_the_gpt_beats_the_five_gram_level_on_a_slice_of_the_held_out_text():
    tok, (_, val_ids) = _text_split()
    model, tokenizers, m = load_course_model("gpt_shakespeare", ROOT)
    assert tokenizers["chars"].itos == tok.itos
    block = model.max_len
    ids = val_ids[: 128 * block + 1]  # a slice of 16k characters: slices differ by about ±0.1
    x, y = ids[:-1].view(128, block), ids[1:].view(128, block)
    nll = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    assert abs(nll - m["metrics"]["val_loss"]) < 0.2, (nll, m["metrics"])
    assert nll < 1.75  # below the best add-k n-gram of lesson 11 (about 1.76 over the whole validation text)


@torch.no_grad()
def test_the_masked_lm_accuracy_is_lesson_12s_figure():
    import sys

    sys.path.insert(0, str(ROOT.parent / "benchmarks"))
    from train_mlm import lesson12_dev_set

    from course_utils import mlm

    tok, (_, val_ids) = _text_split()
    model, _, m = load_course_model("mlm_shakespeare", ROOT)
    special = [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]
    dev_in, dev_labels = lesson12_dev_set(val_ids, tok, special)
    logits, targets = mlm.masked_logits(model, dev_in[:128], dev_labels[:128])
    accuracy = (logits.argmax(-1) == targets).float().mean().item()
    assert abs(accuracy - m["metrics"]["masked_accuracy"]) < 0.05 and accuracy > 0.55


@torch.no_grad()
def test_the_sst2_classifier_accuracy_is_recomputed_on_the_dev_set():
    from course_utils.data import load_sst2

    dev = load_sst2("dev", progress=False)
    if dev.source.kind == "sample":
        pytest.skip("SST-2 is not available (set COURSE_DATA_DIR)")
    model, tokenizers, m = load_course_model("sst2_classifier", ROOT)
    ids = tokenizers["words"].encode_batch([text for text, _ in dev])
    accuracy = (model(ids).argmax(-1) == torch.tensor([label for _, label in dev])).float().mean().item()
    assert abs(accuracy - m["metrics"]["dev_accuracy"]) <= 0.005


def test_the_translator_never_trained_on_a_sentence_lesson_10_tests():
    import sys

    from course_utils.data.translation import english_key, load_tatoeba_cmn

    sys.path.insert(0, str(ROOT.parent / "benchmarks"))
    from train_translation import lesson10_test_keys

    pairs = load_tatoeba_cmn(progress=False)
    if pairs.source.kind == "sample":
        pytest.skip("Tatoeba is not available (set COURSE_DATA_DIR)")
    model, tokenizers, m = load_course_model("translator_en_zh", ROOT)
    held = set(m["heldout_english"])
    assert lesson10_test_keys(pairs) <= held and len(held) == m["metrics"]["test_sentences"] >= 1000
    assert m["metrics"]["bleu_beam"] > m["metrics"]["lookup_bleu"]
    train_words = {english_key(en) for en, _ in pairs if english_key(en) not in held}
    assert not train_words & held


@pytest.mark.parametrize("readme, lang", [("README.md", "en"), ("README_zh.md", "zh")])
def test_the_readme_tables_are_made_from_the_manifests(readme, lang):
    import subprocess
    import sys

    table = subprocess.run([sys.executable, str(ROOT.parent / "tools" / "course_models_table.py"), lang],
                           capture_output=True, text=True, check=True).stdout.strip()
    text = (ROOT.parent / readme).read_text(encoding="utf-8")
    block = text.split("<!-- course-models:begin -->")[1].split("<!-- course-models:end -->")[0].strip()
    assert block == table and table.count("\n") == len(NAMES) + 1
