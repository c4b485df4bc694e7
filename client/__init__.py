"""The thin musec client (console script ``musec``).

Importing this package does nothing. ``main`` answers ``--version`` before importing
anything else, so that path stays as cheap as a bare interpreter start.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console script ``musec``."""
    argv = sys.argv[1:]
    if argv == ["--version"]:
        from musec.daemon.version import VERSION

        sys.stdout.write(f"musec {VERSION}\n")
        sys.exit(0)
    from .cli import main as cli_main

    sys.exit(cli_main(argv))
