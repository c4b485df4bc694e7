"""Forbidden imports: found in the source before running, refused at import time in the process."""

from __future__ import annotations

import sys
import textwrap

import pytest
from musec.agents.kernel_opt.guard import candidate_scope, forbidden_imports

FORBIDDEN = ("fla", "flash_attn")


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import fla", ["line 1: import fla"]),
        ("import os\nimport fla.ops.kda as k", ["line 2: import fla.ops.kda"]),
        ("from fla.ops import kda", ["line 1: import fla.ops"]),
        ("from flash_attn import flash_attn_func", ["line 1: import flash_attn"]),
        ("def f():\n    import fla\n", ["line 2: import fla"]),
        ("m = __import__('fla')", ["line 1: import fla"]),
        ("import importlib\nimportlib.import_module('fla.ops')", ["line 2: import fla.ops"]),
        ("import flashy\nimport flax\nfrom . import fla", []),
        ("import torch\nimport triton.language as tl", []),
        ("this is not python", []),
    ],
)
def test_static_check(source, expected):
    assert forbidden_imports(source, FORBIDDEN) == expected


@pytest.fixture
def fake_libs(tmp_path, monkeypatch):
    for name in ("forbiddenlib_k", "allowedlib_k"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("VALUE = 1\n")
        (tmp_path / name / "sub.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in list(sys.modules):
        if name.startswith(("forbiddenlib_k", "allowedlib_k")):
            del sys.modules[name]


def test_scope_blocks_imports_and_hides_loaded_modules(fake_libs):
    import forbiddenlib_k  # the baseline may have imported it before the candidate runs

    with candidate_scope(["forbiddenlib_k"]):
        with pytest.raises(ImportError, match="forbidden in this campaign"):
            import forbiddenlib_k.sub  # noqa: F401
        with pytest.raises(ImportError, match="forbidden"):
            exec(textwrap.dedent("import importlib\nimportlib.import_module('forbidden' + 'lib_k')"))
        assert "forbiddenlib_k" not in sys.modules
        import allowedlib_k.sub  # noqa: F401
    assert sys.modules["forbiddenlib_k"] is forbiddenlib_k
    import forbiddenlib_k.sub  # noqa: F401  (outside the scope the baseline may import it)
