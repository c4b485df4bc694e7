"""The person's config and a project's config: permission rules and trusted workspaces.

``<config dir>/config.toml`` (DESIGN §2)::

    trusted_workspaces = ["~/src/mine"]     # trusted whatever their .musec/ holds

    [permissions]                           # every workspace
    allow = ["bash(pytest *)", "read"]
    ask = ["bash(git push *)"]
    deny = ["read(~/.ssh/**)", "bash(curl *)"]

    [workspaces."/abs/path".permissions]    # that workspace and below ("always allow" writes here)
    allow = ["bash(make *)"]

    [context]                               # context limits (agents/budget.ContextConfig)
    tool_output_tokens = 10000

    [workers]                               # fan-out (agents/workers/run.py), seconds
    time_limit_s = 900                      # each worker's time limit
    test_timeout_s = 600                    # the integration's test run
    test_command = "make check"             # the integration's tests (default: detected)

A project's ``.musec/config.toml`` may hold a ``[permissions]`` table too; it applies
only once the workspace is trusted (``trust.py``). Reading uses the standard ``tomllib``;
writing uses ``dumps``, a small emitter for what ``tomllib`` reads back (tables, strings,
numbers, booleans, dates, arrays, inline tables), and ``add_workspace_rules`` edits the
file's text in place where it can, so the person's comments survive.
"""

from __future__ import annotations

import copy
import datetime
import math
import os
import re
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .budget import ContextConfig
from .core.errors import ConfigError
from .permissions import ACTIONS, Rule, RuleError, parse_rule

__all__ = [
    "ConfigError",
    "UserConfig",
    "WorkersConfig",
    "add_workspace_rules",
    "dumps",
    "load_project_rules",
    "load_toml",
    "load_user_config",
    "project_config_path",
]


def project_config_path(workspace: Path) -> Path:
    return workspace / ".musec" / "config.toml"


def load_toml(path: Path) -> dict[str, Any]:
    """The parsed file, or ``{}`` when it does not exist.

    Raises:
        ConfigError: it cannot be read or is not valid TOML.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read ({exc.strerror or exc}); fix its permissions") from exc
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or move it away") from exc


#: The keys each table of the person's config.toml may hold ("*": any name, a table each).
USER_KEYS: dict[str, frozenset[str]] = {
    "": frozenset({"trusted_workspaces", "allow_training_data", "permissions", "workspaces", "context",
                   "daemon", "hooks", "mcp_servers", "workers"}),
    "workspaces.*": frozenset({"permissions", "allow_training_data"}),
    "context": frozenset({"tool_output_tokens", "clear_at", "keep_tool_results"}),
    "daemon": frozenset({"idle_timeout_s"}),
    "workers": frozenset({"time_limit_s", "test_timeout_s", "test_command"}),
}
#: A trusted project's .musec/config.toml.
PROJECT_KEYS: dict[str, frozenset[str]] = {"": frozenset({"permissions", "hooks"})}


def _table_name(where: str) -> str:
    return f"[{where}]" if where else "the top level"


def check_keys(data: dict[str, Any], path: Path, schema: dict[str, frozenset[str]]) -> None:
    """Refuse a key that nothing reads: a rule written in the wrong place would otherwise be
    ignored without a word (a ``deny`` at the top level, ``[permission]``, or
    ``[workspaces."X"] deny`` instead of ``[workspaces."X".permissions]``).

    Raises:
        ConfigError: the first unknown key, with where it belongs when that is clear.
    """
    import difflib

    for where, known in schema.items():
        if where.endswith(".*"):
            outer = data.get(where[:-2])
            tables = [(f"{where[:-2]}.{_string(k)}", t) for k, t in outer.items()] if isinstance(outer, dict) else []
        else:
            table = data if not where else data.get(where)
            tables = [(where, table)] if isinstance(table, dict) else []
        for name, table in tables:
            if not isinstance(table, dict):
                continue
            for key in sorted(set(table) - known):
                if key in ACTIONS:
                    inner = f"{name}.permissions" if name else "permissions"
                    hint = f"permission rules go in a [{inner}] table: [{inner}] {key} = [...]"
                elif key in ("compact_model", "compact_at") and name in ("", "context"):
                    hint = (f'it is set per model in models.toml beside this file: [models."ID"] {key} = ...')
                else:
                    close = difflib.get_close_matches(key, sorted(known), n=1)
                    hint = (f"did you mean {close[0]!r}?" if close else "use one of " + ", ".join(sorted(known)))
                raise ConfigError(f"{path}: {_table_name(name)} has unknown key {key!r} (nothing reads it); {hint}")


def _rules(table: object, *, path: Path, where: str, source: str, home: str | None) -> list[Rule]:
    """The rules of one ``permissions`` table."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {where} must be a table like [permissions] with allow/ask/deny lists")
    unknown = sorted(set(table) - set(ACTIONS))
    if unknown:
        raise ConfigError(f"{path}: {where} has unknown key {unknown[0]!r}; use allow, ask and deny")
    out: list[Rule] = []
    for action in ACTIONS:
        items = table.get(action, [])
        if not isinstance(items, list):
            raise ConfigError(f'{path}: {where}.{action} must be a list of rules, like {action} = ["bash(pytest *)"]')
        for n, text in enumerate(items):
            try:
                out.append(parse_rule(text, action, source=source, origin=f"{path} {where}", home=home))
            except RuleError as exc:
                raise ConfigError(f"{path}: {where}.{action}[{n}]: {exc}") from None
    return out


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _workspace_key(raw: str) -> str:
    return os.path.realpath(os.path.expanduser(raw))


def _splits(command: str) -> bool:
    """``command`` splits into a program and its arguments (as a shell would)."""
    import shlex

    try:
        return bool(shlex.split(command))
    except ValueError:
        return False


@dataclass(frozen=True)
class WorkersConfig:
    """The ``[workers]`` table: a fan-out's limits, in seconds, and its test command.

    Attributes:
        time_limit_s: how long each worker may run before it is stopped.
        test_timeout_s: the deadline of the integration's test run (its process group is
            killed after it, and the integration does not pass).
        test_command: the command the integration's tests run with, split as a shell
            would (``""``: detected from the project's files, ``workers/testcmd.py``).
    """

    time_limit_s: float = 900.0
    test_timeout_s: float = 600.0
    test_command: str = ""

    @classmethod
    def from_table(cls, table: object, path: Path) -> WorkersConfig:
        """Read a ``[workers]`` table (``None``: the defaults).

        Raises:
            ConfigError: it is not a table, or a value is not a positive number of seconds.
        """
        if table is None:
            return cls()
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: workers must be a table, like [workers] time_limit_s = 900")
        values = {}
        for key in ("time_limit_s", "test_timeout_s"):
            if key not in table:
                continue
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ConfigError(f"{path}: [workers] {key} must be a positive number of seconds, "
                                  f"like {key} = {int(getattr(cls, key))}; got {value!r}")
            values[key] = float(value)
        command = table.get("test_command", "")
        if not isinstance(command, str) or (command and not _splits(command)):
            raise ConfigError(f'{path}: [workers] test_command must be a command line, like test_command = "make check"; '
                              f"got {command!r}")
        return cls(**values, test_command=command.strip())


@dataclass
class UserConfig:
    """The person's config: global rules, rules per workspace, trusted workspaces."""

    path: Path
    rules: list[Rule] = field(default_factory=list)
    workspace_rules: dict[str, list[Rule]] = field(default_factory=dict)
    trusted_workspaces: list[str] = field(default_factory=list)
    context: ContextConfig = field(default_factory=ContextConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)

    def rules_for(self, workspace: Path) -> list[Rule]:
        """The global rules plus those of every ``[workspaces."PATH"]`` that is ``workspace``
        or a directory above it (as ``allow_training_data`` there)."""
        here = _workspace_key(str(workspace))
        scoped = [r for root, rules in self.workspace_rules.items() if _within(here, root) for r in rules]
        return [*self.rules, *scoped]

    def trusts(self, workspace: Path) -> bool:
        return _workspace_key(str(workspace)) in self.trusted_workspaces


def load_user_config(config_dir: Path, *, home: str | None = None) -> UserConfig:
    """Read ``<config_dir>/config.toml`` (missing: an empty config).

    Raises:
        ConfigError: the file is not valid TOML, a rule or key in it is malformed, or it holds
            a key nothing reads (``check_keys``).
    """
    path = config_dir / "config.toml"
    data = load_toml(path)
    check_keys(data, path, USER_KEYS)
    config = UserConfig(path)
    if "permissions" in data:
        config.rules = _rules(data["permissions"], path=path, where="[permissions]", source="user", home=home)
    trusted = data.get("trusted_workspaces", [])
    if not isinstance(trusted, list) or not all(isinstance(t, str) and t.strip() for t in trusted):
        raise ConfigError(f'{path}: trusted_workspaces must be a list of paths, like trusted_workspaces = ["~/src/app"]')
    config.trusted_workspaces = [_workspace_key(t) for t in trusted]
    try:
        config.context = ContextConfig.from_table(data.get("context"), str(path))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config.workers = WorkersConfig.from_table(data.get("workers"), path)
    workspaces = data.get("workspaces", {})
    if not isinstance(workspaces, dict):
        raise ConfigError(f'{path}: workspaces must be tables like [workspaces."/abs/path".permissions]')
    for key, table in workspaces.items():
        where = f"[workspaces.{_string(key)}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {where} must be a table holding a permissions table")
        if not os.path.isabs(os.path.expanduser(key)):
            raise ConfigError(f"{path}: {where} is not an absolute path; write the workspace's full path")
        if "permissions" in table:
            rules = _rules(table["permissions"], path=path, where=f"[workspaces.{_string(key)}.permissions]",
                           source="user", home=home)
            config.workspace_rules.setdefault(_workspace_key(key), []).extend(rules)
    return config


def load_project_rules(workspace: Path, *, home: str | None = None) -> list[Rule]:
    """The rules of a (trusted) project's ``.musec/config.toml``; ``[]`` when it has none.

    Raises:
        ConfigError: the file is not valid TOML, or a rule in it is malformed.
    """
    path = project_config_path(workspace)
    data = load_toml(path)
    check_keys(data, path, PROJECT_KEYS)
    if "permissions" not in data:
        return []
    return _rules(data["permissions"], path=path, where="[permissions]", source="project", home=home)


# --- writing -------------------------------------------------------------------------------


def add_workspace_rules(config_dir: Path, workspace: Path, rules: list[str], action: str = "allow") -> Path:
    """Add ``rules`` to ``[workspaces."<workspace>".permissions].<action>`` of the user's
    config and return the file's path. Rules already there are not repeated.

    The file's text is edited in place (a table appended, or that one list line
    rewritten) when the result reads back as intended, so comments are kept; otherwise
    the whole file is written again by ``dumps``. The write is atomic; a new file is 0600.

    Raises:
        ConfigError (``errors.ConfigError``): the existing file is not valid TOML or its ``workspaces`` is not a table.
        OSError: the file cannot be written.
    """
    path = config_dir / "config.toml"
    data = load_toml(path)
    text = path.read_text("utf-8") if path.exists() else ""
    key = str(workspace)
    intended = copy.deepcopy(data)
    try:
        table = intended.setdefault("workspaces", {}).setdefault(key, {}).setdefault("permissions", {})
        had_table = "permissions" in data.get("workspaces", {}).get(key, {})
        current = list(table.setdefault(action, []))
    except (AttributeError, TypeError):
        raise ConfigError(f'{path}: workspaces must be tables like [workspaces."/abs/path".permissions]') from None
    table[action] = current + [r for r in dict.fromkeys(rules) if r not in current]
    new_text = _edit_text(text, key, action, table[action], had_table)
    if new_text is None or _reads_as(new_text) != intended:
        new_text = dumps(intended)
    _write_atomic(path, new_text)
    return path


def _edit_text(text: str, key: str, action: str, values: list[str], had_table: bool) -> str | None:
    header = f"[workspaces.{_string(key)}.permissions]"
    line = f"{action} = {_value(values)}"
    if not had_table:
        body = text if not text or text.endswith("\n") else text + "\n"
        return body + ("\n" if body else "") + f"{header}\n{line}\n"
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == header)
    except StopIteration:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    for i in range(start + 1, end):
        stripped = lines[i].strip()
        if re.match(rf"{re.escape(action)}\s*=", stripped):
            if not stripped.endswith("]"):
                return None
            lines[i] = line + "\n"
            return "".join(lines)
    lines.insert(start + 1, line + "\n")
    return "".join(lines)


def _reads_as(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(s: str) -> str:
    out = []
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write a {type(v).__name__} as TOML")


def dumps(data: dict[str, Any]) -> str:
    """``data`` (as ``tomllib`` returns it) as TOML text that ``tomllib`` reads back equal.

    Tables become ``[a."b c"]`` sections; arrays (also of tables) are written inline.

    Raises:
        TypeError: a value is not a TOML type.
    """
    out: list[str] = []
    _table(data, [], out)
    return "\n".join(out) + ("\n" if out else "")


def _table(d: dict[str, Any], path: list[str], out: list[str]) -> None:
    scalars = [(k, v) for k, v in d.items() if not isinstance(v, dict)]
    tables = [(k, v) for k, v in d.items() if isinstance(v, dict)]
    if path and (scalars or not tables):
        if out:
            out.append("")
        out.append("[" + ".".join(_key(k) for k in path) + "]")
    for k, v in scalars:
        out.append(f"{_key(k)} = {_value(v)}")
    for k, v in tables:
        _table(v, [*path, k], out)
