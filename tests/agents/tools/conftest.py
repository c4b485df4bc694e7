"""Fixtures for the tool tests: backends, a workspace in a temporary directory, contexts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from musec.agents.tools import SandboxPolicy, ToolContext


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> object:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory (symlinks resolved), under /tmp like most tmp dirs."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws.resolve()


def _make_ctx(workspace: Path, env: dict[str, str] | None = None, **fields: object) -> ToolContext:
    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workspace),
        "LANG": "C.UTF-8",
    }
    policy = {
        k: fields.pop(k) for k in ("mode", "profile", "network", "writable_roots", "read_deny", "read_only", "hide") if k in fields
    }
    return ToolContext(
        workspace=workspace,
        env={**base_env, **(env or {})},
        sandbox=SandboxPolicy(**policy),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )


@pytest.fixture
def make_ctx(workspace: Path) -> Callable[..., ToolContext]:
    """``make_ctx(env=None, **policy_or_ctx_fields)``: a context for the workspace fixture;
    ``mode``, ``profile``, ``network``, ``writable_roots`` go to the sandbox policy, other
    keywords (``max_output_bytes``, ``default_timeout_s``) to the context."""
    return lambda env=None, **fields: _make_ctx(workspace, env, **fields)


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    """The default context: bubblewrap, workspace-write, no network."""
    return _make_ctx(workspace)
