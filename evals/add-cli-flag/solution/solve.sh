#!/bin/bash
set -e
cd /app
cat > todo.py <<'EOF'
"""A tiny to-do list: python3 todo.py list [--done | --open] FILE."""

import argparse
import json


def main(argv=None):
    parser = argparse.ArgumentParser(prog="todo")
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("file")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--done", action="store_true", help="only finished items")
    which.add_argument("--open", action="store_true", help="only unfinished items")
    args = parser.parse_args(argv)
    items = json.load(open(args.file))
    if args.done:
        items = [i for i in items if i["done"]]
    elif args.open:
        items = [i for i in items if not i["done"]]
    for item in items:
        mark = "x" if item["done"] else " "
        print(f"[{mark}] {item['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
EOF
