#!/bin/bash
set -e
cd /app
cat > logsum.py <<'EOF'
"""Summaries of web-server access logs."""


def parse_line(line):
    """``(path, status, bytes)`` of one log line ``METHOD PATH STATUS BYTES``; None for a malformed one."""
    parts = line.split()
    if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
        return None
    return parts[1], int(parts[2]), int(parts[3])


def summarize(lines):
    """Per path: requests, errors (status >= 500) and bytes; malformed lines are skipped."""
    out = {}
    for line in lines:
        parsed = parse_line(line)
        if parsed is None:
            continue
        path, status, size = parsed
        row = out.setdefault(path, {"requests": 0, "errors": 0, "bytes": 0})
        row["requests"] += 1
        row["errors"] += status >= 500
        row["bytes"] += size
    return out


def format_table(summary):
    """Lines ``PATH REQUESTS ERRORS BYTES``, most requested first (ties by path)."""
    rows = sorted(summary.items(), key=lambda kv: (-kv[1]["requests"], kv[0]))
    return "\n".join(f"{p} {r['requests']} {r['errors']} {r['bytes']}" for p, r in rows)
EOF
