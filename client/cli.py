"""``musec``: the thin command-line client (DESIGN §3, contract).

``main`` parses the command line (``args``), runs the command's module, and turns every
error into its one-line message and its exit code (``exitcodes``). Every command talks
to the daemon over its socket; nothing here touches session files. A command's module is
imported only when that command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from .args import parse
from .errors import ClientError
from .exitcodes import OK, Condition, for_condition
from .output import err

# command -> (module, function taking the parsed arguments)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "cmd_run"),
    "optimize": ("kernels", "cmd_optimize"),
    "kernels": ("kernels", "cmd_kernels"),
    "sessions": ("views", "cmd_sessions"),
    "log": ("views", "cmd_log"),
    "replay": ("views", "cmd_replay"),
    "cost": ("views", "cmd_cost"),
    "plan": ("plan", "cmd_plan"),
    "agents": ("views", "cmd_agents"),
    "workers": ("views", "cmd_workers"),
    "compact": ("views", "cmd_compact"),
    "models": ("views", "cmd_models"),
    "attach": ("attach", "cmd_attach"),
    "resume": ("interactive", "cmd_resume"),
    "chat": ("interactive", "cmd_interactive"),
    "gc": ("manage", "cmd_gc"),
    "apply": ("manage", "cmd_apply"),
    "daemon": ("service", "cmd_daemon"),
    "doctor": ("doctor", "cmd_doctor"),
    "mcp": ("extensions", "cmd_mcp"),
    "demo": ("demo", "cmd_demo"),
    "eval": ("evaluate", "cmd_eval"),
    "login": ("login", "cmd_login"),
    "logout": ("login", "cmd_logout"),
}


def command(name: str | None) -> Callable[[argparse.Namespace], int]:
    """The function that runs command ``name`` (``None``: the interactive session)."""
    module, function = COMMANDS[name or "chat"]
    fn = getattr(import_module(f"{__package__}.{module}"), function)
    if name == "doctor":
        return lambda _args: fn()
    return fn


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``musec ARGV``; return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    try:
        return int(command(args.command)(args))
    except ClientError as exc:
        err(f"musec: {exc}")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return int(for_condition(Condition.INTERRUPTED))
    except BrokenPipeError:
        # The reader went away (`musec log ID | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(OK)
    except Exception as exc:  # noqa: BLE001 - the last guard: one line, never a traceback
        if os.environ.get("MUSEC_DEBUG"):
            raise
        err(f"musec: unexpected {type(exc).__name__}: {exc} (a fault in musec; run again with MUSEC_DEBUG=1 "
            "for the traceback and report it)")
        return int(for_condition(Condition.INTERNAL))
