"""Errors of the kernel-optimisation agent, named by condition; each message is one line."""

from __future__ import annotations


class KernelOptError(Exception):
    """Base of every error raised by ``musec.agents.kernel_opt``."""


class SpecError(KernelOptError):
    """A campaign spec (``kernel-task.toml``) cannot be used; the message says what to fix."""


class CandidateRefused(KernelOptError):
    """A candidate imports a module the campaign forbids (found by reading its source)."""
