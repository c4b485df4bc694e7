"""The thin musec client (console script ``musec``).

Importing this package does nothing. ``main`` answers ``--version`` before importing
anything else, so that path stays as cheap as a bare interpreter start, and lets ``quick``
answer ``musec sessions`` and ``musec daemon status`` without msgspec or argparse when it
can (the full path runs when it cannot).

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
    if argv[:1] in (["sessions"], ["daemon"]):
        from .quick import run

        code = run(argv)
        if code is not None:
            sys.exit(code)
    from .cli import main as cli_main

    sys.exit(cli_main(argv))
