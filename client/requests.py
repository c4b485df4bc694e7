"""Building the requests that start or resume a session from the command line and the
environment: model, workspace, approval, limits, credentials, what to redact."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path

from musec.daemon import protocol as p

from .args import DEFAULT_AGENTS, DEFAULT_MODEL
from .connection import Connection
from .errors import UsageError
from .output import out

DEFAULT_MAX_TURNS = 50
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")


def parse_wall(text: str, option: str = "--max-wall") -> float:
    """A duration: ``90s``, ``15m``, ``24h``, ``1d`` or seconds -> seconds.

    Raises:
        UsageError: not a positive duration (the message names ``option``).
    """
    m = _DURATION.fullmatch(text or "")
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"{option} {text!r}: write a positive duration such as 90s, 15m, 24h or 1d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _max_wall_s(args: argparse.Namespace) -> float:
    text = getattr(args, "max_wall", None)
    return parse_wall(text) if text else 0.0


def credentials() -> dict[str, str]:
    """The provider variables of this environment, passed to the daemon per request, and
    the keys ``musec login`` stored for the variables that are not set."""
    from .login import stored_keys

    return {**stored_keys(), **{k: os.environ[k] for k in p.CREDENTIAL_VARS if os.environ.get(k)}}


def secret_values() -> list[str]:
    """This environment's secret values (``protocol.secret_values``) and the stored keys:
    the daemon redacts them from everything it writes (DESIGN §5 rule 6)."""
    from .login import stored_keys

    return p.secret_values({**os.environ, **stored_keys()})


def secret_env() -> dict[str, str]:
    """``secret_values`` by variable name (``protocol.secret_names``): the daemon writes
    ``[REDACTED:NAME]`` for each, and fills them in again on a resume that sends them."""
    from .login import stored_keys

    return p.secret_names({**os.environ, **stored_keys()})


def resolve_agents(agents: str | None) -> list[str]:
    """The background roles: ``--agents``, else ``$MUSEC_AGENTS``, else the default."""
    text = agents if agents is not None else os.environ.get("MUSEC_AGENTS", DEFAULT_AGENTS)
    return [] if text.strip() in ("", "none") else [r.strip() for r in text.split(",") if r.strip()]


def resolve_model(model: str | None) -> str:
    """``--model``, else ``$MUSEC_MODEL``, else the default; a ``scripted:`` path made absolute.

    Raises:
        UsageError: a scripted model's file does not exist.
    """
    model = model or os.environ.get("MUSEC_MODEL") or DEFAULT_MODEL
    if model.startswith("scripted:"):
        path = Path(model.removeprefix("scripted:")).expanduser()
        if not path.is_file():
            raise UsageError(f"scripted model file {path} does not exist")
        model = "scripted:" + str(path.resolve())
    return model


def resolve_workspace(workspace: str | None) -> str:
    """``--workspace`` or the current directory, absolute. Raises ``UsageError``."""
    if not workspace:
        try:
            workspace = os.getcwd()
        except FileNotFoundError:
            raise UsageError("the current directory no longer exists; cd to one that does or pass --workspace DIR") from None
    path = Path(workspace).expanduser()
    if not path.is_dir():
        raise UsageError(f"workspace {path} is not a directory")
    resolved = str(path.resolve())
    if not is_utf8(resolved):  # the wire, the log and the sandbox's argv carry text (s6 G24)
        shown = resolved.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UsageError(f"the workspace path {shown} is not valid UTF-8, which musec cannot work in; "
                         "rename the folder to a UTF-8 name (or copy the project to one) and start there")
    return resolved


def is_utf8(text: str) -> bool:
    """Whether ``text`` (from the OS: surrogate-escaped bytes) is valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def wire_environment() -> dict[str, str]:
    """This process's environment as a request carries it (``StartSession.environment``):
    a variable whose name or value is not valid UTF-8 (``PWD`` in such a folder) is left
    out, as the wire carries only text."""
    return {k: v for k, v in os.environ.items() if is_utf8(k) and is_utf8(v)}


ALLOW_BROAD = "--allow-home-workspace"


def broad_workspace(workspace: str) -> str:
    """What ``workspace`` (absolute, resolved) is when it is too broad to work in without
    asking: the root directory, your home directory or a folder above it (``/home``: every
    user's); ``""`` otherwise."""
    if workspace == os.path.abspath(os.sep):
        return "the root directory"
    try:
        home = str(Path.home().resolve())
    except (KeyError, RuntimeError):  # no home to compare with
        home = ""
    if home and workspace == home:
        return "your home directory"
    if home and home.startswith(workspace.rstrip(os.sep) + os.sep):
        return f"a folder above your home directory ({home})"
    return ""


def check_workspace_scope(args: argparse.Namespace, workspace: str, *, interactive: bool) -> None:
    """A session in ``/`` or ``$HOME`` puts every file of the person's in the agent's reach:
    in a terminal the person is asked first; headless it is refused unless
    ``--allow-home-workspace`` is given. A yes is kept in ``args`` (``/clear`` asks no more).

    Raises:
        UsageError: refused headless, or the person said no.
    """
    what = broad_workspace(workspace)
    if not what or getattr(args, "allow_home_workspace", False):
        return
    if not (interactive and sys.stdin.isatty()):
        raise UsageError(f"{workspace} is {what}: the agent could read and change every file under it; "
                         f"cd to a project folder (or pass {ALLOW_BROAD} to work there anyway)")
    out(f"{workspace} is {what}: the agent could read and change every file under it.")
    try:
        from .keys import read_line

        answer = str(read_line("Work here anyway? [y]es / [n]o (then Enter; Esc: no): ")).strip().lower()
    except (EOFError, KeyboardInterrupt):  # Esc too (keys.EscPressed)
        out()
        answer = ""
    if answer not in ("y", "yes"):
        raise UsageError(f"not started; cd to a project folder (or pass {ALLOW_BROAD} to skip this question)")
    args.allow_home_workspace = True


def check_budgets(args: argparse.Namespace) -> float | None:
    """``--budget-usd`` (``None`` when not given), after checking it and ``--agents-budget-usd``.

    Raises:
        UsageError: not a finite number of dollars (more than 0; 0 or more for the agents').
    """
    budget_usd = getattr(args, "budget_usd", None)
    if budget_usd is not None and (not math.isfinite(budget_usd) or budget_usd <= 0):
        raise UsageError("--budget-usd must be a finite number of dollars more than 0")
    agents_budget = getattr(args, "agents_budget_usd", 0.0) or 0.0
    if not math.isfinite(agents_budget) or agents_budget < 0:
        raise UsageError("--agents-budget-usd must be a finite number of dollars, 0 or more")
    return budget_usd


def check_sandbox(mode: str) -> None:
    """Refuse a sandbox this platform does not have (every command would fail in it).

    Raises:
        UsageError: ``seatbelt`` off macOS, ``bwrap`` on macOS.
    """
    if mode == "seatbelt" and sys.platform != "darwin":
        raise UsageError("--sandbox seatbelt: the Seatbelt sandbox (sandbox-exec) exists only on macOS; "
                         "on this system use --sandbox bwrap (what auto picks)")
    if mode == "bwrap" and sys.platform == "darwin":
        raise UsageError("--sandbox bwrap: bubblewrap exists only on Linux; on macOS use --sandbox seatbelt "
                         "(what auto picks)")


def start_request(conn: Connection, args: argparse.Namespace, task: str, *, interactive: bool) -> p.StartSession:
    """The ``StartSession`` for ``args`` (the session options of ``args.session_opts``).

    Raises:
        UsageError: a limit, model or workspace that cannot be used (``/`` or ``$HOME``:
            ``check_workspace_scope``).
    """
    max_turns = DEFAULT_MAX_TURNS if args.max_turns is None else args.max_turns
    if max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    budget_usd = check_budgets(args)
    check_sandbox(getattr(args, "sandbox", None) or "auto")
    trust = bool(getattr(args, "trust", False))
    agents_model = getattr(args, "agents_model", "")
    approval, plan = args.approval or "ask", bool(getattr(args, "plan", False))
    approve_plan = bool(getattr(args, "approve_plan", False))
    if approval == "plan":  # plan mode first, then the session's default approval (ask)
        approval, plan_mode = "ask", True
    else:
        plan_mode = plan
    workspace = resolve_workspace(args.workspace)
    model = resolve_model(args.model)
    check_workspace_scope(args, workspace, interactive=interactive)
    return p.StartSession(
        id=conn.next_id(), workspace=workspace, model=model,
        plan=plan_mode or bool(getattr(args, "grill", False)), plan_only=plan and not approve_plan,
        approve_plan=approve_plan, grill=bool(getattr(args, "grill", False)),
        task=task, approval=approval, max_turns=max_turns, credentials=credentials(),
        interactive=interactive, end_when_idle=not interactive, sandbox=getattr(args, "sandbox", None) or "auto",
        redact=secret_values(), redact_named=secret_env(), budget_usd=budget_usd or 0.0, agents=resolve_agents(getattr(args, "agents", None)),
        blackboard=getattr(args, "blackboard", True),
        agents_model=resolve_model(agents_model) if agents_model else "",
        agents_budget_usd=getattr(args, "agents_budget_usd", 0.0) or 0.0, trust=trust,
        ask_trust=interactive and not trust, environment=wire_environment(), max_wall_s=_max_wall_s(args),
        goal=_goal(args),
    )


def _goal(args: argparse.Namespace) -> p.GoalRequest | None:
    """``--goal`` and ``--check``; the run's --budget-usd, --max-turns and --max-wall are the
    goal's budget too. Raises ``UsageError``."""
    condition, check = getattr(args, "goal", None), getattr(args, "check", None)
    if condition is None:
        if check is not None:
            raise UsageError('--check is the check of a goal: musec run --goal "CONDITION" --check "CMD"')
        return None
    if not condition.strip():
        raise UsageError('--goal is empty: say what must hold, e.g. --goal "the tests pass"')
    if check is not None and not check.strip():
        raise UsageError('--check is empty: give the command that passes when the goal is met, e.g. --check "pytest -q"')
    return p.GoalRequest(condition=condition.strip(), check=(check or "").strip(), budget_usd=getattr(args, "budget_usd", None) or 0.0,
                         max_turns=args.max_turns or 0, max_wall_s=_max_wall_s(args))


def resume_request(conn: Connection, args: argparse.Namespace, task: str) -> p.ResumeSession:
    """The headless ``ResumeSession`` of ``musec run --resume ID`` / ``--continue`` (with
    ``--model M``: the session goes on with that model)."""
    if args.max_turns is not None and args.max_turns < 1:
        raise UsageError("--max-turns must be at least 1")
    if args.approval == "plan" or getattr(args, "plan", False):
        raise UsageError("plan mode starts with a new task (musec run --plan \"TASK\"), or /plan in a session; "
                         "--approve-plan approves a resumed session's plan")
    return p.ResumeSession(
        approve_plan=bool(getattr(args, "approve_plan", False)),
        id=conn.next_id(), session_id=args.resume or "",
        workspace="" if args.resume else resolve_workspace(args.workspace), task=task,
        credentials=credentials(), interactive=False, end_when_idle=True,
        approval=args.approval or "", max_turns=args.max_turns or 0, redact=secret_values(), redact_named=secret_env(),
        environment=wire_environment(), model=getattr(args, "model", None) or "", max_wall_s=_max_wall_s(args),
        budget_usd=check_budgets(args) or 0.0,
    )
