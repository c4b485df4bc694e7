"""Hooks: the person's and the project's commands run at the agent's lifecycle points.

Configured in ``config.toml`` (the person's, or a trusted project's ``.musec/config.toml``
whose scripts live in ``.musec/hooks/``)::

    [[hooks.PreToolUse]]
    matcher = "bash|edit_file"      # tool names: globs joined by |; "" or "*" = every tool
                                    # (also Claude Code's names, any case: Bash, Edit|Write,
                                    # and Tool(pattern) as in a permission rule: Bash(rm *))
    command = "python3 .musec/hooks/no_rm.py"
    timeout_s = 10                  # default 60
    sandbox = false                 # the person's own hooks only: run outside the sandbox

Lifecycle points (``EVENTS``): SessionStart, SessionEnd, UserPromptSubmit, PreToolUse,
PostToolUse, PermissionRequest, Stop, AgentStart, AgentStop (background agents),
PreCompact, PostCompact, WorktreeCreate, WorktreeRemove. Matchers apply to the tool
events (PreToolUse, PostToolUse, PermissionRequest); elsewhere a hook always runs. A matcher
is case-insensitive and knows Claude Code's tool names (``CLAUDE_TOOLS``: ``Bash``,
``Edit|Write``...), so a guard ported from it fires; ``Tool(pattern)`` matches the calls the
permission rule of that text would (``Bash(rm *)``, ``Edit(src/**)``). A matcher that can
match no tool is a ``matcher_problem``, said at session start and by ``musec doctor``
(a guard that never fires must not look like one that works).

A hook gets one JSON object on stdin: ``hook_event_name``, ``session_id``, ``cwd``,
``agent_id`` and the point's own fields (``tool_name``, ``tool_input``,
``tool_response``, ``prompt``, ``stop_hook_active``, ...; ``stop_hook_active`` is true
while the agent works on because a Stop hook sent it back, which it does at most
``agents.loop.MAX_STOP_HOOK_SENDS`` times in a row). It answers with its exit code and,
optionally, a JSON object on stdout:

- exit 0: go on. A JSON answer may hold ``decision: "block"`` with ``reason`` (the call,
  prompt or stop is refused and the reason goes to the model), ``additional_context``
  (text given to the model), ``updated_input`` (PreToolUse: the tool input to use
  instead). Plain text on stdout is added context for SessionStart, UserPromptSubmit,
  PreCompact (summary instructions) and PostCompact. A PermissionRequest hook of the
  person's may approve the call instead of asking: ``decision: "allow"`` (or Claude Code's
  ``hookSpecificOutput.decision.behavior: "allow"``; ``"deny"`` with ``message`` blocks); a
  project's cannot (shown as an error; the person is asked). A PreToolUse hook's Claude Code
  ``hookSpecificOutput.permissionDecision: "deny"`` blocks like ``decision: "block"``.
- exit 2: block; stderr is the reason.
- any other exit, a timeout, a hook that cannot start, stdout that starts with ``{`` but is
  not a JSON object, or an unknown ``decision``: an error (``decision`` ``error`` or
  ``timeout``). A PreToolUse hook exists to gate calls, so there an error fails closed:
  the call is blocked and the model is told which hook failed and why (a guard that hangs
  must not let every call through; a project's PreToolUse hook whose files changed since
  trust blocks too). At every other point an error blocks nothing. Every error, timeout
  and block is logged (``hook_ran``) and shown in the terminal.

Hooks run one after another in configuration order (the person's first), in the sandbox
with the workspace's permissions (``bwrap_argv``), stdin the JSON, the working directory the
workspace. A project hook runs only while the project files it depends on still hold the
content the person trusted (``verify_project``); every run, or refusal to run, is reported
to ``on_ran`` (the session logs it as ``hook_ran``).
"""

from __future__ import annotations

import fnmatch
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .core.errors import ConfigError
from .core.events import UNSET, HookRan
from .tools.base import SandboxPolicy

__all__ = ["CLAUDE_TOOLS", "EVENTS", "FAIL_CLOSED_EVENTS", "TOOL_EVENTS", "HookOutcome", "HookResult", "HookSpec", "Hooks",
           "matcher_problem", "parse_hooks"]

EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
          "Stop", "AgentStart", "AgentStop", "PreCompact", "PostCompact", "WorktreeCreate", "WorktreeRemove")
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PermissionRequest"})
_TEXT_CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit", "PreCompact", "PostCompact"})
FAIL_CLOSED_EVENTS = frozenset({"PreToolUse"})  # a hook that cannot answer here blocks the call
_ALLOW_DECISIONS = (None, "allow", "approve", "continue")
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 600.0
MAX_CAPTURE_BYTES = 64 * 1024
MAX_REASON_CHARS = 4000
_DEFAULT_SANDBOX = SandboxPolicy()
#: Claude Code's tool names (lowercased) and the musec tools they are; a matcher ported from
#: Claude Code names these. Its tools without a musec counterpart (WebFetch, Task...) match nothing.
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "bash": ("bash",), "read": ("read_file",), "write": ("write_file",), "edit": ("edit_file",),
    "multiedit": ("edit_file",), "glob": ("glob",), "grep": ("grep",), "ls": ("glob",),
}
_BUILTIN_TOOLS = ("read_file", "write_file", "edit_file", "glob", "grep", "bash")


def _known_tools() -> tuple[str, ...]:
    from .permissions import NAMED_TOOLS

    return (*_BUILTIN_TOOLS, *sorted(NAMED_TOOLS))


def _alternatives(matcher: str) -> list[str]:
    """The ``|``-joined parts of a matcher; a ``|`` inside ``Tool(...)`` is the pattern's."""
    parts, depth, cur = [], 0, ""
    for ch in matcher:
        depth += ch == "("
        depth -= ch == ")" and depth > 0
        if ch == "|" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [p.strip() for p in [*parts, cur] if p.strip()]


def _rule(alternative: str) -> Any:
    """The permission rule that a ``Tool(pattern)`` alternative is (``None``: a plain name
    glob). Claude Code's names are musec's kinds: ``Bash`` bash, ``Read`` read, ``Edit``,
    ``Write``, ``MultiEdit`` edit.

    Raises:
        RuleError: the text is no rule.
    """
    if "(" not in alternative:
        return None
    from .permissions import parse_rule

    head, _, rest = alternative.partition("(")
    kind = {"multiedit": "edit"}.get(head.strip().lower(), head.strip().lower())
    return parse_rule(f"{kind}({rest}", "deny")


@dataclass(frozen=True)
class HookSpec:
    """One configured hook.

    Attributes:
        event: one of ``EVENTS``.
        command: a shell command line (``/bin/sh -c``), run in the workspace.
        matcher: tool-name globs joined by ``|``; ``""`` matches everything.
        timeout_s: seconds before its process group is killed.
        source: ``user`` or ``project``.
        origin: the file it was configured in.
        sandbox: run in the sandbox (always for project hooks).
    """

    event: str
    command: str
    matcher: str = ""
    timeout_s: float = DEFAULT_TIMEOUT_S
    source: str = "user"
    origin: str = ""
    sandbox: bool = True

    def matches(self, tool: str | None, call: Any = None) -> bool:
        """Whether the hook runs for a call of ``tool``; ``call``: the call as the permission
        rules see it (``agents.permissions.Call``), for a ``Tool(pattern)`` matcher (without
        it such a matcher goes by the tool alone)."""
        if self.event not in TOOL_EVENTS or self.matcher.strip() in ("", "*") or tool is None:
            return True
        return any(_alternative_matches(alt, tool, call) for alt in _alternatives(self.matcher))


def _alternative_matches(alternative: str, tool: str, call: Any) -> bool:
    from .permissions import RuleError, _matches_any_part

    try:
        rule = _rule(alternative)
    except RuleError:
        return False  # refused when the config was read
    if rule is not None:
        return rule.covers(tool) and (call is None or _matches_any_part(rule, call))
    name = alternative.lower()
    if fnmatch.fnmatchcase(tool.lower(), name):
        return True
    return tool in CLAUDE_TOOLS.get(name, ())


def matcher_problem(hook: HookSpec) -> str | None:
    """Why ``hook``'s matcher can match no tool (a name that is no tool of musec's nor
    Claude Code's), in one line; ``None`` when it can (an ``mcp__`` name always may)."""
    if hook.event not in TOOL_EVENTS or hook.matcher.strip() in ("", "*"):
        return None
    known = _known_tools()
    for alt in _alternatives(hook.matcher):
        if alt.lower().startswith("mcp__") or _rule(alt) is not None:
            return None
        if any(_alternative_matches(alt, tool, None) for tool in known):
            return None
    return (f"{hook.origin}: the {hook.event} hook `{hook.command}` never runs: its matcher {hook.matcher!r} names no tool; "
            f"the tools are {', '.join(known)}, mcp__SERVER__TOOL (or Claude Code's Bash, Read, Write, Edit, Glob, Grep)")


def parse_hooks(table: object, *, source: str, origin: str) -> list[HookSpec]:
    """The hooks of a config file's ``hooks`` table.

    Raises:
        ConfigError: an unknown lifecycle point, a hook without ``command``, a bad
            ``timeout_s`` or an unknown key; the message names the file and the place.
    """
    if table is None:
        return []
    if not isinstance(table, dict):
        raise ConfigError(f"{origin}: `hooks` must be a table of lists, like [[hooks.PreToolUse]]")
    out: list[HookSpec] = []
    for event, entries in table.items():
        if event not in EVENTS:
            raise ConfigError(f"{origin}: unknown hook point {event!r}; use one of {', '.join(EVENTS)}")
        if not isinstance(entries, list):
            raise ConfigError(f"{origin}: hooks.{event} must be a list of tables, written [[hooks.{event}]]")
        for n, entry in enumerate(entries):
            where = f"{origin}: hooks.{event}[{n}]"
            if not isinstance(entry, dict):
                raise ConfigError(f"{where} must be a table with `command`")
            unknown = sorted(set(entry) - {"command", "matcher", "timeout_s", "sandbox"})
            if unknown:
                raise ConfigError(f"{where} has unknown key {unknown[0]!r}; use command, matcher, timeout_s, sandbox")
            command, matcher = entry.get("command"), entry.get("matcher", "")
            if not isinstance(command, str) or not command.strip():
                raise ConfigError(f'{where} needs `command = "..."` (a shell command line)')
            if not isinstance(matcher, str):
                raise ConfigError(f'{where}: matcher must be a string like "bash|edit_file"')
            _check_matcher(matcher, where)
            timeout = entry.get("timeout_s", DEFAULT_TIMEOUT_S)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_S:
                raise ConfigError(f"{where}: timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
            sandbox = entry.get("sandbox", True)
            if not isinstance(sandbox, bool):
                raise ConfigError(f"{where}: sandbox must be true or false")
            # A repository never takes its hooks out of the sandbox; only the person can.
            out.append(HookSpec(event, command, matcher, float(timeout), source, origin, sandbox or source != "user"))
    return out


def _check_matcher(matcher: str, where: str) -> None:
    """Refuse a ``Tool(pattern)`` matcher that is no permission rule (it would match nothing).

    Raises:
        ConfigError: naming the place and what is wrong.
    """
    from .permissions import RuleError

    for alt in _alternatives(matcher):
        try:
            _rule(alt)
        except RuleError as exc:
            raise ConfigError(f"{where}: matcher {matcher!r}: {exc}") from None


@dataclass(frozen=True)
class HookResult:
    """One hook's run.

    ``decision``: ``allow``, ``approve`` (a PermissionRequest hook approved the call),
    ``block``, ``error`` (failed or answered malformed JSON),
    ``timeout`` or ``untrusted`` (a project hook whose files changed since trust: not
    run). The last three block the call at a ``FAIL_CLOSED_EVENTS`` point, nothing
    elsewhere.
    """

    hook: HookSpec
    decision: str
    reason: str = ""
    context: str = ""
    updated_input: dict[str, Any] | None = None
    exit_status: int | None = None
    duration_s: float = 0.0

    def event(self, agent: str = "main") -> HookRan:
        """The ``hook_ran`` event of this run by ``agent`` (the hook's output only as its
        reason and context)."""
        return HookRan(
            agent=agent, hook_event=self.hook.event, command=self.hook.command, source=self.hook.source,
            matcher=self.hook.matcher, decision=self.decision, duration_s=round(self.duration_s, 3),
            exit_status=self.exit_status, sandbox=self.hook.sandbox,
            reason=self.reason or UNSET, context=self.context or UNSET,
            updated_input=self.updated_input if self.updated_input is not None else UNSET,
        )


@dataclass
class HookOutcome:
    """What the hooks of one lifecycle point decided together.

    ``blocked`` with the first blocking ``reason``; ``context`` every hook's added text;
    ``updated_input`` the tool input after every amendment (``None``: unchanged);
    ``approved``: a PermissionRequest hook of the person's approved the call (and none blocked).
    """

    blocked: bool = False
    approved: bool = False
    reason: str = ""
    context: list[str] = field(default_factory=list)
    updated_input: dict[str, Any] | None = None
    results: list[HookResult] = field(default_factory=list)


def _answer(event: str, exit_status: int | None, stdout: str, stderr: str) -> tuple[str, str, str, dict[str, Any] | None]:
    """``(decision, reason, context, updated_input)`` from a finished hook's exit and output."""
    if exit_status == 2:
        return "block", (stderr.strip() or "blocked by a hook")[:MAX_REASON_CHARS], "", None
    if exit_status != 0:
        return "error", f"exit status {exit_status}: {stderr.strip()[-500:]}", "", None
    text = stdout.strip()
    if not text.startswith("{"):
        return "allow", "", text[:MAX_REASON_CHARS] if event in _TEXT_CONTEXT_EVENTS else "", None
    try:
        answer = json.loads(text)
    except ValueError as exc:
        return "error", f"the answer is not valid JSON ({exc.msg} at character {exc.pos}): {text[:200]}", "", None
    if not isinstance(answer, dict):
        return "error", f"the answer is not a JSON object: {text[:200]}", "", None
    specific = answer.get("hookSpecificOutput")
    claude = _claude_answer(event, specific) if isinstance(specific, dict) else None
    context = answer.get("additional_context")
    if context is None and isinstance(specific, dict):
        context = specific.get("additionalContext")
    context = context[:MAX_REASON_CHARS] if isinstance(context, str) else ""
    if claude is not None:
        return claude[0], claude[1], context, None
    decision = answer.get("decision")
    if event == "PermissionRequest" and decision in ("allow", "approve"):
        return "approve", "", context, None
    if decision not in (*_ALLOW_DECISIONS, "block"):
        allowed = '"allow" (approve the call), "block"' if event == "PermissionRequest" else '"block"'
        return "error", f'unknown decision {decision!r}; answer {allowed} or leave it out', "", None
    updated = answer.get("updated_input")
    updated = updated if isinstance(updated, dict) and event == "PreToolUse" else None
    if decision == "block":
        reason = answer.get("reason")
        return "block", (reason if isinstance(reason, str) and reason else "blocked by a hook")[:MAX_REASON_CHARS], context, None
    return "allow", "", context, updated


def _claude_answer(event: str, specific: dict[str, Any]) -> tuple[str, str] | None:
    """``(decision, reason)`` from Claude Code's ``hookSpecificOutput``: a PermissionRequest's
    ``decision: {behavior: allow|deny, message}``, a PreToolUse's ``permissionDecision:
    deny`` with ``permissionDecisionReason`` (``allow``/``ask`` go on: the rules and the
    person still decide); ``None``: it decides nothing."""
    if event == "PermissionRequest" and "decision" in specific:
        decision = specific["decision"]
        behavior = decision.get("behavior") if isinstance(decision, dict) else None
        if behavior == "deny":
            message = decision.get("message")
            return "block", (message if isinstance(message, str) and message else "denied by a hook")[:MAX_REASON_CHARS]
        if behavior == "allow" and decision.get("updatedInput") is not None:
            return "error", "updatedInput is not taken at PermissionRequest (amend the input in a PreToolUse hook); the person is asked"
        if behavior == "allow":
            return "approve", ""
        return "error", f'unknown decision {decision!r}; answer {{"behavior": "allow"}} or {{"behavior": "deny", "message": "..."}}'
    if event == "PreToolUse" and "permissionDecision" in specific:
        verdict, reason = specific["permissionDecision"], specific.get("permissionDecisionReason")
        if verdict == "deny":
            return "block", (reason if isinstance(reason, str) and reason else "blocked by a hook")[:MAX_REASON_CHARS]
        if verdict not in ("allow", "ask"):
            return "error", f'unknown permissionDecision {verdict!r}; answer "deny" (or "allow", "ask": the rules decide)'
    return None


class Hooks:
    """The hooks of a session, and how they run.

    Args:
        specs: the hooks, the person's first.
        workspace: the working directory of every hook (absolute).
        env: the environment (credentials are scrubbed again by the sandbox).
        sandbox: the workspace's sandbox policy; ``mode="off"`` runs hooks unsandboxed
            only because the person chose ``--sandbox off``.
        session_id: sent to each hook.
        verify_project: says whether the project's hook files still hold the trusted
            content; a project hook does not run when it says no.
        on_ran: called with each result (the session logs ``hook_ran``).
        bwrap: the bubblewrap executable (``None``: not available; sandboxed hooks then fail).
        durable: awaited before a hook starts (the session's ``durable``: the write-ahead
            events recorded so far are on disk before any command runs).
    """

    def __init__(self, specs: Sequence[HookSpec], *, workspace: Path, env: Mapping[str, str],
                 sandbox: SandboxPolicy = _DEFAULT_SANDBOX, session_id: str = "",
                 verify_project: Callable[[], bool] = lambda: False,
                 on_ran: Callable[[HookResult, str], None] = lambda result, agent: None,
                 bwrap: str | None = None, durable: Callable[[], Awaitable[None]] | None = None) -> None:
        self.specs = list(specs)
        self.durable = durable
        self.workspace = workspace
        self.env = dict(env)
        self.sandbox = sandbox
        self.session_id = session_id
        self.verify_project = verify_project
        self.on_ran = on_ran
        self.bwrap = bwrap

    def matching(self, event: str, tool: str | None = None, call: Any = None) -> list[HookSpec]:
        return [h for h in self.specs if h.event == event and h.matches(tool, call)]

    async def run(self, event: str, payload: Mapping[str, Any], *, tool: str | None = None, call: Any = None,
                  agent: str = "main") -> HookOutcome:
        """Run the hooks of ``event`` (for ``tool``), one after another.

        A block stops the rest. Each PreToolUse amendment is what the next hook sees.
        ``call``: the call as the permission rules see it, for ``Tool(pattern)`` matchers.
        Never raises for what a hook did.
        """
        outcome = HookOutcome()
        data = {"hook_event_name": event, "session_id": self.session_id, "cwd": str(self.workspace),
                "agent_id": agent, **payload}
        for hook in self.matching(event, tool, call):
            if outcome.updated_input is not None:
                data["tool_input"] = outcome.updated_input
            if self.durable is not None:
                await self.durable()
            result = await self._run_one(hook, data)
            self.on_ran(result, agent)
            outcome.results.append(result)
            if result.context:
                outcome.context.append(result.context)
            if result.updated_input is not None:
                outcome.updated_input = result.updated_input
            if result.decision == "block":
                outcome.blocked, outcome.reason, outcome.approved = True, result.reason, False
                break
            if result.decision == "approve":
                outcome.approved = True
                continue
            if result.decision != "allow" and event in FAIL_CLOSED_EVENTS:
                outcome.blocked = True
                outcome.reason = f"the {event} hook `{hook.command}` failed ({result.decision}: {result.reason}), " \
                                 "and a guard that cannot answer blocks the call"
                break
        return outcome

    def _argv(self, hook: HookSpec, env: Mapping[str, str]) -> list[str] | None:
        command = ["/bin/sh", "-c", hook.command]
        if not hook.sandbox or self.sandbox.mode == "off":
            return command
        if self.bwrap is None:
            return None
        from .tools.sandbox import bwrap_argv

        return bwrap_argv(self.sandbox, self.workspace, env, command, bwrap=self.bwrap)

    def _env(self, hook: HookSpec) -> dict[str, str]:
        from .tools.sandbox import scrub_env

        env = scrub_env(self.env)
        env.update(MUSEC_PROJECT_DIR=str(self.workspace), MUSEC_SESSION_ID=self.session_id, MUSEC_HOOK_EVENT=hook.event)
        return env

    async def _run_one(self, hook: HookSpec, data: dict[str, Any]) -> HookResult:
        from .tools.procs import run_process_group

        if hook.source == "project" and not self.verify_project():
            return HookResult(hook, "untrusted", "the project's hooks changed since you trusted them; not run until trusted again")
        env = self._env(hook)
        argv = self._argv(hook, env)
        if argv is None:
            return HookResult(hook, "error", "no sandbox (bubblewrap) to run the hook in; install bubblewrap")
        out, err = bytearray(), bytearray()

        def cap(buf: bytearray) -> Callable[[bytes], None]:
            def feed(chunk: bytes) -> None:
                if len(buf) < MAX_CAPTURE_BYTES:
                    buf.extend(chunk[: MAX_CAPTURE_BYTES - len(buf)])
            return feed

        started = time.monotonic()
        try:
            exit_ = await run_process_group(argv, cwd=self.workspace, env=env, timeout_s=hook.timeout_s,
                                            sink=cap(out), stderr_sink=cap(err), kill_grace_s=1.0,
                                            stdin_data=json.dumps(data, ensure_ascii=False).encode())
        except OSError as exc:
            return HookResult(hook, "error", f"the hook could not start: {exc.strerror or exc}", duration_s=time.monotonic() - started)
        duration = time.monotonic() - started
        if exit_.timed_out:
            return HookResult(hook, "timeout", f"no answer within {hook.timeout_s:g} s; killed", exit_status=exit_.exit_status,
                              duration_s=duration)
        decision, reason, context, updated = _answer(hook.event, exit_.exit_status, out.decode("utf-8", "replace"),
                                                     err.decode("utf-8", "replace"))
        if decision == "approve" and hook.source != "user":
            # A script a project hook runs may lie outside what trust hashes: it never approves.
            decision, reason = "error", "a project's PermissionRequest hook cannot approve a call; the person is asked"
        return HookResult(hook, decision, reason, context, updated, exit_.exit_status, duration)
