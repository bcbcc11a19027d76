"""Lesson 02 (positional encoding): frequency forms and their precision, M_k, dot products, widget, checks."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import references
import torch

from course_lab.lessons import l02_positional as l02
from course_utils import sinusoidal_encoding

pytestmark = pytest.mark.usefixtures("english")  # tests/conftest.py: messages in English


def _raises(*_):
    raise NotImplementedError


def test_both_frequency_forms_build_the_papers_table():
    for fn in (l02.inv_freq_pow, l02.inv_freq_exp):
        table = l02.table_from(fn(32, torch.float64), 50)
        reference = sinusoidal_encoding(50, 32, dtype=torch.float64)
        torch.testing.assert_close(table, reference, rtol=0, atol=1e-12)
    assert math.isclose(l02.inv_freq_pow(32, torch.float64)[3].item(), 10000 ** (-6 / 32), rel_tol=1e-12)


def _freq_error(fn, d_model, dtype, base=10000.0):
    ref = l02.inv_freq_pow(d_model, torch.float64, base)
    return float(((fn(d_model, dtype, base).double() - ref).abs() / ref).max())


def test_the_precision_claims_of_the_appendix():
    """What lesson 02's appendix measures in its own cell: exp is not the more accurate form in float16,
    pos·ω in 16 bits is the real problem, building in float64 and casting at the end is fine."""
    assert _freq_error(l02.inv_freq_pow, 128, torch.float32) < 1e-6 > _freq_error(l02.inv_freq_exp, 128, torch.float32)
    assert _freq_error(l02.inv_freq_exp, 128, torch.float16) > _freq_error(l02.inv_freq_pow, 128, torch.float16)
    reference = sinusoidal_encoding(2048, 128, dtype=torch.float64)
    built_in_16 = l02.table_from(l02.inv_freq_pow(128, torch.float16), 2048).double()
    assert (built_in_16 - reference).abs().max() > 0.1
    assert (reference.half().double() - reference).abs().max() < 1e-3


def test_large_base_overflows_the_power_form_in_float16():
    pow16 = l02.inv_freq_pow(16, torch.float16, 500000.0)
    exp16 = l02.inv_freq_exp(16, torch.float16, 500000.0)
    assert int((~pow16.isfinite() | (pow16 == 0)).sum()) == 7            # every ω but ω_0 became 0
    assert bool((exp16.isfinite() & (exp16 > 0)).all())


@pytest.mark.parametrize("k", [1, 5, 37, -4])
def test_shift_matrix_moves_every_position(k):
    pe = sinusoidal_encoding(120, 24, dtype=torch.float64)
    M = l02.shift_matrix(k, 24)
    for pos in (10, 11, 40, 70):
        torch.testing.assert_close(M @ pe[pos], pe[pos + k])
    torch.testing.assert_close(M.T @ M, torch.eye(24, dtype=torch.float64))
    torch.testing.assert_close(l02.shift_matrix(3, 24) @ M, l02.shift_matrix(3 + k, 24))   # M_a M_b = M_{a+b}


def test_shift_matrix_is_block_diagonal_and_needs_even_width():
    M = l02.shift_matrix(2, 8)
    mask = torch.block_diag(*[torch.ones(2, 2)] * 4).bool()
    assert (M[~mask] == 0).all()
    with pytest.raises(ValueError, match="odd"):
        l02.shift_matrix(1, 7)


def test_dot_product_depends_on_distance_only_and_decays_roughly():
    d = 64
    pe = sinusoidal_encoding(200, d, dtype=torch.float64)
    gram = pe @ pe.T
    dots = np.array([torch.diagonal(gram, k).mean().item() for k in range(200)])      # the lesson's plotted curve
    closed = [torch.cos(k * l02.inv_freq_exp(d, torch.float64)).sum().item() for k in range(200)]
    np.testing.assert_allclose(dots, closed, atol=1e-9)
    assert dots[0] == pytest.approx(d / 2)
    assert dots[150:].mean() < 0.6 * dots[0]                  # it decays ...
    assert (np.diff(dots) > 0).any()                          # ... but not monotonically


def test_explorer_callbacks():
    w = l02.build_pe_explorer("en")
    assert w.state["d_model"] == 32 and w.renders == 1
    w.controls["position"].value = 42
    pe = sinusoidal_encoding(l02.N_POSITIONS, 32)
    np.testing.assert_allclose(w.state["row"], pe[42].numpy())
    w.controls["dimension"].value = 9
    np.testing.assert_allclose(w.state["column"], pe[:, 9].numpy())
    assert w.state["wavelength"] == pytest.approx(2 * math.pi * 10000 ** (8 / 32))
    heatmap = w.figure.axes[0].images[0].get_array()
    assert heatmap.shape == (l02.N_POSITIONS, 32)
    w.controls["d_model"].value = 8                           # the dimension slider follows d_model
    assert w.controls["dimension"].max == 7 and w.state["dimension"] == 7 and w.state["row"].shape == (8,)
    assert w.error is None
    w.controls["d_model"].value = 128
    assert w.controls["dimension"].max == 127 and w.figure.axes[0].images[0].get_array().shape == (100, 128)


def test_explorer_rejects_impossible_settings_in_chinese():
    with pytest.raises(ValueError, match="维度必须小于"):
        l02.render_pe_explorer(8, 3, 8, lang="zh")
    with pytest.raises(ValueError, match="position"):
        l02.render_pe_explorer(8, l02.N_POSITIONS, 0, lang="en")


def test_check_wavelengths(capsys):
    assert l02.check_wavelengths(references.wavelengths)
    assert l02.check_wavelengths(lambda d: 2 * math.pi * 10000 ** (torch.arange(0, d, 2) / d))
    assert not l02.check_wavelengths(lambda d: 1 / l02.inv_freq_exp(d, torch.float64))         # forgot 2π
    assert not l02.check_wavelengths(lambda d: 2 * math.pi * 10000 ** (torch.arange(d // 2) / d))  # i, not 2i
    assert not l02.check_wavelengths(_raises)
    capsys.readouterr()
    for name in ("inv_freq_exp", "inv_freq_pow"):
        assert not l02.check_wavelengths(lambda d, name=name: 2 * math.pi / getattr(l02, name)(d, torch.float64))
        assert f"calls l02.{name}" in capsys.readouterr().out
    assert l02.inv_freq_exp.__module__ == l02.__name__                  # the watch was taken off again


def _positional_table(max_len, d_model):
    """The lesson's own table, as a student would copy it (not course_utils: the check cannot see it called)."""
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).flatten(1)


def test_check_shift_back(capsys):
    assert l02.check_shift_back(references.shift_back)
    assert l02.check_shift_back(lambda row, k: l02.shift_matrix(-k, row.shape[-1]) @ row)   # M_{-k} = M_kᵀ
    assert not l02.check_shift_back(lambda row, k: l02.shift_matrix(k, row.shape[-1]) @ row)   # went forward
    assert not l02.check_shift_back(_raises)
    capsys.readouterr()

    def lookup_in(table_fn):
        def shift_back(row, k):
            table = table_fn(200, row.shape[-1])
            return table[int((table @ row).argmax()) - k]
        return shift_back

    assert not l02.check_shift_back(lookup_in(lambda n, d: sinusoidal_encoding(n, d, dtype=torch.float64)))
    assert "builds the positional table" in capsys.readouterr().out
    assert not l02.check_shift_back(lookup_in(_positional_table))               # unseen, but fails on 2.5·PE
    assert "a row of the table" in capsys.readouterr().out


def _rotate_loop(x, k):
    d, out = x.shape[-1], x.clone()
    for i in range(d // 2):
        c, s = math.cos(k * 10000 ** (-2 * i / d)), math.sin(k * 10000 ** (-2 * i / d))
        out[..., 2 * i], out[..., 2 * i + 1] = c * x[..., 2 * i] + s * x[..., 2 * i + 1], \
            -s * x[..., 2 * i] + c * x[..., 2 * i + 1]
    return out


def test_check_rotate(capsys):
    def rotate(x, k):
        angle = k * l02.inv_freq_exp(x.shape[-1], torch.float64)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * angle.cos() + odd * angle.sin(), odd * angle.cos() - even * angle.sin()],
                           -1).flatten(-2)

    for (x, k), d in l02._rotate_cases():                   # the truth used by the check is M_k x
        torch.testing.assert_close(rotate(x, k), x @ l02.shift_matrix(k, d).T)
    assert l02.check_rotate(rotate) and l02.check_rotate(references.rotate)
    assert l02.check_rotate(_rotate_loop)
    out = capsys.readouterr().out
    values = re.findall(r"-?\d+\.\d{4}", out.split("RoPE property")[1])
    assert len(values) == 3 and len(set(values)) == 1, out              # only the offset counts
    assert not l02.check_rotate(lambda x, k: rotate(x, -k))
    assert "rotated by −k" in capsys.readouterr().out
    assert not l02.check_rotate(l02._rotate_half)
    assert "i + d/2" in capsys.readouterr().out
    assert not l02.check_rotate(lambda x, k: rotate(x, k).float()[..., :-1])
    assert "expected shape" in capsys.readouterr().out
    for shortcut in (lambda x, k: x @ l02.shift_matrix(k, x.shape[-1]).T,
                     lambda x, k: torch.einsum("ij,...j->...i", torch.block_diag(
                         *[torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=x.dtype)] * (x.shape[-1] // 2)), x)):
        assert not l02.check_rotate(shortcut)
        assert "builds the d × d matrix" in capsys.readouterr().out
    assert not l02.check_rotate(_raises)
