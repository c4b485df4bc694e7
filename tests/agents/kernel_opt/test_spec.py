"""Campaign specs: the shipped ones load; bad ones fail with one line that says what to fix."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.kernel_opt.errors import SpecError
from musec.agents.kernel_opt.spec import (
    ALWAYS_FORBIDDEN,
    SHIPPED_DIR,
    load_spec,
    parse_duration,
    parse_spec,
    shipped_specs,
)


def test_shipped_specs_load():
    assert shipped_specs() == ["cpu-example", "kda", "mla-decode"]
    for name in shipped_specs():
        spec = load_spec(name)
        assert spec.name == name
        assert (Path(spec.spec_dir) / spec.start).is_file()
        assert set(ALWAYS_FORBIDDEN) <= set(spec.forbidden_modules)
    kda = load_spec("kda")
    assert kda.baseline[0].startswith("fla.") and kda.device == "cuda"
    assert {"b": 1, "t": 8192, "h": 64, "d": 128} in kda.shapes
    assert load_spec("mla-decode").shapes == [{"b": 1, "h": 64, "t": 8192}]
    assert load_spec("cpu-example").max_wall_s == 3600


def _raw(**changes):
    raw = tomllib.loads((SHIPPED_DIR / "cpu-example" / "kernel-task.toml").read_text())
    raw.update(changes)
    return {k: v for k, v in raw.items() if v is not None}


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"device": "tpu"}, "device must be 'cpu' or 'cuda'"),
        ({"reference": "no_colon"}, "reference must be 'module:callable'"),
        ({"baseline": []}, "baseline needs at least one"),
        ({"shapes": []}, "shapes is empty"),
        ({"dtypes": ["float8"]}, "unknown dtype 'float8'"),
        ({"dtypes": ["bfloat16"]}, "[tolerance] has no entry for bfloat16"),
        ({"candidate": "../outside.py"}, "candidate must be a path inside the workspace"),
        ({"start": "missing.py"}, "start file 'missing.py' not found"),
        ({"name": None}, "missing required field `name`"),
        ({"colour": "red"}, "unknown field `colour`"),
        ({"budget": {"max_wall": "soon"}}, "budget.max_wall: bad duration 'soon'"),
        ({"timing": {"repeats": 0}}, "timing needs repeats >= 1"),
    ],
)
def test_bad_specs_fail_with_one_line(changes, words):
    with pytest.raises(SpecError) as info:
        parse_spec(_raw(**changes), SHIPPED_DIR / "cpu-example", "my.toml")
    message = str(info.value)
    assert words in message and message.startswith("my.toml: ") and "\n" not in message


def test_unknown_spec_and_invalid_toml(tmp_path):
    with pytest.raises(SpecError, match="no campaign spec 'nope'.*cpu-example, kda, mla-decode"):
        load_spec("nope")
    bad = tmp_path / "kernel-task.toml"
    bad.write_text("name = \n")
    with pytest.raises(SpecError, match="invalid TOML"):
        load_spec(tmp_path)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["", "s", "m", "h", "d"]))
def test_durations(n, unit):
    assert parse_duration(f"{n}{unit}") == n * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=12))
def test_duration_parser_never_crashes(text):
    try:
        assert parse_duration(text) >= 0
    except SpecError as exc:
        assert "bad duration" in str(exc)
