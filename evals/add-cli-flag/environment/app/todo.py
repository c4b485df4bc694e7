"""A tiny to-do list: python3 todo.py list [--done | --open] FILE."""

import argparse
import json


def main(argv=None):
    parser = argparse.ArgumentParser(prog="todo")
    sub = parser.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("file")
    args = parser.parse_args(argv)
    items = json.load(open(args.file))
    for item in items:
        mark = "x" if item["done"] else " "
        print(f"[{mark}] {item['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
