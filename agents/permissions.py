"""Approval rules: ``bash(pytest *)``, ``edit(src/**)``, ``read(~/.ssh/**)`` under allow, ask, deny.

A rule is ``KIND(PATTERN)`` or a bare ``KIND`` (every call of that kind). Kinds and the
tools they cover:

| kind             | tools                       | the pattern is matched against            |
|------------------|-----------------------------|-------------------------------------------|
| ``bash``         | ``bash``                    | each simple command of the command line   |
| ``edit``/``write`` | ``edit_file``, ``write_file`` | the path, relative to the workspace     |
| ``read``         | ``read_file``, ``glob``, ``grep`` | the path (``glob``/``grep``: the search base) |
| ``net``          | (commands' connections: ``netrules``, ``daemon/netproxy.py``) | ``host:port`` |

Command patterns: ``*`` is any run of characters, ``?`` one character, ``\\`` escapes; a
trailing `` *`` also matches the bare command (``pytest *`` matches ``pytest``). The
command line is split as bash parses it (``shellsplit``: control operators, comments,
quotes, heredocs, continuations, subshells, substitutions): an allow rule lets a line
through only when every command in it is allowed, and never one with ``$(...)``,
backticks or ``<(...)`` (those fall back to the mode); a deny or ask rule matches when
any command (including those inside substitutions, ``eval`` and ``sh -c``) or any quoted
text outside heredoc bodies matches, wrappers (``sudo -u root``, ``uv run``) and git's global
options (``git -C . push``) seen through. Where the commands cannot all be known (``$X``,
``eval "$cmd"``, ``git -c core.hooksPath=d``) and a deny or ask rule exists, it asks.

A command that writes files (``echo x > f``, ``sed -i``, ``cp a b``, ``tar -x``) or runs a
program its arguments name (``find -exec``, ``git -c alias.p=push p``) is covered by a rule
with a wildcard only as ``commandrules``' docstring says (``edit`` rules for its files;
a hand-written ``bash(cp *)`` inside the workspace); a rule naming the very command
(``bash(echo x >notes.txt)``) covers it. "Always" saves the very command for one that
destroys, publishes, writes files or runs another (``bash(rm -rf build)``), and
``approval_requested`` carries what it would save (``always``) so every terminal shows it.

Path patterns are the ``glob`` tool's globs (``**``, ``*``, ``?``, ``[a-z]``, ``{a,b}``; one
without ``/`` matches the file name at any depth); ``~`` is the home directory; an absolute
pattern matches the absolute path, a relative one the path in the workspace (symlinks
resolved). MCP tools are named by a glob over their names, without parentheses:
``mcp__github__*`` (every tool of the server ``github``), ``mcp__github__create_issue``.

Precedence: deny wins over ask over allow. Rules refine the approval mode
(``approval.decide``): a deny rule denies in every mode, an ask rule asks even in ``auto``
(not in ``never``, which never asks), an allow rule lets a call through without asking in ``ask`` mode; ``read-only`` still
refuses every write. Everything here is pure but ``Policy.decide``, which resolves paths.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .approval import Decision, decide
from .commandrules import (
    allowing_line,
    always_for_command,
    command_regex,
    command_segments,
    deny_candidates,
    other_names,
    pattern_problem,
    unsure_reason,
)
from .core.errors import AgentError
from .core.words import counted
from .netrules import host_regex
from .shellsplit import split_commands
from .tools.globmatch import compile_glob
from .trust import trust_covers

__all__ = [
    "ACTIONS", "KINDS", "Call", "Policy", "Rule", "RuleError", "Verdict",
    "command_segments", "decide_call", "parse_rule", "rules_for_call",
]

ACTIONS = ("allow", "ask", "deny")
KINDS: dict[str, tuple[str, ...]] = {
    "bash": ("bash",),
    "edit": ("edit_file", "write_file"),
    "write": ("edit_file", "write_file"),
    "read": ("read_file", "glob", "grep"),
    "net": (),  # no tool: the connections commands make through the session's proxy
}
_KIND_OF_TOOL = {tool: kind for kind, tools in KINDS.items() if kind != "write" for tool in tools}
#: musec's tools that no rule kind covers: a rule is the tool's bare name (``spawn_workers``),
#: allowing, asking or denying every call of it. A name not here is an error, never a rule
#: that silently matches nothing (a typo'd deny rule would protect nothing).
NAMED_TOOLS = frozenset({"spawn_workers", "ask_agent", "propose_plan", "skill", "evaluate_kernel",
                         "profile_kernel", "kernel_leaderboard", "grill_question"})
_MCP_RULE = re.compile(r"\s*(mcp__[A-Za-z0-9_*?\[\]-]+)\s*")
_RULE = re.compile(r"\s*([A-Za-z_]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
EXAMPLES = "bash(pytest *), edit(src/**), read(~/.ssh/**)"


class RuleError(ValueError):
    """A rule is malformed; the message quotes it and shows the syntax."""


@dataclass(frozen=True)
class Rule:
    """One parsed rule.

    ``text`` as written; ``action`` allow/ask/deny; ``kind`` a key of ``KINDS``;
    ``pattern`` ``None`` for a bare kind; ``source`` ``user`` or ``project``; ``origin``
    where it was written (a file and table), for messages.
    """

    text: str
    action: str
    kind: str
    pattern: str | None
    source: str = "user"
    origin: str = ""
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    absolute: bool = False
    tools: tuple[str, ...] = ()

    def covers(self, tool: str) -> bool:
        if self.kind == "mcp":
            return self.pattern is not None and fnmatch.fnmatchcase(tool, self.pattern)
        return tool in self.tools


def parse_rule(text: object, action: str, *, source: str = "user", origin: str = "", home: str | None = None) -> Rule:
    """Parse one rule written under ``action`` (allow/ask/deny).

    Args:
        text: the rule, e.g. ``"bash(pytest *)"``.
        home: what ``~`` expands to (default: the home directory).

    Raises:
        RuleError: the rule is not a string, not ``KIND(PATTERN)``, names an unknown
            kind, or has an empty pattern.
    """
    if action not in ACTIONS:
        raise RuleError(f"unknown rule list {action!r}; use allow, ask or deny")
    if not isinstance(text, str):
        raise RuleError(f"rule {text!r} is not a string; write rules as strings like {EXAMPLES}")
    mcp = _MCP_RULE.fullmatch(text)
    if mcp is not None:
        return Rule(text.strip(), action, "mcp", mcp.group(1), source, origin)
    if text.strip() in NAMED_TOOLS:
        return Rule(text.strip(), action, "tool", None, source, origin, tools=(text.strip(),))
    m = _RULE.fullmatch(text)
    if m is None:
        hint = "it is not closed with ')'" if "(" in text and not text.rstrip().endswith(")") else "it is not KIND(PATTERN)"
        raise RuleError(f"rule {text!r} is malformed: {hint}; write rules like {EXAMPLES}")
    kind, pattern = m.group(1).lower(), m.group(2)
    if re.search(r"\)\s*,\s*[A-Za-z_]+\s*\(", text):
        raise RuleError(f"rule {text!r} holds several rules; write each as its own string, like {EXAMPLES}")
    if kind not in KINDS:
        raise RuleError(f"rule {text!r} names unknown tool kind {kind!r}; use bash(...), edit(...), write(...), "
                        f"read(...), net(...), mcp__SERVER__TOOL or one of musec's tools by name "
                        f"({', '.join(sorted(NAMED_TOOLS))})")
    if pattern is not None:
        pattern = pattern.strip()
        if not pattern:
            raise RuleError(f"rule {text!r} has an empty pattern; write {kind}(*) or {kind} for every call")
        if pattern in ("*", "**"):
            pattern = None
    regex, absolute = None, False
    if pattern is not None:
        if kind == "bash":
            problem = pattern_problem(pattern)
            if problem:
                raise RuleError(f"rule {text!r} {problem}")
            regex = command_regex(pattern)
        elif kind == "net":
            regex = host_regex(pattern, text, RuleError)
        else:
            expanded = _expand_home(pattern, home)
            absolute = expanded.startswith("/")
            try:
                regex = compile_glob(expanded)
            except ValueError as exc:
                raise RuleError(f"rule {text!r}: {exc}") from None
    return Rule(text.strip(), action, kind, pattern, source, origin, regex, absolute, KINDS[kind])


def _expand_home(pattern: str, home: str | None) -> str:
    if pattern == "~" or pattern.startswith("~/"):
        base = home if home is not None else os.path.expanduser("~")
        return base.rstrip("/") + pattern[1:]
    return pattern


@dataclass(frozen=True)
class Call:
    """What the rules see of a tool call.

    ``tool`` the tool's name; ``access`` read/write/execute; ``command`` for ``bash``;
    ``paths`` for file tools: pairs of (absolute path, path relative to the workspace or
    ``None`` when outside it), symlinks resolved; ``workdir`` for ``bash``: the workspace,
    where the files a command writes by a relative name are (``None``: not known).
    """

    tool: str
    access: str
    command: str | None = None
    paths: tuple[tuple[str, str | None], ...] = ()
    workdir: str | None = None


def _path_matches(rule: Rule, abs_path: str, rel_path: str | None) -> bool:
    if rule.regex is None:
        return True
    if rule.absolute:
        return rule.regex.fullmatch(abs_path.lstrip("/")) is not None
    return rel_path is not None and rule.regex.fullmatch(rel_path) is not None


def _matches_any_part(rule: Rule, call: Call) -> bool:
    """Deny and ask rules: any part of the call matches."""
    if not rule.covers(call.tool):
        return False
    if rule.regex is None:
        return True
    if rule.kind == "bash":
        if call.command is None:
            return False
        candidates = deny_candidates(call.command, split_commands(call.command))
        return any(rule.regex.fullmatch(c) for c in candidates)
    return any(_path_matches(rule, a, r) for a, r in call.paths)


def _allowing(rules: Sequence[Rule], call: Call) -> list[Rule]:
    """Allow rules: the rules that together let every part of the call through, or []."""
    every = rules
    rules = [r for r in rules if r.covers(call.tool)]
    bare = [r for r in rules if r.regex is None]
    if bare:
        return bare[:1]
    if call.tool == "bash":
        if call.command is None:
            return []
        split = split_commands(call.command)
        if split.unsure or split.substitution or not split.parsed:
            return []  # what runs is not known before it runs: the mode decides
        commands = [c for c in split.commands if c.text]
        if not commands:
            return []
        edits = [r for r in every if r.kind in ("edit", "write") and r.action == "allow"]
        return allowing_line(rules, edits, commands, call.workdir, _path_matches)
    if not call.paths:
        return []
    used = []
    for a, r in call.paths:
        rule = next((x for x in rules if _path_matches(x, a, r)), None)
        if rule is None:
            return []
        if rule not in used:
            used.append(rule)
    return used


@dataclass(frozen=True)
class Verdict:
    """A decision and what made it: ``source`` is ``user``/``project`` (a rule, quoted in
    ``rule``), ``mode`` (the approval mode), ``person`` (someone answered), ``hook``
    (a PermissionRequest hook refused or approved it) or ``plan`` (the planning profile, ``origin``
    says why)."""

    decision: Decision
    rule: str = ""
    source: str = "mode"
    origin: str = ""

    def fields(self) -> dict[str, str]:
        """The fields added to the log events of this call."""
        return {"rule": self.rule, "source": self.source}

    def refusal(self, mode: str, access: str) -> str:
        """Why the call was not run, for the model (one line)."""
        if self.source == "person":
            return "not run: the person denied it"
        if self.source == "hook":
            return "not run: a PermissionRequest hook refused it"
        if self.source == "plan":
            return f"not run: {self.origin}; propose the plan with propose_plan first"
        if self.source == "mode":
            return f"not run: approval mode {mode} does not allow {access} calls"
        where = f" ({self.origin})" if self.origin else ""
        return f"not run: the {self.source} rule deny {self.rule}{where} forbids it"


def _joined(rules: list[Rule]) -> tuple[str, str, str]:
    return ", ".join(r.text for r in rules), rules[0].source, rules[0].origin


def decide_call(mode: str, call: Call, rules: Sequence[Rule]) -> Verdict:
    """The decision for ``call`` under ``mode`` refined by ``rules`` (deny > ask > allow).

    Raises:
        UnknownApprovalMode: ``mode`` is not an approval mode.
    """
    base = decide(mode, call.access)
    deny = [r for r in rules if r.action == "deny" and _matches_any_part(r, call)]
    if deny:
        return Verdict("deny", *_joined(deny[:1]))
    if base == "deny":
        return Verdict("deny")
    unsure = _unsure_verdict(mode, call, rules)
    if unsure is not None:
        return unsure
    ask = [r for r in rules if r.action == "ask" and _matches_any_part(r, call)]
    if ask and mode != "never":
        return Verdict("ask", *_joined(ask[:1]))
    allow = _allowing([r for r in rules if r.action == "allow"], call)
    if allow:
        return Verdict("allow", *_joined(allow))
    return Verdict(base)


def _unsure_verdict(mode: str, call: Call, rules: Sequence[Rule]) -> Verdict | None:
    """A command line whose commands cannot all be known before it runs (``unsure_reason``)
    could be one a deny or ask rule is about: ask (deny in ``never``, which never asks).
    ``None`` when no such rule or the line is clear."""
    if call.tool != "bash" or call.command is None:
        return None
    guards = [r for r in rules if r.action in ("deny", "ask") and r.covers("bash") and r.regex is not None]
    if not guards:
        return None
    why = unsure_reason(call.command)
    if why is None:
        return None
    rule = guards[0]
    origin = f"could not tell whether it applies: {why}"
    return Verdict("deny" if mode == "never" else "ask", rule.text, rule.source, origin)


def rules_for_call(call: Call, workspace: str) -> list[str]:
    """Allow rules a person's "always" makes of ``call`` (``always_for_command`` for
    ``bash``); for files the directory (``edit(src/**)``), or the name of a file at the
    top of the workspace (``edit(setup.py)``); the tool's own name for an MCP tool and
    for musec's own tools (``NAMED_TOOLS``: ``spawn_workers``); ``[]`` for other tools, and for a command line none can be made of."""
    if _MCP_RULE.fullmatch(call.tool) and not any(c in call.tool for c in "*?[") or call.tool in NAMED_TOOLS:
        return [call.tool]
    kind = _KIND_OF_TOOL.get(call.tool)
    if kind is None:
        return []
    if kind == "bash":
        return always_for_command(call.command or "")
    out: list[str] = []
    for abs_path, rel in call.paths or ((workspace, "."),):
        if rel is None:
            pattern = _escape_glob(os.path.dirname(abs_path).rstrip("/")) + "/**"
        elif "/" in rel:
            pattern = _escape_glob(rel.rsplit("/", 1)[0]) + "/**"
        else:
            pattern = "**" if rel == "." else _escape_glob(rel)
        out.append(f"{kind}({pattern})")
    return list(dict.fromkeys(out))


def _escape_glob(text: str) -> str:
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", text)


# --- the policy an agent holds -----------------------------------------------------------


@dataclass
class Policy:
    """An agent's rules and how a person's "always" is kept.

    Args:
        rules: parsed rules, in any order (precedence does not depend on it).
        workspace: the agent's workspace (paths are matched relative to it).
        save: persists new allow rules (texts) and returns where, e.g. the user config;
            ``None`` keeps them for this agent only.
        trust: what the trust check found (``trust.TrustStatus``), for the log.
        plan_document: the plan document's path while the agent plans (mode ``plan``).
    """

    rules: list[Rule] = field(default_factory=list)
    workspace: Path | None = None
    save: Callable[[list[str]], str] | None = None
    trust: Any = None
    plan_document: str = ""

    def call(self, tool: str, access: str, input: dict[str, Any], paths: Iterable[str]) -> Call:
        """Describe a call for the rules; file paths are resolved against the workspace."""
        if tool == "bash":
            command = input.get("command") if isinstance(input, dict) else None
            return Call(tool, access, command=command if isinstance(command, str) else None,
                        workdir=os.path.realpath(self.workspace or os.getcwd()))
        if tool not in _KIND_OF_TOOL:
            return Call(tool, access)
        raws = [p for p in paths if isinstance(p, str) and p and "\0" not in p]
        if not raws and _KIND_OF_TOOL[tool] == "read":
            raws = ["."]
        workspace = os.path.realpath(self.workspace or os.getcwd())
        resolved = []
        for raw in raws:
            raw = os.path.expanduser(raw) if raw == "~" or raw.startswith("~/") else raw
            abs_path = os.path.realpath(os.path.join(workspace, raw))
            rel = os.path.relpath(abs_path, workspace) if _within(abs_path, workspace) else None
            resolved.append((abs_path, rel))
        return Call(tool, access, paths=tuple(resolved))

    def decide(self, mode: str, call: Call) -> Verdict:
        """``decide_call`` with this policy's rules; a file reached through another name
        (a hard link) is denied when a deny rule covers any of its names. In mode ``plan``
        the planning profile decides first (``plan.plan_verdict``)."""
        if mode == "plan":
            from .plan import plan_verdict

            found = plan_verdict(call.tool, call.access, call.paths, self.plan_document)
            if found is not None:
                return Verdict(found[0], rule=found[1] if found[0] == "allow" else "", source="plan",
                               origin=found[1] if found[0] == "deny" else "")
        verdict = decide_call(mode, call, self.rules)
        if verdict.decision == "deny" or not call.paths:
            return verdict
        guarded = next((rel for _, rel in call.paths if rel and call.access == "write" and trust_covers(rel)), "")
        if guarded and verdict.decision == "allow" and mode != "never":  # even in auto (s6 G20)
            return Verdict("ask", source="trust", origin=f"{guarded} is a file project trust covers")
        workspace = os.path.realpath(self.workspace or os.getcwd())
        others = tuple(p for a, _ in call.paths for p in other_names(a, workspace))
        if others:
            denies = [r for r in self.rules if r.action == "deny"]
            linked = decide_call(mode, Call(call.tool, call.access, paths=others), denies)
            if linked.decision == "deny" and linked.source != "mode":
                return linked
        return verdict

    def read_deny_globs(self) -> tuple[str, ...]:
        """The globs of the ``read`` deny rules, absolute or relative to the workspace, for
        the sandbox to hide from commands (``SandboxPolicy.read_deny``)."""
        out = []
        for rule in self.rules:
            if rule.action == "deny" and rule.kind == "read" and rule.pattern is not None:
                pattern = _expand_home(rule.pattern, None)
                out.append(pattern if pattern.startswith("/") or "/" in pattern else "**/" + pattern)
        return tuple(dict.fromkeys(out))

    def filter_listing(self, tool: str, content: str) -> str:
        """Drop the lines of a ``grep``/``glob`` result whose file a ``read`` deny rule
        covers: searching a folder must not reveal what reading the file would not.

        ``grep`` lines are ``PATH:LINE:TEXT``, ``glob`` lines are ``PATH`` (relative to the
        workspace). A note says how many lines were hidden and by which rule.
        """
        denies = [r for r in self.rules if r.action == "deny" and r.covers(tool)]
        if tool not in ("grep", "glob") or not denies:
            return content
        workspace = os.path.realpath(self.workspace or os.getcwd())
        kept, hidden, by = [], 0, ""
        for line in content.splitlines():
            rel = line.split(":", 1)[0] if tool == "grep" else line
            abs_path = os.path.realpath(os.path.join(workspace, rel))
            rel_path = os.path.relpath(abs_path, workspace) if _within(abs_path, workspace) else None
            names = [(abs_path, rel_path), *other_names(abs_path, workspace)] if rel else []
            rule = next((r for r in denies for a, p in names if _path_matches(r, a, p)), None)
            if rule is None:
                kept.append(line)
            else:
                hidden, by = hidden + 1, rule.text
        if hidden:
            kept.append(f"[{counted(hidden, 'result line')} hidden by the deny rule {by}]")
        return "\n".join(kept)

    def always_rules(self, call: Call) -> list[str]:
        """The allow rules a person's "always" on ``call`` would save (``rules_for_call``),
        to show before they answer (``approval_requested``'s ``always``): a tool no rule
        kind covers is named bare (allowed by name for this agent only); ``[]``: a
        command line none can be made of ("always" then allows this call only)."""
        texts = rules_for_call(call, str(self.workspace or "."))
        return texts if texts or call.tool == "bash" else [call.tool]

    def remember(self, call: Call) -> dict[str, Any]:
        """A person said "always": allow calls like ``call`` from now on (and save the rules).

        Returns the fields for the ``approval_resolved`` event: ``saved_rules`` and
        ``saved_to`` (or ``save_error``). A call no rule kind covers is allowed by tool
        name for this agent only; a command line no rule can be made of
        (``always_for_command``) saves nothing.
        """
        texts = rules_for_call(call, str(self.workspace or "."))
        if not texts and call.tool == "bash":
            return {"saved_rules": [], "saved_to": ""}
        if not texts:
            self.rules.append(Rule(call.tool, "allow", "tool", None, "person", "always allow", tools=(call.tool,)))
            return {"saved_rules": [call.tool], "saved_to": ""}
        for text in texts:
            self.rules.append(parse_rule(text, "allow", source="user", origin="always allow"))
        if self.save is None:
            return {"saved_rules": texts, "saved_to": ""}
        try:
            return {"saved_rules": texts, "saved_to": self.save(texts)}
        except (OSError, ValueError, AgentError) as exc:
            return {"saved_rules": texts, "saved_to": "", "save_error": str(exc)[:300]}


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
