"""Summaries of web-server access logs."""


def parse_line(line):
    raise NotImplementedError


def summarize(lines):
    raise NotImplementedError


def format_table(summary):
    raise NotImplementedError
