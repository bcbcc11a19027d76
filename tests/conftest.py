"""Shared pytest fixtures: the ``device`` parametrization and the hypothesis profiles."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

# Property tests run torch code on shared, sometimes slow CPUs: a per-example deadline would only make them
# flaky, and a few dozen examples per property are enough to find shape and masking bugs.
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    derandomize=True,  # the same examples on every run, so a CI failure reproduces locally
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=10, suppress_health_check=[HealthCheck.too_slow])
# HYPOTHESIS_PROFILE=dev for quicker local runs; "ci" everywhere else, so `make test` matches CI.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _devices() -> list[str]:
    # Strings rather than torch.device: torch accepts both, and `device == "cuda"` works with a string only.
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@pytest.fixture(params=_devices())
def device(request) -> str:
    """Run the test once per available device: ``"cpu"``, plus ``"cuda"`` when a GPU is visible."""
    return request.param
