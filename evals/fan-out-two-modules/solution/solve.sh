#!/bin/bash
set -e
cd /app
cat > stats.py <<'EOF'
"""Statistics."""


def median(values):
    """The median of a non-empty sequence of numbers (the mean of the middle two for even sizes)."""
    if not values:
        raise ValueError("median of an empty sequence")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
EOF
cat > units.py <<'EOF'
"""Temperature units."""


def to_celsius(value, unit):
    """``value`` in degrees ``unit`` ("C", "F" or "K") as degrees Celsius."""
    unit = unit.upper()
    if unit == "C":
        return float(value)
    if unit == "F":
        return (value - 32) * 5 / 9
    if unit == "K":
        if value < 0:
            raise ValueError("kelvin cannot be negative")
        return value - 273.15
    raise ValueError(f"unknown unit {unit!r}")
EOF
