"""Errors of the tools package, named by condition.

Tools never let these escape ``run``: each is turned into a ``ToolOutput`` with
``is_error=True`` whose content is the error's one-line message.
"""

from __future__ import annotations

from .base import ToolInputError

__all__ = [
    "BinaryFile",
    "EditNotFound",
    "EditNotUnique",
    "FileTooLarge",
    "PathRefused",
    "SandboxUnavailable",
    "ToolInputError",
]


class PathRefused(ToolInputError):
    """A path leads outside the allowed roots (``..``, absolute path or symlink)."""


class BinaryFile(ToolInputError):
    """The file holds NUL bytes in its first 8 KiB, or is not valid UTF-8 text."""


class FileTooLarge(ToolInputError):
    """The file is over the size cap of the tool."""


class EditNotFound(ToolInputError):
    """``edit_file``'s ``old_string`` does not occur in the file."""


class EditNotUnique(ToolInputError):
    """``edit_file``'s ``old_string`` occurs more than once and ``replace_all`` is off."""


class SandboxUnavailable(RuntimeError):
    """No sandbox can run the command; the message names the fix."""
