#!/bin/bash
set -e
cd /app
cat > textutil.py <<'EOF'
"""Text helpers."""

import re
import unicodedata


def slugify(text, max_length=None):
    """A URL slug of ``text``: ASCII lower case, words joined by single hyphens."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for word in words:
        candidate = word if not slug else slug + "-" + word
        if max_length is not None and len(candidate) > max_length:
            break
        slug = candidate
    return slug
EOF
