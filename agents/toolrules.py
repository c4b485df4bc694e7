"""Developer tools that rewrite files in place, for the approval rules (``commandeffects``).

A formatter or linter run to check (``black --check``, ``ruff check``, ``prettier
--check``) writes nothing; the same tool with its fixing spelling rewrites the files or
folders it is given (the working folder when none): ``black``, ``isort``, ``ruff format``,
``ruff check --fix``, ``prettier --write``, ``eslint --fix``, ``gofmt -w``, ``goimports
-w``, ``rustfmt``, ``cargo fmt``, ``cargo fix``, ``cargo clippy --fix``, ``go fmt``,
``go mod tidy``, ``clang-format -i``, ``autopep8 -i``, ``yapf -i``, ``yq -i``,
``terraform fmt``, ``pre-commit run``. Their writes are a side job (not ``purpose``): a
rule "always" saved for the checking spelling does not cover them; ``edit`` rules for
the files (or the very command) do. Options as each tool's ``--help`` documents them.
Pure; imports nothing of musec (``found`` is ``commandeffects``' collector).
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOOLS", "tool_effects"]

#: tool -> (options that make it write, options that stop it writing, writes by default).
_SIMPLE: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "black": ((), ("--check", "--diff", "--code", "-c"), True),
    "isort": ((), ("--check-only", "--check", "-c", "--diff", "--stdout", "-d"), True),
    "rustfmt": ((), ("--check", "--emit"), True),
    "autopep8": (("-i", "--in-place"), (), False),
    "yapf": (("-i", "--in-place"), (), False),
    "clang-format": (("-i",), (), False),
    "gofmt": (("-w",), (), False),
    "goimports": (("-w",), (), False),
    "prettier": (("--write", "-w"), ("--check", "-c", "--list-different", "-l"), False),
    "eslint": (("--fix",), ("--fix-dry-run",), False),
    "yq": (("-i", "--inplace"), (), False),
    "stylua": ((), ("--check", "-c"), True),
    "shfmt": (("-w", "--write"), (), False),
    "biome": (("--write", "--apply", "--fix"), (), False),
}
#: program -> subcommand -> (options that make it write, options that stop it, by default).
_BY_SUBCOMMAND: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]]] = {
    "ruff": {"format": ((), ("--check", "--diff"), True), "check": (("--fix", "--fix-only"), ("--no-fix",), False),
             "": (("--fix", "--fix-only"), ("--no-fix",), False)},
    "cargo": {"fmt": ((), ("--check",), True), "fix": ((), (), True), "clippy": (("--fix",), (), False)},
    "go": {"fmt": ((), (), True), "mod": ((), (), False), "generate": ((), (), False)},
    "terraform": {"fmt": ((), ("-check", "-diff"), True)},
    "tofu": {"fmt": ((), ("-check", "-diff"), True)},
    "pre-commit": {"run": ((), (), True), "": ((), (), True)},
}
TOOLS = frozenset(_SIMPLE) | frozenset(_BY_SUBCOMMAND)
"""The programs this module reads."""


def tool_effects(name: str, args: list[str], found: Any) -> None:
    """Record in ``found`` the files ``name ARGS`` rewrites (module docstring).

    Args:
        name: the program (a key of ``TOOLS``).
        args: its arguments.
        found: ``commandeffects``' collector (``write(path, purpose=, tree=)``).
    """
    if name in _BY_SUBCOMMAND:
        table = _BY_SUBCOMMAND[name]
        sub = next((a for a in args if not a.startswith("-")), "")
        if name == "go" and sub == "mod":
            if any(a in ("tidy", "vendor", "edit", "init") for a in args):
                found.write("go.mod", purpose=False)
                found.write("go.sum" if "vendor" not in args else "vendor", purpose=False, tree="vendor" in args)
            return
        if name == "go" and sub == "generate":
            found.run("go generate runs the commands its //go:generate lines name", unsure=True)
            return
        if sub not in table:
            if "" not in table or sub:
                return
        spec = table[sub if sub in table else ""]
        args = args[args.index(sub) + 1:] if sub in args else args
    else:
        spec = _SIMPLE[name]
    on, off, default = spec
    if any(a in off or any(a.startswith(o + "=") for o in off if o.startswith("--")) for a in args):
        return
    if not default and not any(a in on or a.startswith(tuple(o + "=" for o in on if o.startswith("--"))) for a in args):
        return
    operands = [a for a in args if not a.startswith("-")]
    if name in ("yq",):
        operands = operands[1:]  # the first is the expression
    if name == "pre-commit" or name == "cargo" or name == "go":
        operands = []  # hooks, crates and packages: where they write cannot be named
    for o in operands or ["."]:
        found.write(o, purpose=False, tree=True)
