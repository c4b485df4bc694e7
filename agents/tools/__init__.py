"""The tools offered to the model, and the command sandbox.

Public API:
    default_tools() -> list[Tool]: read_file, write_file, edit_file, glob, grep, bash.
    tool_by_name(name, tools=None) -> Tool | None
    The tool classes, and the interface types from ``base``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import Access, FileEdit, SandboxPolicy, Tool, ToolContext, ToolInputError, ToolOutput
from .bash import BashTool
from .errors import PathRefused, SandboxUnavailable
from .files import EditFileTool, ReadFileTool, WriteFileTool
from .search import GlobTool, GrepTool

__all__ = [
    "Access",
    "BashTool",
    "EditFileTool",
    "FileEdit",
    "GlobTool",
    "GrepTool",
    "PathRefused",
    "ReadFileTool",
    "SandboxPolicy",
    "SandboxUnavailable",
    "Tool",
    "ToolContext",
    "ToolInputError",
    "ToolOutput",
    "WriteFileTool",
    "default_tools",
    "tool_by_name",
]


def default_tools() -> list[Tool]:
    """Fresh instances of the standard tools, in the order offered to the model:
    ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``, ``bash``."""
    return [ReadFileTool(), WriteFileTool(), EditFileTool(), GlobTool(), GrepTool(), BashTool()]


def tool_by_name(name: str, tools: Sequence[Tool] | None = None) -> Tool | None:
    """The tool called ``name`` among ``tools`` (default: ``default_tools()``), or ``None``."""
    for tool in default_tools() if tools is None else tools:
        if tool.name == name:
            return tool
    return None
