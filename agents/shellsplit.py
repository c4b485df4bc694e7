"""Split a bash command line into the simple commands bash would run, as bash parses it.

Used by the approval rules (``permissions``): an allow rule lets a line through only when
every command in it is allowed; a deny or ask rule applies when any command is denied.
So the split must find every command bash runs and take nothing else for one. It follows
bash's grammar (bash(1), SHELL GRAMMAR, QUOTING, EXPANSION, REDIRECTION):

- control operators ``;`` ``&`` ``&&`` ``||`` ``|`` ``|&`` ``;;`` ``;&`` ``;;&`` and
  newlines end a command; ``(`` ``)`` subshells, ``{ ...; }`` groups and the reserved
  words of ``if``/``while``/``until``/``for``/``case``/``select`` are structure, not
  commands; ``f() { ...; }`` and ``function f`` define functions;
- ``#`` at the start of a word starts a comment; a backslash-newline joins lines;
- quotes: ``'...'``, ``"..."`` (spanning lines too), ``$'...'`` (its escapes decoded),
  ``$"..."`` and backslash escapes, removed as bash removes them;
- command substitution ``$(...)`` and backticks, process substitution ``<(...)`` and
  ``>(...)``, and the substitutions inside ``${...}``, ``$((...))`` and unquoted heredoc
  bodies: the commands inside are found too (``nested``);
- redirections (``>``, ``2>&1``, ``&>>``, ``<<<``, ...) stay with their command; a heredoc
  body (``<<EOF`` ... ``EOF``) is data, not commands;
- ``[[ ... ]]`` and ``(( ... ))`` are expressions, not commands;
- ``eval``, ``source``/``.`` and ``sh``/``bash -c`` run their argument: it is split too.

What cannot be known before running is reported in ``unsure``: a command name that comes
from an expansion (``$X args``, ``$(which curl) x``, brace expansion, a glob), or a line
that does not parse (an unclosed quote). The approval layer asks in that case.

This module is pure and imports nothing of musec. Why over 500 lines: it is one
recursive-descent reader of bash's grammar, whose parts call each other; split, they
would share all of the reader's state.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

__all__ = ["ShellSplit", "SimpleCommand", "split_commands"]

_META = set(" \t\n;&|()<>")
_RESERVED_PREFIX = frozenset({"if", "then", "elif", "else", "do", "while", "until", "!", "{", "time"})
_RESERVED_ALONE = frozenset({"fi", "done", "esac", "}", "then", "else", "do"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_REDIRECTIONS = ("&>>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">&", ">|", "&>", "<", ">")
_CONTROL = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|")
MAX_DEPTH = 16
"""Nesting deeper than this (substitutions in substitutions) is ``unsure``."""


class _Unclosed(ValueError):
    """A quote, substitution or group is not closed."""


@dataclass
class SimpleCommand:
    """One simple command.

    Attributes:
        words: its words after quote removal, redirections included as written
            (``2>&1``, ``>out``); an expansion's text is kept as written (``$X``).
        nested: found inside a substitution, a heredoc or an ``eval``/``sh -c`` string.
        dynamic_name: the command's name comes from an expansion (not knowable before
            it runs).
        redirections: each redirection as ``(fd, operator, target, literal)``: ``fd`` as
            written before the operator (``""``, ``"2"``, ``"{v}"``), the target after
            quote removal, ``literal`` when the target has no expansion or glob in it.
    """

    words: list[str]
    nested: bool = False
    dynamic_name: bool = False
    redirections: list[tuple[str, str, str, bool]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The words joined by one space, each word's whitespace runs made one space."""
        return " ".join(" ".join(self.words).split())

    @property
    def argv(self) -> list[str]:
        """The words without the redirections: the command and its arguments."""
        return self.words[: len(self.words) - len(self.redirections)]

    @property
    def quoted(self) -> str:
        """The command as one text that tells its words apart: each argument and each
        redirection's target quoted as ``shlex.quote`` does where needed (``rm -rf 'my dir'``,
        ``python3 -c 'print(1)'``, ``make >log``); two commands with different words or
        redirections never have the same ``quoted`` text."""
        argv = [shlex.quote(w) for w in self.argv]
        return " ".join(argv + [f"{fd}{op}{shlex.quote(t)}" for fd, op, t, _ in self.redirections])


@dataclass
class ShellSplit:
    """What ``split_commands`` found.

    Attributes:
        commands: the simple commands in order of appearance, nested ones included.
        heredoc_bodies: ``(start, end)`` offsets in the line of each heredoc body (data).
        substitution: the line has a command or process substitution somewhere.
        unsure: why the commands that would run cannot all be known, or ``None``.
        parsed: the line parsed completely (``False``: unclosed quote or the like).
    """

    commands: list[SimpleCommand] = field(default_factory=list)
    heredoc_bodies: list[tuple[int, int]] = field(default_factory=list)
    substitution: bool = False
    unsure: str | None = None
    parsed: bool = True

    @property
    def top_level(self) -> list[SimpleCommand]:
        """The commands not inside a substitution, heredoc or command string."""
        return [c for c in self.commands if not c.nested]


@dataclass
class _Word:
    text: str = ""
    literal: bool = True  # no expansion in it
    quoted: bool = False  # some part was quoted or escaped
    pattern: bool = False  # unquoted glob or brace-expansion characters


@dataclass
class _Pending:
    delimiter: str
    strip_tabs: bool
    expands: bool


def split_commands(line: str) -> ShellSplit:
    """Split ``line`` as bash would parse it (see the module docstring).

    Args:
        line: a bash command line (any text; it may span lines).

    Returns:
        The simple commands, whether a substitution occurs, and why it is unsure (if so).
        Never raises.
    """
    out = ShellSplit()
    try:
        _Parser(line, out, nested=False, depth=0, line=True).parse(closer=None)
    except _Unclosed as exc:
        out.parsed = False
        out.unsure = f"the command line does not parse ({exc})"
    except RecursionError:
        out.parsed = False
        out.unsure = "the command line nests too deeply"
    if out.unsure is None:
        for command in out.commands:
            if command.dynamic_name:
                out.unsure = f"the name of the command `{command.text[:60]}` is computed when it runs"
                break
    return out


def _decode_ansi_c(body: str) -> tuple[str, bool]:
    """Decode ``$'...'`` escapes; the flag says every escape was understood."""
    simple = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
              "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
    out, i, known = [], 0, True
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
            continue
        m = (re.match(r"[0-7]{1,3}", body[i + 1 :]) or re.match(r"x([0-9A-Fa-f]{1,2})", body[i + 1 :])
             or re.match(r"u([0-9A-Fa-f]{1,4})", body[i + 1 :]) or re.match(r"U([0-9A-Fa-f]{1,8})", body[i + 1 :]))
        if m is None:
            out.append(c + e)
            known = known and e != "c"
            i += 2
            continue
        digits = m.group(1) if m.groups() else m.group(0)
        value = int(digits, 8 if not m.groups() else 16)
        try:
            out.append(chr(value))
        except (ValueError, OverflowError):
            known = False
        i += 1 + len(m.group(0))
    return "".join(out), known


class _Parser:
    """A recursive-descent reader over one text; nested substitutions reuse the text."""

    def __init__(self, text: str, out: ShellSplit, *, nested: bool, depth: int, line: bool = False) -> None:
        if depth > MAX_DEPTH:
            raise RecursionError
        self.text, self.pos, self.out, self.nested, self.depth = text, 0, out, nested, depth
        self.line = line  # the text is the whole line (offsets are the line's)
        self.pending: list[_Pending] = []
        self.words: list[_Word] = []
        self.redirs: list[str] = []
        self.redirections: list[tuple[str, str, str, bool]] = []
        self.case_stack: list[str] = []  # "pattern" or "body" for each open case

    # -- commands -------------------------------------------------------------------

    def _end_command(self) -> None:
        words, redirs, structured = self.words, self.redirs, self.redirections
        self.words, self.redirs, self.redirections = [], [], []
        while words and not words[0].quoted and words[0].literal and words[0].text in _RESERVED_PREFIX:
            if words[0].text == "time":
                words.pop(0)
                while words and words[0].text.startswith("-") and not words[0].quoted:
                    words.pop(0)
                continue
            words.pop(0)
        if not words or (not words[0].quoted and words[0].text in _RESERVED_ALONE and len(words) == 1):
            if words and words[0].text == "esac" and self.case_stack:
                self.case_stack.pop()
            if redirs:  # `{ ...; } >f`, `(...) >f`, `done >f`: the redirection is still made
                self.out.commands.append(SimpleCommand(list(redirs), self.nested, False, structured))
            return
        first = words[0]
        if not first.quoted and first.text in ("for", "select", "function"):
            return  # a loop's word list or a function's name: no command runs here
        texts = [w.text for w in words]
        name_at = next((i for i, w in enumerate(words) if not _ASSIGNMENT.match(w.text)), None)
        dynamic = name_at is not None and (not words[name_at].literal or words[name_at].pattern)
        self.out.commands.append(SimpleCommand(texts + redirs, self.nested, dynamic, structured))
        if name_at is not None:
            self._command_strings(words[name_at:])

    def _command_strings(self, words: list[_Word]) -> None:
        """``eval``, ``source`` and ``sh -c`` run their argument: split it too."""
        name = words[0].text.rsplit("/", 1)[-1]
        args: list[_Word] = []
        if name == "eval":
            args = words[1:]
        elif name in _SHELLS:
            flags = [i for i, w in enumerate(words[1:], 1) if w.text.startswith("-") and "c" in w.text[1:]]
            if flags and flags[0] + 1 < len(words):
                args = [words[flags[0] + 1]]
        if not args:
            return
        if not all(w.literal for w in args):
            self.out.unsure = f"`{name}` runs a command computed when it runs"
            return
        _Parser(" ".join(w.text for w in args), self.out, nested=True, depth=self.depth + 1).parse(None)

    # -- the main loop ----------------------------------------------------------------

    def parse(self, closer: str | None) -> None:
        """Read commands until the end of the text, or the ``closer`` that ends a
        substitution (consumed). Raises ``_Unclosed`` when the closer never comes."""
        text, parens = self.text, 0
        while self.pos < len(text):
            c = text[self.pos]
            if c in " \t":
                self.pos += 1
            elif text.startswith("\\\n", self.pos):
                self.pos += 2
            elif c == "\n":
                self.pos += 1
                self._end_command()
                self._read_heredocs()
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end == -1 else end
            elif c == ")":
                self.pos += 1
                if self.case_stack and self.case_stack[-1] == "pattern":
                    self.case_stack[-1] = "body"
                    self.words, self.redirs, self.redirections = [], [], []
                    continue
                self._end_command()
                if parens == 0 and closer == ")":
                    return
                parens = max(0, parens - 1)
            elif c == "(":
                parens += self._open_paren()
            elif text.startswith(("<(", ">("), self.pos):
                self.pos += 2
                self._substitution(")")
                self.words.append(_Word("<(...)", literal=False))
            elif c in ";&|" and not text.startswith(("&>",), self.pos):
                op = next(o for o in _CONTROL if text.startswith(o, self.pos))
                self.pos += len(op)
                self._end_command()
                if op.startswith(";;") or op == ";&":
                    if self.case_stack:
                        self.case_stack[-1] = "pattern"
            elif c in "<>&":
                self._redirection("")
            else:
                self._word_or_fd()
        if closer is not None:
            raise _Unclosed("a `$(` or `(` is not closed")
        self._end_command()
        if self.pending:
            self.pending.clear()  # bash reads a heredoc that never ends up to the end of input

    def _at_command_start(self) -> int | None:
        """How many reserved words begin the command being read, or ``None`` when a
        word that is not one has been read."""
        for w in self.words:
            if w.quoted or w.text not in _RESERVED_PREFIX:
                return None
        return len(self.words)

    def _open_paren(self) -> int:
        """Read a ``(``; 1 when it opens a subshell."""
        text = self.text
        if self._at_command_start() is not None and text.startswith("((", self.pos):
            self.pos += 2  # an arithmetic command
            self._expansions_until("))")
            return 0
        self.pos += 1
        if len(self.words) == 1 and re.match(r"[ \t]*\)", text[self.pos :]):
            self.pos = text.index(")", self.pos) + 1  # `name ()`: a function definition
            self.words = []
            return 0
        if self.case_stack and self.case_stack[-1] == "pattern":
            return 0  # `(pattern)` in a case
        self._end_command()
        return 1

    def _word_or_fd(self) -> None:
        start = self.pos
        word = self._read_word()
        text = self.text
        if self.pos < len(text) and text[self.pos] in "<>" and not text.startswith(("<(", ">("), self.pos):
            if re.fullmatch(r"[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\}", text[start : self.pos]):
                self._redirection(text[start : self.pos])
                return
        if self.case_stack and self.case_stack[-1] == "pattern":
            if word.text == "esac" and not word.quoted:
                self.case_stack.pop()
            return  # a case pattern is not a command
        start = self._at_command_start()
        self.words.append(word)
        if word.quoted:
            return
        if start is not None and word.text == "[[":
            self._conditional()  # an expression: no command runs (its substitutions do)
            self.words = self.words[:start]
        elif word.text == "in" and len(self.words) >= 3 and self.words[-3].text == "case":
            self.words = []
            self.case_stack.append("pattern")

    def _conditional(self) -> None:
        """``[[ ... ]]``: an expression; ``&&``, ``<``, ``(`` inside are operators of it."""
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c in " \t\n" or self.text.startswith("\\\n", self.pos):
                self.pos += 2 if c == "\\" else 1
            elif c in "&|<>()":
                self.pos += 1
            else:
                word = self._read_word()
                if word.text == "]]" and not word.quoted:
                    return
        raise _Unclosed("a `[[` is not closed with `]]`")

    def _redirection(self, fd: str) -> None:
        text = self.text
        op = next((o for o in _REDIRECTIONS if text.startswith(o, self.pos)), None)
        if op is None:  # a lone `&` at the start of a word cannot happen: `;&|` took it
            raise _Unclosed(f"unexpected {text[self.pos]!r}")
        self.pos += len(op)
        while self.pos < len(text) and text[self.pos] in " \t":
            self.pos += 1
        if self.pos >= len(text) or text[self.pos] in _META:
            raise _Unclosed(f"`{op}` has no target")
        raw_start = self.pos
        target = self._read_word()
        if op in ("<<", "<<-"):
            delimiter = target.text
            quoted = any(q in text[raw_start : self.pos] for q in "'\"\\")
            self.pending.append(_Pending(delimiter, op == "<<-", not quoted))
        self.redirs.append(f"{fd}{op}{target.text}")
        self.redirections.append((fd, op, target.text, target.literal and not target.pattern))

    def _read_heredocs(self) -> None:
        """After a newline: each pending heredoc's body, up to its delimiter line. The
        body is data; an unquoted delimiter lets substitutions in it run (split them)."""
        pending, self.pending = self.pending, []
        text = self.text
        for doc in pending:
            body: list[str] = []
            start = self.pos
            while self.pos < len(text):
                end = text.find("\n", self.pos)
                end = len(text) if end == -1 else end
                line = text[self.pos : end]
                self.pos = min(len(text), end + 1)
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                body.append(line)
            if self.line:
                self.out.heredoc_bodies.append((start, start + len("\n".join(body))))
            if doc.expands:
                scan = _Parser("\n".join(body), self.out, nested=True, depth=self.depth + 1)
                scan._expansions_until(None, heredoc=True)

    # -- words --------------------------------------------------------------------------

    def _read_word(self) -> _Word:
        text, word, parts = self.text, _Word(), []
        while self.pos < len(text):
            c = text[self.pos]
            if c in _META:
                break
            if c == "\\":
                if text.startswith("\\\n", self.pos):
                    self.pos += 2
                    continue
                parts.append(text[self.pos + 1 : self.pos + 2])
                word.quoted = True
                self.pos += 2
            elif c == "'":
                end = text.find("'", self.pos + 1)
                if end == -1:
                    raise _Unclosed("a `'` is not closed")
                parts.append(text[self.pos + 1 : end])
                word.quoted = True
                self.pos = end + 1
            elif c == '"':
                self.pos += 1
                parts.append(self._double_quoted(word))
                word.quoted = True
            elif c == "$":
                parts.append(self._dollar(word, in_quotes=False))
            elif c == "`":
                parts.append(self._backtick(word))
            else:
                if c in "*?[" or (c == "{" and re.match(r"\{[^}\s]*(,|\.\.)[^}\s]*\}", text[self.pos :])):
                    word.pattern = True
                parts.append(c)
                self.pos += 1
        word.text = "".join(parts)
        return word

    def _double_quoted(self, word: _Word) -> str:
        text, parts = self.text, []
        while self.pos < len(text):
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(parts)
            if c == "\\" and self.pos + 1 < len(text) and text[self.pos + 1] in '$`"\\\n':
                if text[self.pos + 1] != "\n":
                    parts.append(text[self.pos + 1])
                self.pos += 2
            elif c == "$":
                parts.append(self._dollar(word, in_quotes=True))
            elif c == "`":
                parts.append(self._backtick(word))
            else:
                parts.append(c)
                self.pos += 1
        raise _Unclosed('a `"` is not closed')

    def _dollar(self, word: _Word, *, in_quotes: bool) -> str:
        text, start = self.text, self.pos
        nxt = text[self.pos + 1 : self.pos + 2]
        if nxt == "'" and not in_quotes:
            end = self.pos + 2
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            if end >= len(text):
                raise _Unclosed("a `$'` is not closed")
            decoded, known = _decode_ansi_c(text[self.pos + 2 : end])
            self.pos = end + 1
            word.quoted = True
            word.literal = word.literal and known
            return decoded
        if nxt == '"' and not in_quotes:
            self.pos += 2
            word.quoted = True
            return self._double_quoted(word)
        word.literal = False
        if text.startswith("$((", self.pos):
            self.pos += 3
            self._expansions_until("))")
        elif nxt == "(":
            self.pos += 2
            self._substitution(")")
        elif nxt == "{":
            self.pos += 2
            self._expansions_until("}")
        elif nxt and (nxt.isalnum() or nxt == "_"):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]", text[self.pos + 1 :])
            self.pos += 1 + (len(m.group(0)) if m else 1)
        elif nxt and nxt in "@*#?$!-":
            self.pos += 2
        else:
            word.literal = True
            self.pos += 1
            return "$"
        return text[start : self.pos]

    def _backtick(self, word: _Word) -> str:
        text, start = self.text, self.pos
        end = self.pos + 1
        while end < len(text) and text[end] != "`":
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise _Unclosed("a backtick is not closed")
        body = re.sub(r"\\([`$\\])", r"\1", text[self.pos + 1 : end])
        self.pos = end + 1
        word.literal = False
        self.out.substitution = True
        _Parser(body, self.out, nested=True, depth=self.depth + 1).parse(None)
        return text[start : self.pos]

    def _substitution(self, closer: str) -> None:
        """``$(...)``/``<(...)`` from ``self.pos`` (just inside) to its ``)``."""
        self.out.substitution = True
        inner = _Parser(self.text, self.out, nested=True, depth=self.depth + 1, line=self.line)
        inner.pos = self.pos
        inner.parse(closer=closer)
        self.pos = inner.pos

    def _expansions_until(self, closer: str | None, *, heredoc: bool = False) -> None:
        """Skip an expression (``${...}``, ``$((...))``, a heredoc line) to ``closer``,
        splitting the substitutions in it; quotes and nesting are honoured."""
        text, depth = self.text, 0
        holder = _Word()
        while self.pos < len(text):
            c = text[self.pos]
            if closer is not None and depth == 0 and text.startswith(closer, self.pos):
                self.pos += len(closer)
                return
            if c == "\\":
                self.pos += 2
            elif c == "$":
                self._dollar(holder, in_quotes=heredoc)
            elif c == "`":
                self._backtick(holder)
            elif c == "'" and not heredoc and closer != "))":
                end = text.find("'", self.pos + 1)
                if end == -1:
                    raise _Unclosed("a `'` is not closed")
                self.pos = end + 1
            elif c == '"' and not heredoc:
                self.pos += 1
                self._double_quoted(holder)
            else:
                if closer is not None and c in "({":
                    depth += 1
                elif closer is not None and c in ")}" and depth:
                    depth -= 1
                self.pos += 1
        if closer is not None:
            raise _Unclosed(f"a `{closer}` is missing")
