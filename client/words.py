"""Events in words for the person: who answered an approval, a plan or a grill's
question; a hook; a goal; an interrupted answer. Every string taken from an event is
cleaned (``output.safe``)."""

from __future__ import annotations

from typing import Any

from .calls import short as _short
from .output import counted, safe


def _s(ev: dict[str, Any], key: str, default: str = "") -> str:
    """``ev[key]`` as clean text."""
    value = ev.get(key, default)
    return safe(value if isinstance(value, str) else str(value))


PLAN_ANSWERS = {  # a plan's answer (``plan_action``) in words: not allowed or denied, what the person chose
    "approve": "approved", "approve_auto": "approved, with auto edits", "edit": "edited, then approved",
    "fresh": "approved, to start fresh with the plan alone", "feedback": "not approved yet: keep planning, with feedback",
    "grill": "not approved yet: grill it first",
}


def answer_words(ev: dict[str, Any], by_you: bool = False) -> str:
    """An ``approval_resolved`` in words: ``approval: allowed by you``, ``approval: denied
    in another terminal``, ``plan: not approved yet: grill it first (answered by you)``,
    ``grill: answered by you``. ``by_you``: this terminal answered it."""
    decision, by, call_id = _s(ev, "decision"), _s(ev, "by"), _s(ev, "call_id")
    if by_you:
        who = "by you"
    elif by.startswith("client:"):
        who = "in another terminal"
    elif by in ("", "person"):
        who = "by the person"
    else:
        who = f"by {by.replace('_', ' ')}"
    if call_id.startswith("plan-") and decision in ("allow", "deny"):  # a plan's question: the key chose an action
        action = _s(ev, "plan_action") or ("approve" if decision == "allow" else "")
        return f"plan: {PLAN_ANSWERS.get(action, 'not approved yet')} (answered {who})"
    if call_id.startswith("grill-") and decision in ("allow", "deny"):  # a grill's question: answered, or /end
        return f"grill: {'answered' if decision == 'allow' else 'ended'} {who}"
    decision = {"allow": "allowed", "deny": "denied", "always": "always allowed"}.get(decision, decision)
    saved = ev.get("saved_rules")
    rules = ""
    if isinstance(saved, list) and saved:
        named = ", ".join(safe(str(r)) for r in saved)
        error = ev.get("save_error")
        if isinstance(error, str) and error:  # said, never "saved" (fresh-user trial s7: a broken config.toml)
            rules = f" ({named} for this session only; not saved: {safe(error)})"
        elif ev.get("saved_to") == "":  # a rule only this session keeps (an older daemon: no field)
            rules = f" ({named} for this session only)"
        else:
            rules = f" (saved {named})"
    return f"approval: {decision} {who}{rules}"


def interrupter_words(ev: dict[str, Any], by_you: bool = False) -> str:
    """Who interrupted a turn (``turn_ended.interrupted_by``), to append to its line: `` (by
    you)``, `` in another terminal``, or "" when no client did (a limit, the daemon stopping).
    ``by_you``: this terminal asked for the interrupt."""
    if not _s(ev, "interrupted_by").startswith("client:"):
        return ""
    return " (by you)" if by_you else " in another terminal"


def interrupted_words(ev: dict[str, Any]) -> str:
    """An interrupted model message in words: ``answer interrupted (about 40 output tokens,
    counted in /cost)``; "about" when the provider had not said (``usage_estimated``)."""
    usage = ev.get("usage")
    out = usage.get("output_tokens") if isinstance(usage, dict) else None
    if not isinstance(out, int) or isinstance(out, bool):
        return "answer interrupted"
    return (f"answer interrupted ({'about ' if ev.get('usage_estimated') else ''}{counted(out, 'output token')}, "
            "counted in /cost)")


#: The lifecycle points where a hook's block stops nothing, and what happened instead.
_UNBLOCKABLE = {
    **dict.fromkeys(("SessionStart", "SessionEnd", "AgentStart", "AgentStop", "PreCompact", "PostCompact",
                     "WorktreeCreate", "WorktreeRemove"), "answered block, which this point ignores: nothing was blocked"),
    "PostToolUse": "blocked after the call ran (the reason went to the model with its result)",
}


def hook_lines(ev: dict[str, Any]) -> list[str]:
    """``hook_words`` as a list (empty: no line); for ``session_started``, a line for each
    hook whose matcher names no tool, so that it can never run (fresh-user s8 K7)."""
    if ev.get("type") != "session_started":
        return [line] if (line := hook_words(ev)) else []
    extensions = ev.get("extensions")
    return [f"⚑ {_s({'w': w}, 'w')}" for w in extensions.get("hook_warnings", [])] if isinstance(extensions, dict) else []


def hook_words(ev: dict[str, Any]) -> str:
    """One line for the person about a hook (``hook_ran``, ``hook_context``): every block,
    error, timeout and refusal to run, and each time a Stop hook sends the agent back;
    ``""`` for what needs no line (a hook that allowed, added context)."""
    event = _s(ev, "hook_event")
    if ev.get("type") == "hook_context":
        return f"⚑ {_short(_s(ev, 'text'), 300)}" if event == "Stop" else ""
    decision = _s(ev, "decision")
    if decision == "allow" or (decision == "block" and event == "Stop"):  # the Stop send-back is its hook_context
        return ""
    what = {"block": "blocked", "error": "failed", "timeout": "timed out", "untrusted": "not run (changed since trust)",
            "approve": "approved the call"}
    if decision == "block" and event in _UNBLOCKABLE:  # "blocked" would say what did not happen
        what["block"] = _UNBLOCKABLE[event]
    reason = _short(_s(ev, "reason"), 300)
    return f"⚑ {event} hook `{_short(_s(ev, 'command'), 60)}` {what.get(decision, decision)}" + (f": {reason}" if reason else "")


def goal_words(ev: dict[str, Any]) -> str:
    """A goal event in one line: set, judged (met or why not), paused, ended."""
    kind = ev.get("type")
    goal = _s(ev, "goal_id", "goal")
    if kind == "goal_set":
        check = f" (check: {_short(_s(ev, 'check'), 60)})" if ev.get("check") else ""
        return f"◎ goal {goal} set: {_short(_s(ev, 'condition'), 100)}{check}"
    if kind == "goal_checked":
        verdict = _s(ev, "verdict").replace("_", " ")
        if ev.get("by") == "check":  # the exit status and the output's last line (pytest's tally)
            tail = [ln for ln in _s(ev, "output").splitlines() if ln.strip() and not ln.startswith("exit status:")][-1:]
            detail = f"exit {_s(ev, 'exit_status')}" + (f" · {_short(tail[0], 90)}" if tail else "")
        else:
            reason = _s(ev, "reason").strip().splitlines()
            detail = _short(reason[0], 100) if reason else ""
        return f"◎ goal {goal}, judgment {_s(ev, 'n')} ({_s(ev, 'by')}): {verdict}" + (f" · {detail}" if detail else "")
    status = _s(ev, "status")
    line = f"◎ goal {goal} {status}: {_short(_s(ev, 'reason'), 100)}"
    if status == "paused" and _s(ev, "by") == "stuck":
        line += " · /goal resume to go on"
    return line
