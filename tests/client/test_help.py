"""Every option and argument of ``musec`` says what it is for (issue 18), and each
command's usage line is the usage its code accepts."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from musec.client.args import build_parser

from tests.conftest import Musec


def _parsers(parser: argparse.ArgumentParser, name: str = "musec") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_and_argument_has_help() -> None:
    missing = []
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_every_command_has_help() -> None:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert {c.dest for c in sub._choices_actions if (c.help or "").strip()} == set(sub.choices)


def test_log_usage_is_the_usage_it_takes(musec: Musec) -> None:
    proc = musec("log", "--help")
    assert proc.returncode == 0
    usage = proc.stdout.split("\n\n")[0]
    assert usage.split() == "usage: musec log [-h] [--json] ID musec log verify ID".split(), usage
    assert "[ID" not in proc.stdout  # not a repeatable argument
    for argv, code in ((["log", "a", "b"], 2), (["log", "verify"], 2), (["log", "verify", "a", "b"], 2)):
        proc = musec(*argv)
        assert proc.returncode == code and "usage: musec log" in proc.stderr, (argv, proc.stderr)
