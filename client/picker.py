"""The session picker of ``musec resume`` and ``/resume``: an arrow-key list (prompt_toolkit)
of sessions, the most recently active first."""

from __future__ import annotations

from typing import Any

from musec.daemon import protocol as p

from .output import out
from .quick import age

__all__ = ["PICKER_HINT", "pick_session", "picker_rows"]

PICKER_HINT = "↑/↓ choose · Enter resumes · Esc, q or Ctrl-C cancels"


def picker_rows(sessions: list[p.SessionInfo]) -> list[tuple[str, str]]:
    """``(id, row)`` per session: title, state, age, workspace in columns as wide as their
    widest entry (a long state such as ``provider_unreachable`` keeps them aligned)."""
    from .output import Column, safe, table

    rows = table([[s.title or "(untitled)", s.status, age(s.updated_at), s.workspace] for s in sessions],
                 [Column(width=50), Column(), Column(align=">"), Column()])
    return [(s.id, safe(row)) for s, row in zip(sessions, rows, strict=True)]


def pick_session(sessions: list[p.SessionInfo]) -> str | None:
    """An arrow-key picker over sessions, the most recently active first; ``None`` when
    cancelled (Esc, q, Ctrl-C or Ctrl-D). Other keys do nothing: typed text never picks.
    The list is erased when done; a choice leaves one line naming the session."""
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.keys import Keys
    from prompt_toolkit.shortcuts.choice_input import ChoiceInput

    class _Picker(ChoiceInput):  # type: ignore[misc]
        """prompt_toolkit's ``choice`` whose list is erased when it is done (chosen or
        cancelled), as the prompt is: ``choice`` (3.0.53) has no ``erase_when_done``."""

        def _create_application(self) -> Any:
            app = super()._create_application()
            app.erase_when_done = True
            return app

    keys = KeyBindings()

    @keys.add("escape", eager=True)
    @keys.add("q")
    @keys.add("c-d")
    def _cancel(event: object) -> None:
        event.app.exit(result=None)  # type: ignore[attr-defined]

    @keys.add(Keys.Any)
    def _ignore(event: object) -> None:
        """Typed text is not a choice (the list's own type-to-find would pick by letter)."""

    try:
        picked = _Picker(message=f"Resume which session?  ({PICKER_HINT})", options=picker_rows(sessions),
                         key_bindings=keys).prompt()
    except (KeyboardInterrupt, EOFError):
        picked = None
    chosen = next((s for s in sessions if s.id == picked), None)
    if chosen is not None:  # the list is gone: one line says which session comes
        from .output import safe

        out(f"(resuming session {chosen.id}: {safe(' '.join((chosen.title or '(untitled)').split()))[:80]})")
    return picked
