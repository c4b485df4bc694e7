"""``musec``'s command line (DESIGN §3, contract): the parser, built for the command asked.

Every command's parser is named with its help (``musec --help`` lists them all), but only
the one being run gets its options: building all of them costs more than the start of
``musec sessions`` may (it is measured against a bare interpreter).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

DEFAULT_MODEL = "anthropic/claude-sonnet-4-6"
DEFAULT_AGENTS = "scout,verifier,reviewer"
APPROVALS = ("ask", "auto", "read-only", "never", "plan")  # plan: plan first (requests.plan_fields)
SANDBOXES = ("auto", "bwrap", "seatbelt", "off")

# Options of the top-level parser that take a value (`musec --model M` is interactive).
_VALUE_OPTIONS = frozenset({"--model", "--workspace", "--approval", "--max-turns", "--sandbox",
                            "--agents-model", "--agents-budget-usd", "--agents"})


_JSON = "print JSON instead of text"
_SESSION_ID = "the session's id (`musec sessions` lists them)"
_OUTPUT_FORMAT = ("text (for a person), json (one object when the run ends: session id, result, exit reason, "
                  "cost) or stream-json (each event as a JSON line as it happens, then that object) (default: text)")
_BUDGET = "stop before a model call once the agent has spent X dollars (default: no cap)"


def session_opts(sp: argparse.ArgumentParser) -> None:
    """The options of a command that starts a session (``run``, ``chat`` and the bare ``musec``)."""
    sp.add_argument("--model", default=None, help=f"PROVIDER/MODEL, an alias, or scripted:PATH (default: $MUSEC_MODEL or {DEFAULT_MODEL})")
    sp.add_argument("--workspace", default=None, help="the repository to work in (default: the current directory)")
    sp.add_argument("--approval", choices=APPROVALS, default=None,
                    help="which tool calls need your yes: ask (edits and commands), auto (none), read-only "
                         "(edits refused, commands see a read-only workspace), never (never asks: the sandbox is "
                         "the only boundary), plan (a read-only plan first, carried out once you approve it); "
                         "your approval rules refine each (default: ask)")
    sp.add_argument("--max-turns", type=int, default=None, help="model turns per message (default: 50)")
    sp.add_argument("--sandbox", choices=SANDBOXES, default="auto",
                    help="where the agent's commands run: bwrap (bubblewrap, Linux), seatbelt (macOS), off (no "
                         "sandbox); auto picks the platform's (default: auto)")
    sp.add_argument("--no-blackboard", dest="blackboard", action="store_false",
                    help="every agent reads files from disk itself (for comparison)")
    sp.add_argument("--agents-model", default="", metavar="M",
                    help="a model for the scout (it then answers with its own read-only agent); "
                         "a cheaper one is a good choice")
    sp.add_argument("--agents-budget-usd", type=float, default=0.0, metavar="X",
                    help="the background agents' own budget (0: none)")
    sp.add_argument("--agents", default=None, metavar="ROLES",
                    help=f"background agents, comma-separated, or none (default: $MUSEC_AGENTS or {DEFAULT_AGENTS})")
    sp.add_argument("--allow-home-workspace", action="store_true",
                    help="work in / or your home directory: without it a session there is refused headless "
                         "and asked about in a terminal")
    sp.add_argument("--trust", action="store_true",
                    help="trust this workspace's .musec/ files (project config, hooks, skills) as they are now")


def _run(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("task", nargs="?", default="", help='the task; "-" reads it from stdin (musec run - < task.md)')
    session_opts(sp)
    sp.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text", help=_OUTPUT_FORMAT)
    sp.add_argument("--budget-usd", type=float, default=None, metavar="X", help=_BUDGET)
    sp.add_argument("--max-wall", default=None, metavar="DURATION",
                    help="stop once the agent has worked this long on a message, such as 90s, 30m or 2h")
    sp.add_argument("--goal", default=None, metavar="CONDITION",
                    help="work until CONDITION holds: after each turn the --check command runs, then an evaluator judges")
    sp.add_argument("--check", default=None, metavar="CMD", help="the goal's check: passes when it exits 0 (with --goal)")
    sp.add_argument("--resume", default=None, metavar="ID", help="go on with session ID")
    sp.add_argument("--continue", dest="continue_", action="store_true",
                    help="go on with the latest session of the workspace")
    sp.add_argument("--plan", action="store_true", help="plan the task read-only and print the plan (exit 0)")
    sp.add_argument("--approve-plan", action="store_true", help="approve the proposed plan and carry it out")
    sp.add_argument("--grill", action="store_true",
                    help="with --plan: a critic questions the plan's decisions first (headless: the recommended "
                         "answers, listed as assumptions)")


def _sessions(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--workspace", default=None, help="list this workspace's sessions (default: the current directory's)")
    sp.add_argument("--all", action="store_true", help="list the sessions of every workspace")
    sp.add_argument("--json", action="store_true", help=_JSON)


def _log(sp: argparse.ArgumentParser) -> None:
    # One positional of one or two words (views.cmd_log checks the count): argparse's own
    # usage for it would read as a repeatable argument.
    sp.usage = "musec log [-h] [--json] ID\n       musec log verify ID"
    sp.add_argument("args", nargs="+", metavar="ID",
                    help="the session's id; `verify ID` checks its hash chain instead (exit 0 when intact)")
    sp.add_argument("--json", action="store_true", help="print each event as its JSON line, as logged")


def _attach(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", help=_SESSION_ID)
    sp.add_argument("--output-format", choices=("text", "stream-json"), default="text",
                    help="text (for a person) or stream-json (one event per line as it happens) (default: text)")


def _daemon(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("action", choices=("start", "stop", "status", "run", "install"),
                    help="start it in the background, stop it, show its status (exit 5 when not running), "
                         "run it in the foreground, or install it as a user service (systemd, launchd)")
    sp.add_argument("--json", action="store_true", help="with status: " + _JSON)


def _resume(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", nargs="?", default=None, help="the session to reopen (default: pick one from a list)")
    sp.add_argument("--last", action="store_true", help="the latest session of this workspace")
    sp.add_argument("--workspace", default=None,
                    help="pick among this workspace's sessions only (default: every workspace's; with --last: "
                         "the current directory)")


def _session_id_json(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", help=_SESSION_ID)
    sp.add_argument("--json", action="store_true", help=_JSON)


def _gc(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--older-than", required=True, help="an age like 30d, 12h or 90m")
    sp.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    sp.add_argument("--discard-unapplied", action="store_true",
                    help="remove worker branches holding commits never applied too (kept otherwise)")


def _cost(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", nargs="?", default="", help="the session (default: the latest of this workspace)")
    sp.add_argument("--json", action="store_true", help=_JSON)


def _compact(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", help=_SESSION_ID)
    sp.add_argument("focus", nargs="?", default="", help="what the summary should keep in mind")
    sp.add_argument("--json", action="store_true", help=_JSON)


def _apply(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("session_id", help=_SESSION_ID)
    sp.epilog = (
        "If your branch moved on since the workers started (a commit, another session's apply), the "
        "integration is merged onto it; the tests are not run again on that merge. From a snapshot of "
        "uncommitted changes only the workers' changes are committed; when they touch files you had "
        "uncommitted changes in, they are left uncommitted in your working tree, next to yours. Refused "
        "(exit 1, saying what to do) when your working tree changed since the snapshot, or your branch "
        "was reset or switched away."
    )


def _json_only(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--json", action="store_true", help=_JSON)


def _demo(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--keep", action="store_true", help="keep the example's copy")


def _provider(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("provider", nargs="?", default=None, choices=("anthropic", "openai", "azure"),
                    help="default: the provider of $MUSEC_MODEL, else anthropic")


def _none(sp: argparse.ArgumentParser) -> None:
    pass


def _mcp(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("action", choices=("list",), help="list: each server, its state and its tools")
    sp.add_argument("--workspace", default=None,
                    help="the workspace whose servers (.mcp.json, project config) are listed too "
                         "(default: the current directory)")
    sp.add_argument("--json", action="store_true", help=_JSON)


def _eval(sp: argparse.ArgumentParser) -> None:
    from .evaluate import add_arguments

    add_arguments(sp)


def _optimize(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("spec", help="a shipped spec (cpu-example, kda, mla-decode) or a path to a kernel-task.toml")
    sp.add_argument("task", nargs="?", default="", help="what to tell the agent (default: run the campaign)")
    session_opts(sp)
    sp.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text", help=_OUTPUT_FORMAT)
    sp.add_argument("--budget-usd", type=float, default=None, metavar="X", help=_BUDGET)
    sp.add_argument("--max-wall", default=None, metavar="DURATION", help="wall-time budget such as 24h (default: the spec's)")


# name -> (help, options); the order is the order of `musec --help`.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ('run one task headlessly (musec run "TASK", or musec run - to read it from stdin)', _run),
    "optimize": ("run a kernel-optimisation campaign (a session like any other)", _optimize),
    "kernels": ("a kernel campaign's leaderboard, best first, with its CSV and plot", _session_id_json),
    "sessions": ("list sessions, the most recently active first", _sessions),
    "log": ("show a session's event log, or `log verify ID`", _log),
    "attach": ("join a live session: follow its events and answer its approvals", _attach),
    "daemon": ("manage the daemon", _daemon),
    "resume": ("reopen a session interactively (a picker when no ID)", _resume),
    "replay": ("rebuild a session from its log, no model calls", _session_id_json),
    "gc": ("remove sessions (not live ones) last active longer ago than an age, with their blobs", _gc),
    "cost": ("tokens and dollars of a session, per agent and model", _cost),
    "plan": ("a session's plan, its state and its progress", _session_id_json),
    "agents": ("a session's agents: role, state, last activity, tokens, cost", _session_id_json),
    "workers": ("a session's fan-out workers: branch, state, commits, tokens, cost", _session_id_json),
    "compact": ("compact a session's context now: summarise its older turns, keep its recent ones", _compact),
    "apply": ("bring a session's integrated fan-out result onto your branch (git merge)", _apply),
    "models": ("the model catalog: ids, aliases, context, prices", _json_only),
    "doctor": ("check the sandbox, socket, credentials, git and GPU", _none),
    "mcp": ("MCP servers: `musec mcp list` shows servers, state and tools", _mcp),
    "demo": ("fix a bundled example's failing test with the scripted model", _demo),
    "eval": ("evaluate musec on Harbor tasks (Terminal-Bench style); `eval report JOB`", _eval),
    "login": ("store a provider's API key in a keyring, named when stored (used when its variable is not set)", _provider),
    "logout": ("remove a provider's API key from the keyring", _provider),
    "chat": ("interactive session (the default with no command)", session_opts),
}


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is a command and not the value of a
    top-level option; ``None`` for the bare ``musec``."""
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--":
            return None
        if word in COMMANDS:
            return word
        skip = word in _VALUE_OPTIONS
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: every command named, only ``argv``'s command filled in
    (every one when ``argv`` is ``None``)."""
    from .version import __version__

    wanted = command_of(argv) if argv is not None else None
    parser = argparse.ArgumentParser(prog="musec", description="musec: a terminal coding agent.")
    parser.add_argument("--version", action="version", version=f"musec {__version__}")
    session_opts(parser)  # `musec --model M` opens an interactive session
    sub = parser.add_subparsers(dest="command")
    for name, (help_, options) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        if argv is None or name == wanted:
            options(sp)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` (argparse exits 2 with its usage line on bad arguments).

    ``musec help [COMMAND]`` is ``musec [COMMAND] --help``; an ``--older-than`` value that
    starts with ``-`` is taken as its value (so ``-5d`` gets gc's own message, not argparse's).
    """
    argv = list(argv)
    if argv[:1] == ["help"]:
        argv = [*argv[1:2], "--help"]
    for i, arg in enumerate(argv[:-1]):
        if arg == "--older-than" and argv[i + 1].startswith("-"):
            argv[i:i + 2] = [f"--older-than={argv[i + 1]}"]
            break
    return build_parser(argv).parse_args(argv)
