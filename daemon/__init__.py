"""The musec daemon (``musecd``): sessions, the event log, the socket server.

Importing this package does nothing; ``main`` runs the daemon in the foreground.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console script ``musecd``: run the daemon in the foreground."""
    from .server import run_daemon

    sys.exit(run_daemon())
