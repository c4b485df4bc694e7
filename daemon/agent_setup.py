"""Building a session's agents from a ``StartSession`` request, and wiring them together.

This is where the daemon's pieces meet the agents': the main agent, its background roles
(``agents.roles``), the fan-out runner (``agents.workers.run``) with a factory for its
worker agents, and the scout's own agent. Each gets only what it needs injected; agent
code never imports the daemon.

Why over 500 lines: every agent of a session is built here from one request (main, workers,
the scout, a model switch, the summarising model of compaction), so what they share (the
provider, the catalog entry, the sandbox and permission policy) is decided in one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from musec.agents.core.events import (
    UNSET,
    ApprovalRequested,
    ApprovalResolved,
    KernelEvaluated,
    ModelRetry,
    RateLimited,
    SessionStarted,
)
from musec.agents.core.faults import NO_FAULTS, Faults

from . import protocol as p
from .blobs import BlobStore
from .errors import BadRequest
from .version import musec_version

if TYPE_CHECKING:
    from musec.agents.loop import Agent

    from .paths import Paths
    from .session import Session


@dataclass(frozen=True)
class AgentDeps:
    """What building an agent needs from the daemon, shared by every session.

    Attributes:
        paths: the daemon's directories (config, state, blobs).
        http: the daemon's one ``httpx.AsyncClient``.
        rate_limits: the daemon-wide ``RateLimitRegistry`` (one limiter per credential).
        faults: the restart tests' crash points (``Faults.from_env`` at the entry point).
    """

    paths: Paths
    http: Any
    rate_limits: Any
    faults: Faults = NO_FAULTS


# What tool processes get of an environment (DESIGN §11); the tools drop more by pattern.
_TOOL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL", "TZ",
                  "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV")


def tool_env(client: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment tool commands start from: a short allow-list (``_TOOL_ENV_KEEP``) of
    the client's environment, the terminal that started or resumed the session (its
    ``PATH``, its activated venv), else of the daemon's (which is whichever shell first
    started it, or the service manager's: fresh-user trial s5, F24).

    Args:
        client: ``StartSession.environment`` (held in memory only); empty: the daemon's.
    """
    source = client if client else os.environ
    env = {k: source[k] for k in _TOOL_ENV_KEEP if k in source}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def build_main_agent(deps: AgentDeps, session: Session, req: p.StartSession, credentials: dict[str, str]) -> Agent:
    """The main agent of a session: the default tools plus ``spawn_workers`` (and
    ``ask_agent`` with background roles). Sets the session's fan-out runner and roles.

    Raises:
        BadRequest: an unknown role; see also ``build_agent``.
    """
    from musec.agents.ask_agent import AskAgentTool
    from musec.agents.plan import ProposePlanTool
    from musec.agents.roles import ROLES, make_roles
    from musec.agents.workers.tool import SpawnWorkersTool

    unknown = [r for r in req.agents if r not in ROLES]
    if unknown:
        raise BadRequest(f"unknown background agent {unknown[0]!r}; the roles are: {', '.join(ROLES)}")
    session.fanout = _fanout(deps, session, req, credentials)
    extra: list[Any] = [SpawnWorkersTool(session.fanout), ProposePlanTool()]
    if req.agents:
        scout = _scout_agent(deps, session, req, credentials) if "scout" in req.agents and req.agents_model else None
        session.background = make_roles(session, session.blackboard, Path(req.workspace).resolve(), list(req.agents),
                                        sandbox_wrap(req, deps.paths), scout)
        extra.append(AskAgentTool(session.ask_agent))
    suffix = ""
    if req.kernel_spec:
        tools, suffix = _kernel_campaign(deps, session, req)
        extra.extend(tools)
    agent = build_agent(deps, session, req, credentials, extra_tools=extra, prompt_suffix=suffix)
    agent.max_wall_s = req.max_wall_s  # the session's limit is the main agent's (workers have their own)
    from .goals import goal_driver

    goal_driver(session, req, agent, lambda r, **kw: build_agent(deps, session, r, credentials, **kw))
    session.make_critic = lambda route: _critic(deps, session, req, credentials, route)
    from .extensions import attach_extensions

    attach_extensions(deps, session, req, agent, prompt_suffix=suffix)
    return agent


def _kernel_campaign(deps: AgentDeps, session: Session, req: p.StartSession) -> tuple[list[Any], str]:
    """Set up the campaign of a ``musec optimize`` session: its tools and prompt text.

    Its leaderboard is rebuilt from the session's own ``kernel_evaluated`` events, which a
    resume has read off the event loop (``campaign_past``, in ``session.kernel_past``);
    a new session has none. Each new evaluation is recorded as one.

    Raises:
        BadRequest: the spec cannot be used (its one-line reason).
    """
    from musec.agents.kernel_opt.errors import SpecError
    from musec.agents.kernel_opt.role import start_campaign

    past, started_at = session.kernel_past if session.kernel_past is not None else ([], None)
    try:
        campaign, tools, prompt = start_campaign(
            req.kernel_spec, Path(req.workspace).resolve(), deps.paths.kernels / session.id,
            record=session.record,
            tool_calls=lambda: session.tool_calls, past=past, started_at=started_at,
            max_wall_s=req.max_wall_s or None)
    except SpecError as exc:
        raise BadRequest(str(exc)) from exc
    session.campaign = campaign
    return tools, prompt


def campaign_past(path: Path) -> tuple[list[KernelEvaluated], float | None]:
    """A kernel campaign's evaluations so far and the time its session started, from its log
    (read a line at a time: run it in a worker thread, it reads the whole log).

    Raises:
        LogCorrupt: a line is not an event (``iter_events``).
    """
    from .eventlog import iter_events

    past: list[KernelEvaluated] = []
    started_at = None
    for ev in iter_events(path):
        if isinstance(ev, SessionStarted):
            started_at = ev.ts or None
        elif isinstance(ev, KernelEvaluated):
            past.append(ev)
    return past, started_at


def _fanout(deps: AgentDeps, session: Session, req: p.StartSession, credentials: dict[str, str]) -> Any:
    """The session's ``spawn_workers`` runner, with a factory for its worker agents."""
    from musec.agents.workers.run import FanOut

    from .eventlog import iter_events

    def make_worker(agent_id: str, worktree: Path, prompt_suffix: str) -> Agent:
        extra: list[Any] = []
        campaign = session.campaign
        if campaign is not None:  # a kernel campaign's variant ideas: each worker evaluates its own candidate
            from musec.agents.kernel_opt.tools import campaign_prompt, campaign_tools

            view = campaign.in_worktree(worktree)
            extra = campaign_tools(view, lambda: session.tool_calls)
            prompt_suffix += campaign_prompt(view)
        worker = build_agent(deps, session, req, credentials, agent_id=agent_id, workspace=worktree,
                             extra_tools=extra, prompt_suffix=prompt_suffix)
        worker.follow_mode(session.worker_approval)  # the session's mode now, not the one it started in (s8 J5)
        return worker

    limits = _workers_config(deps)
    return FanOut(session, Path(req.workspace), deps.paths.state, make_worker, session.workers,
                  lambda: iter_events(session.log.path), wrap=sandbox_wrap(req, deps.paths),
                  time_limit_s=limits.time_limit_s, test_timeout_s=limits.test_timeout_s,
                  test_command=limits.test_command)


def _workers_config(deps: AgentDeps) -> Any:
    """The ``[workers]`` table of the person's config (``agents.config.WorkersConfig``).

    Raises:
        BadRequest: the config file is malformed (the message names the file and the key).
    """
    from musec.agents.config import ConfigError, load_user_config

    try:
        return load_user_config(deps.paths.config).workers
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc


_SCOUT_PROMPT = """

You are the scout, a background agent of this session. You know the repository: answer the
main agent's questions about where things are and how they work, briefly, naming files and
symbols. You can only read. What you read stays in your context for the whole session, so
do not read a file twice."""


def _scout_agent(deps: AgentDeps, session: Session, req: p.StartSession, credentials: dict[str, str]) -> Agent:
    """The scout's own agent: the session's background model, read-only tools, its own budget."""
    import msgspec

    scout_req = msgspec.structs.replace(req, model=req.agents_model, budget_usd=req.agents_budget_usd)
    agent = build_agent(deps, session, scout_req, credentials, agent_id="scout", prompt_suffix=_SCOUT_PROMPT)
    agent.tools = {name: tool for name, tool in agent.tools.items() if tool.access == "read"}
    session.workers["scout"] = agent  # its own events fold into its history
    return agent


def _critic(deps: AgentDeps, session: Session, req: p.StartSession, credentials: dict[str, str], route: Any) -> Any:
    """The session's critic (``/grill``): the background model (else the session's), read-only
    tools and ``grill_question`` (its questions go to ``route``); its history is folded
    from the log so far, so a resumed session's critic goes on where it was."""
    import msgspec
    from musec.agents.roles.critic import CRITIC_PROMPT, Critic, GrillQuestionTool

    from .eventlog import iter_events

    critic_req = msgspec.structs.replace(req, model=req.agents_model or req.model,
                                         budget_usd=req.agents_budget_usd or req.budget_usd)
    agent = build_agent(deps, session, critic_req, credentials, agent_id="critic", prompt_suffix=CRITIC_PROMPT,
                        extra_tools=[GrillQuestionTool(route)])
    agent.tools = {name: tool for name, tool in agent.tools.items() if tool.access == "read"}
    critic = Critic(session, session.blackboard, Path(req.workspace).resolve(), agent)
    for ev in iter_events(session.log.path):
        agent.history.apply(ev)
        critic.restore(ev)
    session.workers["critic"] = agent  # its own events fold into its history
    return critic


def sandbox_wrap(req: p.StartSession, paths: Any) -> Any:
    """``(argv, cwd) -> argv`` running a command (the tests of the verifier or of an
    integration) in the same sandbox as the agents' commands: musec's own config and state
    (``paths``, a ``daemon.paths.Paths``) read-only, what the ``read`` deny rules and the
    defaults hide hidden (``sandbox_masks``); ``None`` with no sandbox. Where the masks
    cannot be applied, the argv only says why and fails (exit status 126).

    Raises:
        BadRequest, TrustRequired: as ``permission_policy``.
    """
    from musec.agents.tools.base import SandboxPolicy
    from musec.agents.tools.common import git_control_paths
    from musec.agents.tools.errors import SandboxUnavailable
    from musec.agents.tools.sandbox import bwrap_argv, find_bwrap

    if req.sandbox == "off" or os.uname().sysname == "Darwin":
        return None
    bwrap = find_bwrap()
    if bwrap is None:
        return None
    # Test runs of musec's own (verifier, integration) leave no bytecode in the tree.
    env = {**tool_env(req.environment), "PYTHONDONTWRITEBYTECODE": "1"}
    read_deny, hide = sandbox_masks(paths, req, Path(req.workspace).resolve())

    def wrap(argv: list[str], cwd: Path) -> list[str]:
        policy = SandboxPolicy(read_only=(str(paths.config), str(paths.state), *git_control_paths(cwd)),
                               read_deny=read_deny, hide=hide)
        try:
            return bwrap_argv(policy, cwd, env, argv, bwrap=bwrap)
        except SandboxUnavailable as exc:
            return ["/bin/sh", "-c", 'printf "musec: %s\\n" "$1" >&2; exit 126', "sh", str(exc)]

    return wrap


def sandbox_masks(paths: Any, req: p.StartSession, workspace: Path, policy: Any = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What commands in ``workspace`` must not see: the ``read`` deny globs of the rules
    (``SandboxPolicy.read_deny``) and musec's default hidden paths, less those a ``read``
    allow rule names (``SandboxPolicy.hide``). ``policy``: the workspace's
    ``permission_policy`` when the caller has it.

    Raises:
        BadRequest: a read deny rule would hide the workspace itself (it names the rule),
            or the session's workspace lies in a hidden folder (``~/.ssh``, musec's state);
            see also ``permission_policy``.
    """
    from musec.agents.tools.errors import SandboxUnavailable
    from musec.agents.tools.masks import HidesWorkspace, default_hidden, hidden_paths, hidden_store_holding

    policy = policy if policy is not None else permission_policy(paths, req, workspace)
    read_deny = policy.read_deny_globs()
    allowed = [r.pattern for r in policy.rules if r.action == "allow" and r.kind == "read" and r.pattern]
    # `~` is the daemon's home in the rules, but commands get the terminal's HOME (tool_env):
    # where the two differ, what `~` names is hidden under both (fresh-user s5 F2).
    homes = dict.fromkeys([os.path.expanduser("~"), tool_env(req.environment).get("HOME", "")])
    hide = tuple(dict.fromkeys(p for home in homes if home.startswith("/")
                               for p in default_hidden(home, str(paths.config), allowed, str(paths.state))))
    # ... and musec's folders and shell history as the terminal's environment names them (s6 G12)
    config, state = _musec_dirs(req.environment or {})
    hide += tuple(p for p in default_hidden(None, config, allowed, state, [(req.environment or {}).get("HISTFILE", "")])
                  if p not in hide)
    holder = hidden_store_holding(str(workspace), hide) if workspace == Path(req.workspace).resolve() else ""
    if holder:  # the masks would be moot there (s6 G14)
        raise BadRequest(f"the workspace {workspace} is inside {holder}, which musec hides from the agent "
                         "(a credential store or musec's own state); start musec in a project folder elsewhere")
    for home in list(homes)[1:]:
        if home.startswith("/"):
            denies = [r.pattern for r in policy.rules if r.action == "deny" and r.kind == "read" and r.pattern]
            read_deny += tuple(home.rstrip("/") + d[1:] for d in denies if d == "~" or d.startswith("~/"))
    read_deny = tuple(dict.fromkeys(read_deny))
    if req.sandbox != "off" and read_deny:
        try:
            hidden_paths([g for g in read_deny if g.startswith("/")], workspace)
        except HidesWorkspace as exc:
            raise BadRequest(str(exc)) from exc
        except SandboxUnavailable:  # too many files to look at: each command says so when it runs
            pass
    return read_deny, hide


def _musec_dirs(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """musec's config and state folders (DESIGN §2) as the environment ``env`` (a
    terminal's) names them; ``None`` for one it does not name absolutely."""
    if env.get("MUSEC_HOME", "").startswith("/"):
        return str(p.config_home(env)), str(p.state_home(env))
    home = env.get("HOME", "")
    config = env.get("XDG_CONFIG_HOME") or (home and os.path.join(home, ".config"))
    state = env.get("XDG_STATE_HOME") or (home and os.path.join(home, ".local", "state"))
    return (os.path.join(config, "musec") if config.startswith("/") else None,
            os.path.join(state, "musec") if state.startswith("/") else None)


def build_agent(
    deps: AgentDeps, session: Session, req: p.StartSession, credentials: dict[str, str], *,
    agent_id: str = "main", workspace: Path | None = None, extra_tools: list[Any] | None = None,
    prompt_suffix: str = "",
) -> Agent:
    """An agent of a session: ``main`` in the session's workspace, or a worker in its
    worktree (``agent_id="worker:NAME"``, ``workspace`` the worktree).

    Raises:
        BadRequest: the model id, approval mode or sandbox mode is not valid, or the
            provider's credentials are missing (the message names the variable).
    """
    from musec.agents.approval import MODES, sandbox_profile
    from musec.agents.loop import Agent
    from musec.agents.prompt import system_prompt
    from musec.agents.tools import default_tools
    from musec.agents.tools.base import SandboxPolicy, ToolContext
    from musec.agents.tools.common import git_control_paths

    if req.approval not in MODES:
        raise BadRequest(f"unknown approval mode {req.approval!r}; use one of {', '.join(MODES)}")
    if req.sandbox not in ("bwrap", "seatbelt", "off", "auto"):
        raise BadRequest(f"unknown sandbox {req.sandbox!r}; use bwrap, seatbelt or off")
    darwin = os.uname().sysname == "Darwin"
    if req.sandbox == ("bwrap" if darwin else "seatbelt"):  # every command would fail in it
        raise BadRequest(f"--sandbox {req.sandbox} does not exist on this system; use "
                         f"--sandbox {'seatbelt' if darwin else 'bwrap'} (what auto picks)")
    if req.max_turns < 1:
        raise BadRequest("--max-turns must be at least 1")
    workspace = (workspace or Path(req.workspace)).resolve()
    entry, provider = _provider(deps, session, req.model, credentials, agent_id, workspace)
    mode = req.sandbox if req.sandbox != "auto" else ("seatbelt" if darwin else "bwrap")
    policy = permission_policy(deps.paths, req, workspace)
    read_deny, hide = sandbox_masks(deps.paths, req, workspace, policy)
    ctx = ToolContext(
        workspace=workspace,
        env=tool_env(req.environment),
        sandbox=SandboxPolicy(mode=mode, profile=sandbox_profile(req.approval), read_deny=read_deny,
                              proxy_socket=net_proxy_socket(session, policy) if mode == "bwrap" else "",
                              read_only=(str(deps.paths.config), str(deps.paths.state),
                                         *git_control_paths(workspace)), hide=hide),
        state_dir=deps.paths.state,
        agent_id=agent_id,
        blackboard=session.blackboard,
        faults=deps.faults,
        blob_dir=deps.paths.blobs,
    )
    blobs = BlobStore(deps.paths.blobs)
    agent = Agent(
        agent_id=agent_id,
        provider=provider,
        tools=[*default_tools(), *(extra_tools or [])],
        ctx=ctx,
        record=session.record,
        ask=session.ask,
        on_delta=session.delta,
        approval_mode=req.approval,
        max_turns=req.max_turns,
        system_prompt=system_prompt(workspace) + prompt_suffix,
        store_blob=lambda data: blobs.put(session.log.redact.blob(data)),  # stored: redacted like the log
        session_id=session.id,
        cost_of=entry.cost_usd,
        budget_usd=req.budget_usd,
        faults=deps.faults,
        context_config=_context_config(deps),
        window_tokens=entry.context_window_tokens,
    )
    agent.policy = policy
    agent.model_id = req.model
    agent.durable = session.durable  # write-ahead events are fsynced off the loop, in group commits
    agent.stored_request = session.log.redact.struct  # digests and tags of what the log keeps (issue 13 case 1)
    agent.history.stored = session.log.redact.text
    _set_compaction(agent, entry, deps, session, credentials, agent_id, workspace)
    return agent


def _provider(deps: AgentDeps, session: Session, model: str, credentials: dict[str, str], agent_id: str,
              workspace: Path) -> tuple[Any, Any]:
    """The catalog entry of ``model`` and a provider for it, answering for ``agent_id``.

    Raises:
        BadRequest: the model id is not valid or its provider's credentials are missing
            (the message names the variable).
    """
    from musec.agents.core.errors import AgentError
    from musec.agents.providers import make_provider
    from musec.agents.providers.catalog import load_catalog
    from musec.agents.providers.data_use import training_allowed

    try:
        catalog = load_catalog(deps.paths.config)
        entry = catalog.resolve(model)
        provider = make_provider(model, credentials, agent_id=agent_id, http_client=deps.http, catalog=catalog,
                                 on_retry=lambda notice: _record_retry(session, notice, agent_id),
                                 limiter=deps.rate_limits, allow_training_data=training_allowed(deps.paths.config, workspace),
                                 on_rate_limited=lambda wait: session.record(RateLimited(
                                     agent=agent_id, credential=wait.credential, wait_s=wait.wait_s, reason=wait.reason)))
    except AgentError as exc:
        raise BadRequest(str(exc)) from exc
    return entry, provider


def switch_model(deps: AgentDeps, session: Session, agent: Agent, model: str, credentials: dict[str, str], *,
                 by: str) -> bool:
    """Switch ``agent`` to ``model`` from its next request (issue 12 part 7); ``False``
    when ``model`` is the model it already uses (by catalog id: an alias of it is the same).

    Raises:
        BadRequest: as ``build_agent`` for the new model; the agent is then unchanged.
    """
    from musec.agents.core.errors import AgentError
    from musec.agents.providers.catalog import load_catalog

    try:
        catalog = load_catalog(deps.paths.config)
        same = catalog.resolve(model).id == catalog.resolve(agent.model_id).id
    except AgentError as exc:
        raise BadRequest(str(exc)) from exc
    if same:
        return False
    entry, provider = _provider(deps, session, model, credentials, agent.agent_id, agent.ctx.workspace)
    agent.switch_model(provider, model=model, window_tokens=entry.context_window_tokens, cost_of=entry.cost_usd, by=by)
    return True


def _context_config(deps: AgentDeps) -> Any:
    """The ``[context]`` table of the person's config (``agents.budget.ContextConfig``).

    Raises:
        BadRequest: the config file is malformed (the message names the file).
    """
    from musec.agents.config import ConfigError, load_user_config

    try:
        return load_user_config(deps.paths.config).context
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc


def _set_compaction(agent: Agent, entry: Any, deps: AgentDeps, session: Session,
                    credentials: dict[str, str], agent_id: str, workspace: Path) -> None:
    """The agent's ``compact_at`` from its catalog entry (its window is ``window_tokens``) and,
    with ``compact_model``, the provider that writes its summaries. Raises ``BadRequest``."""
    from musec.agents.compaction import DEFAULT_COMPACT_AT, CompactionPolicy

    agent.compaction = CompactionPolicy(compact_at=entry.compact_at or DEFAULT_COMPACT_AT)
    if entry.compact_model:
        summarizer, agent.summarizer = _provider(deps, session, entry.compact_model, credentials, agent_id, workspace)
        agent.summary_cost_of = summarizer.cost_usd


def net_proxy_socket(session: Any, policy: Any) -> str:
    """The socket of the session's network proxy, made when the first agent's rules open
    the network for some host (``net(...)``); empty while the network stays closed."""
    if session.net_proxy is None:
        if not any(r.kind == "net" and r.action != "deny" for r in policy.rules):
            return ""
        from musec.agents.netrules import decide_host

        from .netproxy import NetProxy

        session.net_proxy = NetProxy(lambda host, port: decide_host(host, port, policy.rules), session.record,
                                     ask=_net_asker(session, policy), durable=session.durable)
    return str(session.net_proxy.socket_path)


def _net_asker(session: Any, policy: Any) -> Any:
    """How an ask ``net`` rule is asked: like a tool call's approval (the same events and
    answers, tool ``net``, call ids ``net-N``); a headless run denies. "Always" allows the
    host and port for the rest of the session."""
    import itertools
    from types import SimpleNamespace

    from musec.agents.core.errors import AgentError
    from musec.agents.permissions import parse_rule

    numbers = itertools.count(1)

    async def ask(host: str, port: int, verdict: Any) -> bool:
        call = SimpleNamespace(id=f"net-{next(numbers)}", name="net", input={"host": host, "port": port})
        session.record(ApprovalRequested(call_id=call.id, tool="net", input=call.input,
                                         rule=verdict.rule, source=verdict.source, always=[f"net({host}:{port})"]))
        try:
            answer, by = await session.ask("main", call, None)
        except AgentError:  # NeedsApproval: nobody can answer in a headless run
            answer, by = "deny", "mode"
        session.record(ApprovalResolved(call_id=call.id, decision=answer, by=by))
        if answer == "always":
            policy.rules.append(parse_rule(f"net({host}:{port})", "allow", origin="always allow"))
        return answer in ("allow", "always")

    return ask


class TrustRequired(BadRequest):
    """An interactive client asked to be told: the workspace's project files need trust."""

    code = "trust_required"


def permission_policy(paths: Paths, req: p.StartSession, workspace: Path) -> Any:
    """The approval rules of an agent in ``workspace`` (the session's workspace or a
    worker's worktree): the user's, those scoped to the session's workspace, and the
    project's once the session's workspace is trusted (DESIGN §11). "Always allow" is
    saved to the user's config for the session's workspace.

    Raises:
        TrustRequired: ``req.ask_trust``, not ``req.trust``, and the project files need
            trust (the message lists them).
        BadRequest: a config file or rule is malformed (the message names the file).
    """
    from musec.agents.config import (
        ConfigError,
        add_workspace_rules,
        load_project_rules,
        load_user_config,
    )
    from musec.agents.permissions import Policy
    from musec.agents.trust import check_trust

    session_workspace = Path(req.workspace).resolve()
    try:
        user = load_user_config(paths.config)
        trust = check_trust(session_workspace, paths.state, trust_now=req.trust,
                            trusted_by_config=user.trusts(session_workspace))
        if trust.needs_trust and req.ask_trust:
            raise TrustRequired(trust.prompt())
        rules = user.rules_for(session_workspace)
        if trust.trusted:
            rules += load_project_rules(session_workspace)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from exc
    except OSError as exc:
        raise BadRequest(f"the trust record under {paths.state} cannot be written ({exc.strerror or exc})") from exc

    def save(texts: list[str]) -> str:
        return str(add_workspace_rules(paths.config, session_workspace, texts))

    return Policy(rules=rules, workspace=workspace, save=save, trust=trust)


def _record_retry(session: Session, notice: Any, agent_id: str = "main") -> None:
    """Every retry of a model call is an event (visible, and its wait is explained)."""
    error = notice.error
    session.record(ModelRetry(agent=agent_id, attempt=notice.attempt, max_attempts=notice.max_attempts,
                              delay_s=round(notice.delay_s, 3), status=getattr(error, "status", None),
                              retry_after_s=getattr(error, "retry_after_s", None), error=str(error)[:300],
                              discarded_output_chars=notice.discarded_output_chars))


def git_base(workspace: Path) -> dict[str, Any]:
    """The workspace's repository and HEAD commit, or ``{}`` outside a repository."""
    try:
        import pygit2
    except ImportError:  # pragma: no cover
        return {}
    found = pygit2.discover_repository(str(workspace))
    if not found:
        return {}
    try:
        repo = pygit2.Repository(found)
        if repo.head_is_unborn:
            return {"git_dir": repo.path, "base_commit": None}
        return {"git_dir": repo.path, "base_commit": str(repo.head.target), "branch": repo.head.shorthand}
    except pygit2.GitError:
        return {}


def session_started_event(req: p.StartSession, agent: Agent, workspace: Path, session: Session | None = None) -> SessionStarted:
    """The ``session_started`` event of a new session (no credentials, ever)."""
    from .extensions import extension_fields

    return SessionStarted(
        session_id=agent.session_id,
        workspace=str(workspace.resolve()),
        title=req.title or req.task.strip().splitlines()[0][:80] if req.task.strip() else req.title,
        model=req.model,
        provider=agent.provider.name,
        approval=req.approval,
        sandbox=agent.ctx.sandbox.mode,
        max_turns=req.max_turns,
        interactive=req.interactive,
        tools=[t.spec.name for t in agent.tools.values()],
        background=list(req.agents),
        agents_model=req.agents_model,
        agents_budget_usd=req.agents_budget_usd,
        blackboard=req.blackboard,
        kernel_spec=req.kernel_spec if req.kernel_spec else UNSET,
        max_wall_s=req.max_wall_s if req.max_wall_s or req.kernel_spec else UNSET,
        system_prompt=agent.system_prompt,
        musec_version=musec_version(),
        pid=os.getpid(),
        git=git_base(workspace),
        trust={**agent.policy.trust.fields(), "note": agent.policy.trust.note()} if agent.policy.trust else {"state": "none"},
        rules=[{"rule": r.text, "action": r.action, "source": r.source} for r in agent.policy.rules],
        extensions=extension_fields(session).get("extensions", UNSET) if session is not None else UNSET,
    )
