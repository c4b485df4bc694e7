"""The pattern of a ``net(...)`` rule (``agents/permissions.py``): which hosts a command may
reach through the session's proxy (``daemon/netproxy.py``).

``net(HOST)`` is any port of that host, ``net(HOST:PORT)`` one port, and ``*`` in the host
any run of characters but ``:`` (``net(*.example.org)`` is every subdomain, not
``example.org`` itself). Matched against ``host:port`` in lower case.
"""

from __future__ import annotations

import re

__all__ = ["host_regex"]

_HOST_PATTERN = re.compile(r"[A-Za-z0-9*.\-]+|\[[0-9A-Fa-f:.]+\]")


def host_regex(pattern: str) -> re.Pattern[str]:
    """The regex that ``host:port`` must fully match for ``pattern``.

    Raises:
        ValueError: ``pattern`` is not ``HOST``, ``HOST:PORT`` or ``*.DOMAIN`` (the message
            shows the forms).
    """
    host, _, port = pattern.rpartition(":") if not pattern.endswith("]") and ":" in pattern else (pattern, "", "")
    if not _HOST_PATTERN.fullmatch(host) or (port and not port.isdigit()):
        raise ValueError("write a host name, HOST:PORT or *.DOMAIN, e.g. net(pypi.org), "
                         "net(*.example.org), net(127.0.0.1:8080)")
    body = "[^:]*".join(re.escape(piece) for piece in host.lower().strip("[]").split("*"))
    return re.compile(body + ":" + (re.escape(port) if port else r"\d+"))
