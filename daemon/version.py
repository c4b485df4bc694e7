"""The version of the installed musec, as the daemon reports it (``Hello``, ``Status``, logs).

The one written version is ``musec.client.version.__version__``; ``pyproject.toml`` reads it from
there for the distribution's metadata, and the daemon reads that metadata, so neither the
protocol module nor the daemon imports the client.
"""

from __future__ import annotations

from functools import cache


@cache
def musec_version() -> str:
    """The installed distribution's version, ``0+unknown`` when musec runs uninstalled."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("musec")
    except PackageNotFoundError:
        return "0+unknown"
