"""The data-use guard's opt-in: may this workspace use a model that trains on prompts?

A catalog entry with ``trains_on_data = true`` is a tier that buys your prompts for
training; ``make_provider`` refuses it unless the person opted in. The opt-in lives in
the person's own ``config.toml`` (DESIGN §2), never in the repository: a cloned project
must not be able to send its user's prompts to a training tier::

    allow_training_data = true            # every workspace

    [workspaces."/home/me/scratch"]       # or one workspace (and the folders under it)
    allow_training_data = true

Nothing is read at import time.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from musec.agents.core.errors import ConfigError

__all__ = ["CONFIG_NAME", "training_allowed"]

#: The person's config file, inside the config directory.
CONFIG_NAME = "config.toml"


def training_allowed(config_dir: Path | None, workspace: Path) -> bool:
    """Whether ``config_dir/config.toml`` allows training-tier models in ``workspace``.

    The top-level ``allow_training_data`` applies everywhere; a
    ``[workspaces."PATH"]`` table's applies to PATH and below and wins over it (the
    deepest matching PATH wins). No file means no.

    Raises:
        ConfigError: the file is not valid TOML or a value is not a boolean (the message
            names the file and key).
    """
    if config_dir is None:
        return False
    path = Path(config_dir) / CONFIG_NAME
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    allowed = _flag(data, path, "allow_training_data")
    workspaces = data.get("workspaces", {})
    if not isinstance(workspaces, dict):
        raise ConfigError(f"{path}: [workspaces] must be a table of tables")
    here = workspace.resolve()
    best = -1
    for name, table in workspaces.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: workspaces.{name!r} must be a table")
        root = Path(name).expanduser()
        value = _flag(table, path, f"workspaces.{name!r}.allow_training_data", "allow_training_data")
        if value is None or not root.is_absolute():
            continue
        root = root.resolve()
        if (here == root or root in here.parents) and len(root.parts) > best:
            best, allowed = len(root.parts), value
    return bool(allowed)


def _flag(table: dict, path: Path, where: str, key: str | None = None) -> bool | None:
    value = table.get(key or where)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{path}: {where} must be true or false, got {value!r}")
    return value
