#!/bin/bash
set -e
cd /app
cat > layers.py <<'EOF'
"""Configuration layering."""


def deep_merge(base, override):
    """A new dict: ``base`` with ``override`` laid over it, recursively for nested dicts.

    Neither argument is modified; lists and other values in ``override`` replace those in
    ``base``; a key whose override value is ``None`` is removed.
    """
    import copy

    result = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = value
    return result
EOF
