"""Approval modes: which tool calls need a person's yes (``--approval``).

| mode        | reads | workspace writes | commands (sandboxed)            |
|-------------|-------|------------------|---------------------------------|
| ``auto``    | allow | allow            | allow                           |
| ``ask``     | allow | ask              | ask                             |
| ``read-only`` | allow | deny           | allow, workspace mounted read-only |
| ``never``   | allow | allow            | allow (the sandbox is the only boundary) |
| ``plan``    | allow | deny (but the plan document) | allow, workspace mounted read-only |

``plan`` is the profile of a session while it plans (``agents/plan.py``): it is entered with
``/plan`` or ``musec run --plan`` and left when the person approves the plan; it is never
given with ``--approval`` on the wire. Its exceptions (the plan document, no fan-out) are
decided by ``plan.plan_verdict`` through ``permissions.Policy.decide``.

Paths outside the workspace are refused by the tools themselves in every mode. Approval
rules (``permissions.py``) refine this table per call: ``permissions.decide_call``.
"""

from __future__ import annotations

from typing import Literal

Decision = Literal["allow", "ask", "deny"]
MODES = ("auto", "ask", "read-only", "never")
PROFILES = (*MODES, "plan")
"""Every mode an agent can be in: the approval modes and the planning profile."""


class UnknownApprovalMode(ValueError):
    pass


def decide(mode: str, access: str) -> Decision:
    """The decision for a call with ``access`` (``read``/``write``/``execute``) under ``mode``.

    Raises:
        UnknownApprovalMode: ``mode`` is not one of ``MODES``.
    """
    if mode not in PROFILES:
        raise UnknownApprovalMode(f"unknown approval mode {mode!r}; use one of {', '.join(MODES)}")
    if access == "read" or mode in ("auto", "never"):
        return "allow"
    if mode == "ask":
        return "ask"
    return "deny" if access == "write" else "allow"


def sandbox_profile(mode: str) -> str:
    """The sandbox profile commands run under in ``mode``."""
    return "read-only" if mode in ("read-only", "plan") else "workspace-write"
