"""The command splitter follows bash's grammar (issue 13, case 9): Hypothesis builds
command lines from words quoted in every way bash allows, joined by control operators,
with comments, continuations, groups and heredocs, and the split must give back exactly
the commands and words that bash would run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from musec.agents.permissions import Call, decide_call, parse_rule
from musec.agents.shellsplit import split_commands

SETTINGS = settings(max_examples=300, deadline=None)
RESERVED = {"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "for", "in", "case", "esac",
            "select", "function", "time", "coproc"}
PLAIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-./,:+@%^", min_size=1, max_size=8).filter(
    lambda w: w not in RESERVED and not w[0].isdigit() and "=" not in w)
ANY = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=12)
SEPARATORS = st.sampled_from([";", "&&", "||", "|", "&", "\n", " ; ", " && ", " |& ", ";\n", "\n\n"])


@st.composite
def quoted(draw: st.DrawFn, text: str) -> str:
    """``text`` written in one of bash's quotings (each gives back ``text``)."""
    style = draw(st.sampled_from(["single", "double", "backslash", "ansi", "halves"]))
    if style == "single" and "'" not in text:
        return f"'{text}'"
    if style == "double":
        return '"' + "".join("\\" + c if c in '"\\$`' else c for c in text) + '"'
    if style == "ansi":
        return "$'" + "".join(f"\\x{ord(c):02x}" if ord(c) < 128 else c for c in text) + "'"
    if style == "halves" and len(text) > 1:
        cut = draw(st.integers(1, len(text) - 1))
        return draw(quoted(text[:cut])) + draw(quoted(text[cut:]))
    return "".join("\\" + c if c != "\n" else "'\n'" for c in text)


@st.composite
def word(draw: st.DrawFn, first: bool) -> tuple[str, str]:
    """``(source, value)``: a word as written and what bash makes of it."""
    value = draw(PLAIN) if first else draw(st.one_of(PLAIN, ANY))
    bare = set(value) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-./,:+@%^")
    source = value if bare and draw(st.booleans()) else draw(quoted(value))
    if len(source) > 1 and draw(st.booleans()):  # a backslash-newline anywhere outside quotes joins lines
        if source.isalnum():
            cut = draw(st.integers(1, len(source) - 1))
            source = source[:cut] + "\\\n" + source[cut:]
    return source, value


@st.composite
def command(draw: st.DrawFn) -> tuple[str, list[str]]:
    words = [draw(word(True))] + draw(st.lists(word(False), max_size=4))
    gaps = [draw(st.sampled_from([" ", "  ", "\t", " \\\n "])) for _ in words[1:]]
    source = words[0][0] + "".join(g + w[0] for g, w in zip(gaps, words[1:], strict=True))
    return source, [w[1] for w in words]


@st.composite
def line(draw: st.DrawFn) -> tuple[str, list[list[str]]]:
    commands = draw(st.lists(command(), min_size=1, max_size=4))
    seps = [draw(SEPARATORS) for _ in commands[1:]]
    source = commands[0][0] + "".join(s + c[0] for s, c in zip(seps, commands[1:], strict=True))
    wrap = draw(st.sampled_from(["{}", "({})", "{{ {}; }}", "if true; then {}; fi", "while {}; do :; done"]))
    expected = [c[1] for c in commands]
    if wrap.startswith("if"):
        expected = [["true"], *expected]
    if wrap.startswith("while"):
        expected = [*expected, [":"]]
    source = wrap.format(source)
    if draw(st.booleans()):
        comment = draw(st.text(alphabet=st.characters(blacklist_characters="\n\0", blacklist_categories=("Cs",))))
        source += " #" + comment
    return source, expected


def _words(source: str) -> list[list[str]]:
    split = split_commands(source)
    assert split.parsed and split.unsure is None, (source, split.unsure)
    return [c.words for c in split.top_level]


@given(line())
@SETTINGS
def test_the_split_gives_back_the_commands_bash_runs(case: tuple[str, list[list[str]]]) -> None:
    source, expected = case
    assert _words(source) == expected


@given(line(), st.lists(st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",))).filter(
    lambda t: "\n" not in t and t.strip() != "EOF"), max_size=5), st.sampled_from(["EOF", "'EOF'", '"EOF"', "\\EOF"]),
    st.booleans())
@SETTINGS
def test_heredoc_bodies_are_data(case: tuple[str, list[list[str]]], body: list[str], delimiter: str, dash: bool) -> None:
    source, expected = case
    quoted_delimiter = delimiter != "EOF"
    if not quoted_delimiter:
        body = [b.replace("$", "").replace("`", "").replace("\\", "") for b in body]
    text = "\n".join(["cat <<" + ("-" if dash else "") + delimiter, *body, ("\t" if dash else "") + "EOF", source])
    split = split_commands(text)
    assert [c.words for c in split.top_level] == [["cat", "<<" + ("-" if dash else "") + "EOF"], *expected]
    assert not [c for c in split.commands if c.nested]


@given(command(), command())
@SETTINGS
def test_substitutions_are_split_as_commands_of_their_own(outer: tuple[str, list[str]], inner: tuple[str, list[str]]) -> None:
    for form in ("$({})", "`{}`", '"$({})"', "<({})", ">({})", "${{x:-$({})}}", "$((1 + $({})))"):
        if form == "`{}`" and ("`" in inner[0] or "\\" in inner[0]):  # backslashes mean less in backticks
            continue
        split = split_commands(outer[0] + " " + form.format(inner[0]))
        assert split.substitution and split.unsure is None, form
        assert [c.words for c in split.commands if c.nested] == [inner[1]], form


@given(st.text(max_size=80))
@SETTINGS
def test_any_text_splits_or_says_why_not(text: str) -> None:
    split = split_commands(text)
    assert split.parsed or split.unsure


@pytest.mark.parametrize("source, expected", [
    ("ls # ; rm -rf /", [["ls"]]),
    ("cu\\\nrl evil", [["curl", "evil"]]),
    ("echo 'a\nb; rm x' c", [["echo", "a\nb; rm x", "c"]]),
    ("if [[ -f x && -f y ]]; then make; fi", [["make"]]),
    ("case $x in a|b) make;; (c) ls;; esac", [["make"], ["ls"]]),
    ("f() { make; }; f", [["make"], ["f"]]),
    ("for f in a b; do rm $f; done", [["rm", "$f"]]),
    ("(( i++ )) && make", [["make"]]),
    ("echo a>b 2>&1 &>/dev/null", [["echo", "a", ">b", "2>&1", "&>/dev/null"]]),
    ("time -p make", [["make"]]),
    ("! make", [["make"]]),
])
def test_bash_grammar_examples(source: str, expected: list[list[str]]) -> None:
    assert _words(source) == expected


@pytest.mark.parametrize("command", [
    "cu\\\nrl -s http://x",
    "c'ur'l -s http://x",
    "$'\\x63url' -s http://x",
    "bash -c 'ls; curl -s http://x'",
    "eval 'curl -s http://x'",
    "cat <<EOF\n$(curl -s http://x)\nEOF",
    "echo ${x:-$(curl -s http://x)}",
    "{ curl -s http://x; }",
])
def test_a_deny_rule_sees_what_bash_runs(command: str) -> None:
    rules = [parse_rule("bash", "allow"), parse_rule("bash(curl *)", "deny")]
    assert decide_call("auto", Call("bash", "execute", command=command), rules).decision == "deny", command


@pytest.mark.parametrize("command", ["cat <<'EOF'\ncurl -s http://x\nEOF", "ls # curl -s http://x"])
def test_data_and_comments_are_not_commands(command: str) -> None:
    rules = [parse_rule("bash(cat *)", "allow"), parse_rule("bash(ls *)", "allow"), parse_rule("bash(curl *)", "deny")]
    assert decide_call("ask", Call("bash", "execute", command=command), rules).decision == "allow", command


@pytest.mark.parametrize("command", ["$X -s http://x", 'eval "$cmd"', "{curl,-s} http://x", "/usr/bin/cur? x",
                                     "echo 'unclosed", "$(echo curl) -s http://x"])
def test_where_it_cannot_tell_it_asks(command: str) -> None:
    rules = [parse_rule("bash", "allow"), parse_rule("bash(curl *)", "deny")]
    verdict = decide_call("auto", Call("bash", "execute", command=command), rules)
    assert verdict.decision == "ask" and "could not tell" in verdict.origin, command
    assert decide_call("never", Call("bash", "execute", command=command), rules).decision == "deny"


def test_with_no_deny_or_ask_rule_an_unclear_line_follows_the_mode() -> None:
    rules = [parse_rule("bash(ls *)", "allow")]
    assert decide_call("auto", Call("bash", "execute", command="$X y"), rules).decision == "allow"
    assert decide_call("ask", Call("bash", "execute", command="$X y"), rules).decision == "ask"
