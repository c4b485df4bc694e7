"""musec's one written version. It imports nothing: ``musec --version`` reads it, and
``pyproject.toml`` reads it for the distribution's metadata (which the daemon reports)."""

__version__ = "0.1.0"
