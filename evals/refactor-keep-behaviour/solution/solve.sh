#!/bin/bash
set -e
cd /app
cat > durations.py <<'EOF'
"""Durations in configuration files: "90s", "15m", "2h", "1d"."""

_UNITS = (("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400))


def parse_duration(text):
    """Seconds in a duration like "90s", "15m", "250ms" or a bare number of seconds."""
    text = text.strip().lower()
    for suffix, factor in _UNITS:
        if text.endswith(suffix):
            number = int(text[: -len(suffix)])
            return number / 1000 if suffix == "ms" else number * factor
    return int(text)


def timeout_seconds(text):
    """The timeout a config value gives, in seconds."""
    return parse_duration(text)


def retention_seconds(text):
    """How long logs are kept, in seconds; never less than one hour."""
    return max(parse_duration(text), 3600)
EOF
