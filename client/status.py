"""The interactive client's status line: model, context used, session cost, live agents and
workers, approval mode; a fold over the session's events (decoded log lines)."""

from __future__ import annotations

from typing import Any

from musec.daemon import protocol as p

from .output import safe


class SessionStatus:
    """What the status line says, kept up to date from the events a client reads.

    Args:
        model: the model asked for (the ``session_started`` event's wins).
        approval: the approval mode asked for (likewise).
    """

    def __init__(self, model: str = "", approval: str = "") -> None:
        self.model = model
        self.approval = approval
        self.context_window_tokens = 0
        # the main agent's context: its last request's estimate (model_request.context_tokens),
        # then the provider's count of it and its answer (input + cache read + cache write + output)
        self.context_tokens = 0
        self.cost_usd = 0.0
        self.agents: dict[str, str] = {}  # live background agents: id -> role
        self.workers: set[str] = set()  # live workers
        self.workspace = ""
        self.options: dict[str, Any] = {}  # how the session was set up (``session_options``)
        self.plan = ""  # plan mode: planning, proposed, approved ("" without a plan)
        self.plan_files: dict[str, bool] = {}  # the approved plan's files to change: edited since?
        self.plan_checks: dict[str, bool] = {}  # its verification commands: passed since?
        self._plan_calls: dict[str, str] = {}

    def fold(self, ev: dict[str, Any]) -> None:
        """Take one event into account."""
        kind = ev.get("type")
        agent = str(ev.get("agent", "main"))
        if kind in ("model_response", "compaction_finished"):  # a summarising call costs like any call
            cost = ev.get("cost_usd")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.cost_usd += float(cost)
        if kind == "session_started":
            self.model = str(ev.get("model") or self.model)
            self.approval = str(ev.get("approval") or self.approval)
            self.workspace = str(ev.get("workspace") or self.workspace)
            self.options = {k: ev[k] for k in _OPTIONS if k in ev}
        elif kind == "model_request" and agent == "main":
            self._context(ev)
        elif kind in ("session_resumed", "approval_mode_changed") and ev.get("approval"):
            self.approval = str(ev["approval"])
            if ev.get("previous") == "plan" and self.plan in ("planning", "proposed"):
                self.plan = ""  # /approval MODE left plan mode (fresh-user s8 J11)
        elif kind == "model_response":
            usage = ev.get("usage")
            if agent == "main" and isinstance(usage, dict):
                reported = sum(v for k, v in usage.items() if isinstance(v, int)
                               and k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
                # a provider that reports no usage (the scripted model) keeps the estimate
                self.context_tokens = reported or self.context_tokens
        elif kind == "agent_spawned" and ev.get("role") != "worker":
            self.agents[str(ev.get("agent", agent))] = str(ev.get("role", ""))
        elif kind in ("agent_stopped", "agent_finished"):
            self.agents.pop(agent, None)
        elif kind == "worker_spawned":
            self.workers.add(str(ev.get("worker", "")))
        elif kind == "worker_finished":
            self.workers.discard(str(ev.get("worker", "")))
        elif kind == "compaction_finished" and agent == "main":  # `musec compact` from elsewhere, too
            tokens = ev.get("tokens_after")
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                self.context_tokens = tokens
        elif kind == "model_switched" and agent == "main":
            self.model = str(ev.get("model") or self.model)
            self._context(ev)
        elif kind in ("plan_started", "plan_proposed", "plan_approved") or (self.plan == "approved" and agent == "main"):
            self._fold_plan(kind, ev)

    def _context(self, ev: dict[str, Any]) -> None:
        """The context fields of a ``model_request`` or ``model_switched`` (agents/context.py)."""
        tokens, window = ev.get("context_tokens"), ev.get("context_window_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            self.context_tokens = tokens
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            self.context_window_tokens = window

    def session_options(self) -> dict[str, Any]:
        """The options a new session needs to be set up like this one (``/clear``): the
        ``args`` names of ``musec chat`` (model, approval, sandbox, max_turns, agents,
        agents_model, agents_budget_usd, blackboard, workspace), from the events seen;
        empty when no ``session_started`` was seen."""
        if not self.model:
            return {}
        o = self.options
        found: dict[str, Any] = {"model": self.model, "approval": self.approval or "ask"}
        if self.workspace:
            found["workspace"] = self.workspace
        if "sandbox" in o:
            found["sandbox"] = str(o["sandbox"])
        if isinstance(o.get("max_turns"), int):
            found["max_turns"] = o["max_turns"]
        if isinstance(o.get("background"), list):
            found["agents"] = ",".join(str(r) for r in o["background"]) or "none"
        if "agents_model" in o:
            found["agents_model"] = str(o["agents_model"] or "")
        if isinstance(o.get("agents_budget_usd"), int | float):
            found["agents_budget_usd"] = float(o["agents_budget_usd"])
        if isinstance(o.get("blackboard"), bool):
            found["blackboard"] = o["blackboard"]
        return found

    def _fold_plan(self, kind: Any, ev: dict[str, Any]) -> None:
        """Plan mode and the approved plan's progress (its files edited, its checks passed)."""
        if kind == "plan_started":
            self.plan, self.approval = "planning", "plan"
        elif kind == "plan_proposed":
            self.plan = "proposed"
        elif kind == "plan_approved":
            self.plan, self.approval = "approved", str(ev.get("approval") or self.approval)
            text = str(ev.get("text", ""))
            self.plan_files = {item.split(" ", 1)[0].strip("`*:,;"): False for item in _items(text, "files to change")}
            self.plan_checks = {item: False for item in _items(text, "verification")}
        elif kind == "file_edited":
            path = str(ev.get("path", ""))
            for name in self.plan_files:
                if path == name or path.endswith("/" + name):
                    self.plan_files[name] = True
        elif kind == "tool_started" and isinstance(ev.get("input"), dict):
            command = str(ev["input"].get("command", "")).strip()
            if command in self.plan_checks:
                self._plan_calls[str(ev.get("call_id"))] = command
        elif kind == "tool_finished" and str(ev.get("call_id")) in self._plan_calls:
            self.plan_checks[self._plan_calls.pop(str(ev.get("call_id")))] = ev.get("exit_status") == 0

    def plan_text(self) -> str:
        """``plan approved: files 1/2, checks 0/1`` (or the plan's state), '' without a plan."""
        if self.plan != "approved":
            return f"plan {self.plan}" if self.plan else ""
        return (f"plan: files {sum(self.plan_files.values())}/{len(self.plan_files)}, "
                f"checks {sum(self.plan_checks.values())}/{len(self.plan_checks)}")

    def learn_catalog(self, models: list[p.ModelInfo]) -> None:
        """Find the model's context window in the catalog (by id or alias)."""
        name = self.model.split("/", 1)[-1]
        for m in models:
            if self.model in (m.id, *m.aliases) or name == m.id.split("/", 1)[-1]:
                self.context_window_tokens = m.context_window_tokens
                return

    def context_text(self) -> str:
        """``ctx 12% of 200k`` when the window is known, else ``ctx 24k tokens``."""
        used = self.context_tokens
        if self.context_window_tokens:
            return f"ctx {100 * used / self.context_window_tokens:.0f}% of {_k(self.context_window_tokens)}"
        return f"ctx {_k(used)} tokens"

    def text(self) -> str:
        """The status line, cleaned."""
        model = self.model or "?"
        if model.startswith("scripted:"):
            model = "scripted:" + model.rpartition("/")[2]
        parts = [model, self.context_text(), f"${self.cost_usd:.4f}"]
        if self.agents:
            parts.append("agents: " + ", ".join(sorted(self.agents)))
        if self.workers:
            parts.append(f"workers: {len(self.workers)} live")
        if self.plan:
            parts.append(self.plan_text())
        parts.append(f"approval {self.approval or 'ask'}")
        return safe(" · ".join(parts))


_OPTIONS = ("sandbox", "max_turns", "background", "agents_model", "agents_budget_usd", "blackboard")


def _items(text: str, heading: str) -> list[str]:
    """The ``- item`` lines of a plan document's ``## HEADING`` section (backquotes removed);
    the same reading as ``agents.plan.section_items``, which the client may not import."""
    items, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip().lower() == heading
        elif inside and line.strip().startswith(("- ", "* ")):
            item = line.strip()[2:].strip()
            item = item[1:-1] if len(item) > 1 and item[0] == item[-1] == "`" else item
            if item and item != "(none)":
                items.append(item)
    return items


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k".replace(".0k", "k") if n >= 1000 else str(n)
