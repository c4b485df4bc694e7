"""The pattern of a ``net(...)`` rule (``agents/permissions.py``): which hosts a command may
reach through the session's proxy (``daemon/netproxy.py``).

``net(HOST)`` is any port of that host, ``net(HOST:PORT)`` one port, and ``*`` in the host
any run of characters but ``:`` (``net(*.example.org)`` is every subdomain, not
``example.org`` itself). Matched against ``host:port`` in lower case.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["NetVerdict", "decide_host", "host_regex"]

_HOST_PATTERN = re.compile(r"[A-Za-z0-9*.\-]+|\[[0-9A-Fa-f:.]+\]")


class NetVerdict(NamedTuple):
    """What the rules say of one connection: ``decision`` allow/ask/deny, the ``rule`` that
    decided (empty: none did) and its ``source`` (``user``/``project``, or ``mode``)."""

    decision: str
    rule: str = ""
    source: str = "mode"


def host_regex(pattern: str, text: str, error: type[Exception] = ValueError) -> re.Pattern[str]:
    """The regex that ``host:port`` must fully match for the rule ``text`` with ``pattern``.

    Raises:
        error: ``pattern`` is not ``HOST``, ``HOST:PORT`` or ``*.DOMAIN`` (the message quotes
            the rule and shows the forms).
    """
    host, _, port = pattern.rpartition(":") if not pattern.endswith("]") and ":" in pattern else (pattern, "", "")
    if not _HOST_PATTERN.fullmatch(host) or (port and not port.isdigit()):
        raise error(f"rule {text!r}: write a host name, HOST:PORT or *.DOMAIN, e.g. net(pypi.org), "
                    "net(*.example.org), net(127.0.0.1:8080)")
    body = "[^:]*".join(re.escape(piece) for piece in host.lower().strip("[]").split("*"))
    return re.compile(body + ":" + (re.escape(port) if port else r"\d+"))


def decide_host(host: str, port: int, rules: Sequence[Any]) -> NetVerdict:
    """Whether a command may connect to ``host:port``: the ``net`` rules
    (``permissions.Rule``), deny over ask over allow; with none matching the network stays
    closed (deny, source ``mode``)."""
    target = f"{host.lower().rstrip('.')}:{port}"
    for action in ("deny", "ask", "allow"):
        for rule in rules:
            if rule.kind == "net" and rule.action == action and (rule.regex is None or rule.regex.fullmatch(target)):
                return NetVerdict(action, rule.text, rule.source)
    return NetVerdict("deny")
