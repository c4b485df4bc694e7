"""The thin musec client (console script ``musec``).

Importing this package does nothing. ``main`` answers ``--version`` before importing
anything else, so that path stays as cheap as a bare interpreter start.

``__version__`` is musec's one written version (``client/version.py``).
"""

from __future__ import annotations

import sys

from .version import __version__


def main() -> None:
    """Console script ``musec``."""
    argv = sys.argv[1:]
    if argv == ["--version"]:
        sys.stdout.write(f"musec {__version__}\n")
        sys.exit(0)
    from .cli import main as cli_main

    sys.exit(cli_main(argv))
