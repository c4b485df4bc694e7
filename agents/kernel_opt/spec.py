"""The campaign spec, ``kernel-task.toml``: what to optimise, against what, and how to judge it.

A spec names Python callables as ``"module:attr"`` (an importable module) or ``"file.py:attr"``
(a file next to the spec). Example (the shipped ``cpu-example``)::

    name = "cpu-example"
    description = "row-wise softmax(x @ w) written as a Python loop"
    device = "cpu"                       # "cpu", or "cuda" (Triton interpreter without a GPU)
    candidate = "candidate.py"           # the file the agent edits, relative to the workspace
    entry = "kernel"                     # the callable in it
    start = "start.py"                   # shipped starting candidate (optional)
    reference = "task.py:reference"      # correctness oracle
    baseline = ["task.py:baseline"]      # first importable one is timed against the candidate
    inputs = "task.py:make_inputs"       # (shape: dict, dtype: str, device: str, seed: int) -> (args, kwargs)
    work = "task.py:work"                # optional: (shape, dtype) -> (bytes, flops)
    forbidden = ["numba"]                # modules the candidate may not import
    shapes = [{n = 512, d = 64}]
    dtypes = ["float32"]

    [interpreter]                        # device = "cuda" on a machine without a GPU
    shapes = [{n = 64, d = 32}]
    dtypes = ["float32"]

    [tolerance]                          # relative RMS error allowed, by dtype
    float32 = 1e-5
    abs_floor = 1e-6                     # below this max abs error a result passes anyway

    [timing]
    warmup = 3
    repeats = 15

    [budget]
    eval_timeout_s = 300                 # one evaluation, in its own process
    max_wall = "24h"
    budget_usd = 50.0
    max_tool_calls = 2000

    [limits]                             # the device's ceilings, for GB/s and TFLOP/s shares
    bytes_per_s = 4.8e12
    flop_per_s = 989e12
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from .errors import SpecError

SPEC_FILE = "kernel-task.toml"
SHIPPED_DIR = Path(__file__).resolve().parent / "specs"
DTYPES = ("float32", "float16", "bfloat16", "float64")

#: Third-party kernel libraries no campaign may import (added to every spec's own list).
ALWAYS_FORBIDDEN = (
    "fla",
    "flash_attn",
    "flashinfer",
    "flash_mla",
    "flash_kda",
    "cula",
    "liger_kernel",
    "xformers",
    "vllm",
    "sglang",
    "thunderkittens",
    "deep_gemm",
)


class Timing(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How candidate and baseline are timed: ``warmup`` calls, then ``repeats`` timed rounds."""

    warmup: int = 3
    repeats: int = 15


class Budget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Limits of a campaign: one evaluation's timeout (s), wall time, dollars, tool calls."""

    eval_timeout_s: float = 300.0
    max_wall: str = "24h"
    budget_usd: float | None = None
    max_tool_calls: int | None = None


class Limits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The device's ceilings (bytes/s, FLOP/s) that achieved throughput is compared with."""

    bytes_per_s: float | None = None
    flop_per_s: float | None = None


class Interpreter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Shapes and dtypes used for a ``cuda`` spec on a machine without a GPU (Triton interpreter)."""

    shapes: list[dict[str, Any]] = []
    dtypes: list[str] = msgspec.field(default_factory=lambda: ["float32"])


class CampaignSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A parsed, checked ``kernel-task.toml`` (see the module docstring for every field).

    ``spec_dir`` is the folder of the file, against which ``file.py:attr`` references and
    ``start`` resolve.
    """

    name: str
    candidate: str
    reference: str
    baseline: list[str]
    inputs: str
    shapes: list[dict[str, Any]]
    description: str = ""
    device: str = "cpu"
    entry: str = "kernel"
    start: str | None = None
    work: str | None = None
    forbidden: list[str] = []
    dtypes: list[str] = msgspec.field(default_factory=lambda: ["float32"])
    interpreter: Interpreter = Interpreter()
    tolerance: dict[str, float] = {}
    timing: Timing = Timing()
    budget: Budget = Budget()
    limits: Limits = Limits()
    spec_dir: str = ""

    @property
    def forbidden_modules(self) -> tuple[str, ...]:
        """The spec's forbidden modules plus ``ALWAYS_FORBIDDEN``, without duplicates."""
        return tuple(dict.fromkeys([*self.forbidden, *ALWAYS_FORBIDDEN]))

    @property
    def max_wall_s(self) -> float:
        """``budget.max_wall`` in seconds."""
        return parse_duration(self.budget.max_wall)

    def abs_floor(self) -> float:
        """Max absolute error under which a result passes whatever its relative error."""
        return float(self.tolerance.get("abs_floor", 1e-6))

    def rel_tolerance(self, dtype: str) -> float:
        """Relative RMS tolerance for ``dtype``."""
        return float(self.tolerance[dtype])


def parse_duration(text: str) -> float:
    """``"90s"``, ``"15m"``, ``"24h"``, ``"1d"`` or a plain number of seconds -> seconds.

    Raises:
        SpecError: on anything else.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", str(text))
    if not m:
        raise SpecError(f"bad duration {text!r}: write e.g. 90s, 15m, 24h or 1d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def shipped_specs() -> list[str]:
    """Names of the specs shipped with musec (folders under ``specs/``)."""
    return sorted(p.parent.name for p in SHIPPED_DIR.glob(f"*/{SPEC_FILE}"))


def find_spec_file(name_or_path: str | Path) -> Path:
    """Resolve a shipped spec name, a folder holding ``kernel-task.toml``, or the file itself.

    Raises:
        SpecError: nothing found (the message lists the shipped names).
    """
    p = Path(name_or_path).expanduser()
    if p.is_dir() and (p / SPEC_FILE).is_file():
        return (p / SPEC_FILE).resolve()
    if p.is_file():
        return p.resolve()
    shipped = SHIPPED_DIR / str(name_or_path) / SPEC_FILE
    if shipped.is_file():
        return shipped
    raise SpecError(
        f"no campaign spec {str(name_or_path)!r}: give a path to a {SPEC_FILE} or one of "
        f"{', '.join(shipped_specs())}"
    )


def load_spec(name_or_path: str | Path) -> CampaignSpec:
    """Read and check a campaign spec.

    Args:
        name_or_path: a shipped spec name (``kda``, ``mla-decode``, ``cpu-example``), a folder
            holding ``kernel-task.toml``, or the file.

    Raises:
        SpecError: unreadable file, invalid TOML, unknown or missing fields, bad values; the
            message is one line naming the file and what to fix.
    """
    path = find_spec_file(name_or_path)
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: invalid TOML: {exc}") from exc
    return parse_spec(raw, path.parent, str(path))


def parse_spec(raw: dict[str, Any], spec_dir: Path, where: str = SPEC_FILE) -> CampaignSpec:
    """Check a spec already read from TOML (see ``load_spec``); ``where`` names it in errors."""
    if isinstance(raw.get("baseline"), str):
        raw = {**raw, "baseline": [raw["baseline"]]}
    try:
        spec = msgspec.convert({**raw, "spec_dir": str(spec_dir)}, CampaignSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{where}: {exc}") from exc
    _check(spec, where)
    return spec


def _check(spec: CampaignSpec, where: str) -> None:
    def bad(msg: str) -> SpecError:
        return SpecError(f"{where}: {msg}")

    if spec.device not in ("cpu", "cuda"):
        raise bad(f"device must be 'cpu' or 'cuda'; got {spec.device!r}")
    for field in ("reference", "inputs", *(["work"] if spec.work else [])):
        _check_ref(getattr(spec, field), field, bad)
    if not spec.baseline:
        raise bad("baseline needs at least one 'module:callable'")
    for ref in spec.baseline:
        _check_ref(ref, "baseline", bad)
    if not spec.shapes:
        raise bad("shapes is empty: give at least one shape table")
    if not spec.entry.isidentifier():
        raise bad(f"entry must be a Python name; got {spec.entry!r}")
    if Path(spec.candidate).is_absolute() or ".." in Path(spec.candidate).parts:
        raise bad(f"candidate must be a path inside the workspace; got {spec.candidate!r}")
    for dtype in [*spec.dtypes, *spec.interpreter.dtypes]:
        if dtype not in DTYPES:
            raise bad(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
        if dtype not in spec.tolerance:
            raise bad(f"[tolerance] has no entry for {dtype}")
    if spec.device == "cuda" and not spec.interpreter.shapes:
        raise bad("a cuda spec needs [interpreter] shapes for machines without a GPU")
    if spec.start and not (Path(spec.spec_dir) / spec.start).is_file():
        raise bad(f"start file {spec.start!r} not found next to the spec")
    if spec.timing.repeats < 1 or spec.timing.warmup < 0:
        raise bad("timing needs repeats >= 1 and warmup >= 0")
    if spec.budget.eval_timeout_s <= 0:
        raise bad("budget.eval_timeout_s must be > 0")
    try:
        parse_duration(spec.budget.max_wall)
    except SpecError as exc:
        raise bad(f"budget.max_wall: {exc}") from exc


def _check_ref(ref: str, field: str, bad) -> None:
    mod, sep, attr = ref.rpartition(":")
    if not sep or not mod or not attr.isidentifier():
        raise bad(f"{field} must be 'module:callable' or 'file.py:callable'; got {ref!r}")


def shape_label(shape: dict[str, Any]) -> str:
    """A short stable label for a shape table, e.g. ``n=512,d=64``."""
    return ",".join(f"{k}={v}" for k, v in shape.items())
