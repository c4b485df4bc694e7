"""A kernel campaign started where the ``kernels`` extra is missing says so at once, with
the install line (a new user's `musec optimize cpu-example` after the README's plain
install ran, then failed every evaluation with ModuleNotFoundError)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from musec.agents.kernel_opt.errors import SpecError
from musec.agents.kernel_opt.role import missing_dependencies, start_campaign


def test_nothing_is_missing_in_the_test_environment() -> None:
    assert missing_dependencies() == []


def test_a_missing_module_stops_the_campaign_with_the_install_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(SpecError) as err:
        start_campaign("cpu-example", tmp_path, tmp_path / "out", record=lambda fields: None, tool_calls=lambda: 0)
    assert "needs matplotlib" in str(err.value) and "pip install 'musec[kernels]'" in str(err.value)
