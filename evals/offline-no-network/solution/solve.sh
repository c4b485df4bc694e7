#!/bin/bash
set -e
cd /app
cat > versions.py <<'EOF'
"""Version strings."""


def parse_version(text):
    """``"1.2.10"`` as a tuple that sorts in version order."""
    return tuple(int(part) for part in text.strip().split("."))
EOF
