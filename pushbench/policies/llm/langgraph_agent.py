"""The LangGraph backend (``llm-langgraph``): the same agent loop as a ``StateGraph``.

Graph: ``START -> turn -> turn | END`` (the node routes with a ``Command``), one node and one
superstep per agent turn (:mod:`.graph`): the *turn* node trims the context and calls the model,
then executes the reply's calls (environment actions step the wrapped environment, memory calls
use the graph's long-term store); the graph routes to END once the environment says the episode
is over. Prompts, tools, the context budget, the handling of invalid output and the records come
from :class:`~.core.AgentCore`, exactly as in the native loop, so the two backends differ only
in orchestration.

Because the graph owns the loop, this policy implements ``drive(env)`` / ``adrive(env)`` (the
episode drivers call them instead of ``act``).

* **Recursion limit**: set explicitly to ``2 * max_model_turns + 2`` supersteps
  (``max_model_turns = budget * (1 + k) + k`` with ``k`` the memory-turn allowance, 0 without
  memory). A turn takes one superstep (it took two, model and tools, before issue 31; the limit
  and the ``recursion_limit`` record field were kept so records stay comparable), so it can
  only trip if step accounting is broken; it then ends the episode as a ``recursion_limit``
  policy error.
* **Checkpoints**: a SQLite checkpointer (:class:`.checkpoints.EpisodeSaver`, LangGraph's
  ``SqliteSaver`` opened lazily) keeps the state under a thread id derived from the task,
  instance, seed, controller, policy name and parameters, in a SQLite file of its own
  (``<checkpoint_dir>/<thread>.sqlite``: concurrent episodes never contend for one database's
  locks). By default (``durability="exit"``, ``checkpoint_every=10``) the episode runs as
  segments of ``checkpoint_every`` environment steps, each one graph run **without a
  checkpointer** (so no per-superstep checkpoint bookkeeping and no background thread handing a
  checkpoint to the saver): a segment ends at END with ``pause`` set, the policy writes the
  state through LangGraph's ``update_state`` (as the turn node's writes) into the thread, and
  the next run starts from that state. When a run raises (a model or environment error, a
  recursion limit, an interrupt), the policy writes the state as of the last finished turn
  before re-raising. So an error in a model call loses nothing (an error raised by the
  environment or the store after a turn's model call makes that one call again on resume), a
  killed process loses at most the steps since the last segment, and a finished episode
  writes nothing (its thread would be deleted).
  ``durability="sync"`` / ``"async"`` run with the checkpointer attached and LangGraph writes
  after every superstep instead (``checkpoint_every`` is then unused).
  **Resume guarantee**: re-running an interrupted episode (same arguments, same
  ``checkpoint_dir``; the thread id includes :data:`STATE_LAYOUT`, so only a checkpoint of this
  state layout is resumed) replays the environment actions stored in the state into the fresh
  environment (checking each observation's digest), then continues from the checkpoint (a
  LangGraph run interrupted mid-way under ``sync`` / ``async`` continues that run): model
  calls before it are not repeated; those after it are made again (with a deterministic model,
  the same calls, so the same record; ``tests/test_langgraph_checkpoints.py`` kills a process
  mid-episode and compares). The thread's file is deleted when the episode ends unless
  ``keep_checkpoints`` is true. The state holds the trimmed history only, so a checkpoint
  stays about ``context_tokens`` in size however long the episode. The database runs in WAL
  mode with ``synchronous=NORMAL``: a killed or interrupted process loses nothing committed;
  only an operating-system crash may lose the last writes.
* **Nothing streamed**: runs use ``stream(..., stream_mode=[])``; the state after a run is the
  last turn's writes, kept by the policy (both channels are rewritten whole by every turn).
* **One compiled graph per class**: the graph is compiled once per policy class and mode and
  copied per episode with its checkpointer and store; nodes reach the policy through
  LangGraph's run context (``invoke(..., context=policy)``).

Extra parameters: ``checkpoint_dir`` (default ``$PUSHBENCH_HOME/langgraph/checkpoints``),
``resume`` (default true; false discards an existing checkpoint), ``keep_checkpoints``,
``durability`` (``exit`` (default), ``sync``, ``async``: see above) and
``checkpoint_every`` (environment steps per segment under ``exit``, default 10; 0: one
segment, so only errors write). ``experiments/bench_llm_harness.py`` measures the
harness per step of each.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..base import Policy
from ..errors import ContextOverflow, PolicyError
from .client import ChatClient, Usage
from .config import LangGraphConfig, LLMConfig
from .core import AgentCore, Memory, Stats, digest
from .graph import AgentState, Episode, build_graph

if TYPE_CHECKING:  # LangGraph injects ``runtime`` by parameter name
    import gymnasium as gym
    from langgraph.runtime import Runtime

_GRAPH_PARAMS = ("checkpoint_dir", "resume", "keep_checkpoints", "durability", "checkpoint_every")
_COMPILED: dict[tuple[type, bool], Any] = {}  # (policy class, async) -> compiled graph
# The layout of the graph's state; part of the thread id, so a checkpoint written by another
# layout (the two-node graph before issue 31's change was 1) is never read as this one.
STATE_LAYOUT = 2


def controller_name(env) -> str:
    """Name of the controller wrapping ``env`` (``"none"`` when unwrapped)."""
    e = env
    while e is not None:
        if hasattr(e, "component_names"):
            return str(getattr(e, "name", "?"))
        e = getattr(e, "env", None)
    return "none"


def default_checkpoint_dir() -> Path:
    from ...paths import home

    return home() / "langgraph" / "checkpoints"


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


class LangGraphPolicy(Policy):
    """The LLM agent loop as a LangGraph ``StateGraph`` with a SQLite checkpointer."""

    name: ClassVar[str] = "llm-langgraph"
    simulated = False
    backend: ClassVar[str] = "langgraph"
    Params = LangGraphConfig

    def __init__(self, seed: int | None = None, **params: Any) -> None:
        super().__init__(seed=seed, **params)
        llm_params = {k: v for k, v in params.items() if k not in _GRAPH_PARAMS}
        self.cfg = LLMConfig.model_validate(llm_params)
        self.checkpoint_dir = Path(params.get("checkpoint_dir") or default_checkpoint_dir())
        self.resume = bool(params.get("resume", True))
        self.keep_checkpoints = bool(params.get("keep_checkpoints", False))
        self.durability = params.get("durability", "exit")
        if self.durability not in ("sync", "async", "exit"):
            raise ValueError(f"durability must be sync, async or exit, not {self.durability!r}")
        every = params.get("checkpoint_every", 10)
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"checkpoint_every must be a whole number >= 0, not {every!r}")
        self.checkpoint_every = every if self.durability == "exit" else 0
        self._since_checkpoint = 0
        self._unsaved = 0  # turns since the last checkpoint the policy wrote (see _save)
        self._save_config: dict = {}
        self._done = False
        self.client = ChatClient(self.cfg, seed)
        self.memory: Memory | None = None
        self._env: gym.Env | None = None
        self.store = None
        self._window: int | None = None
        self._values: dict = {}  # the graph's state as of the last turn (see _start_input)

    @property
    def _live_env(self) -> gym.Env:
        """The environment drive() / adrive() is running."""
        if self._env is None:
            raise PolicyError("config", "the graph ran outside drive()")
        return self._env

    # ----- hooks for the memory baseline --------------------------------------------------
    def make_memory(self) -> Memory | None:
        return None

    def make_store(self):
        """The graph's long-term store (``None``: no store)."""
        return None

    # ----- the Policy API -----------------------------------------------------------------
    def reset(self, first_observation: str) -> None:
        self.memory = self.make_memory()
        self.store = self.make_store()
        if self.memory is not None:
            self.memory.bind(self.store)
        self.core = AgentCore(self.cfg, self.memory)
        self.initial_messages = self.core.start(first_observation)
        self.usage = Usage()
        self.stats = Stats(self.backend)
        self.resumed_steps = 0
        self.transcript: list[dict] = []  # filled from the graph's final state

    def act(self, observation: str):
        raise TypeError(f"{self.name} owns its loop: episode drivers call drive(env)/adrive(env)")

    def recursion_limit(self) -> int:
        return 2 * self.core.max_model_turns() + 2

    def thread_id(self, env) -> str:
        u = env.unwrapped
        raw = json.dumps(
            [
                u.task.task_id,
                u.instance,
                u.seed_used,
                controller_name(env),
                self.name,
                self.seed,
                self.params,
                STATE_LAYOUT,
            ],
            sort_keys=True,
            default=str,
        )
        return "pushbench-" + hashlib.sha256(raw.encode()).hexdigest()[:24]

    def _db_path(self, thread: str) -> Path:
        """This thread's own checkpoint file; ``resume: false`` discards an existing one. (The
        directory is made when the file is first written, :class:`.checkpoints.EpisodeSaver`.)"""
        db = self.checkpoint_dir / f"{thread}.sqlite"
        if not self.resume:
            _remove_db(db)
        return db

    def _initial_state(self) -> dict:
        return {
            "messages": self.initial_messages,
            "episode": {
                "env_actions": [],
                "obs_sha": [],
                "transcript": [],
                "usage": Usage().to_state(),
                "stats": Stats(self.backend).to_state(),
                "memory": self.memory.to_state() if self.memory else None,
                "free_streak": 0,
                "turns": 0,
                "done": False,
                "pause": False,
            },
        }

    def _replay(self, values: dict) -> None:
        """Bring the fresh environment to the checkpoint by re-sending its actions."""
        ep = values["episode"]
        for i, (action, sha) in enumerate(zip(ep["env_actions"], ep["obs_sha"], strict=True)):
            obs = self._live_env.step(_restored(action))[0]
            if digest(obs) != sha:
                raise PolicyError(
                    "resume_mismatch",
                    f"replaying step {i + 1} of the checkpoint "
                    "gave a different observation (the task, snapshot or "
                    "controller changed); rerun with resume: false",
                )
        self.resumed_steps = len(ep["env_actions"])
        if self.memory is not None and ep.get("memory"):
            self.memory.load_state(ep["memory"])

    def _start_input(self, snapshot) -> dict | None:
        """The first run's input; ``None``: continue LangGraph's interrupted run (only under
        ``sync`` / ``async``, whose checkpoints LangGraph writes mid-run).

        ``snapshot`` is the thread's checkpoint (``None``: none). Sets ``self._values``, the
        graph's state, which each turn then replaces with its writes (:meth:`_after_model`):
        both channels are rewritten whole by every turn, so after a run ``self._values`` is the
        state LangGraph holds, without streaming it out of the graph (``stream_mode=[]``).
        """
        if snapshot is None or not snapshot.values:
            self._values = self._initial_state()
            return self._values
        self._replay(snapshot.values)
        self._values = snapshot.values
        if snapshot.next and self.durability != "exit":
            return None
        return self._segment_input(self._values)

    def _segment_input(self, values: dict) -> dict:
        """A run's input that continues the episode from ``values`` (the whole state)."""
        self._values = {"messages": values["messages"], "episode": {**values["episode"]}}
        self._values["episode"]["pause"] = False
        return self._values

    def _save(self, graph) -> None:
        """Write ``self._values`` as the thread's checkpoint (``exit`` only: at a segment's end
        and when a run raises), through LangGraph's ``update_state`` (so as the turn node's
        writes) with the saver's graph ``graph``. Nothing is written if no turn ran since the
        last checkpoint; the saver skips it once the episode has ended."""
        if self._unsaved:
            graph.update_state(self._save_config, self._values, as_node="turn")
            self._unsaved = 0

    async def _asave(self, graph) -> None:
        if self._unsaved:
            await graph.aupdate_state(self._save_config, self._values, as_node="turn")
            self._unsaved = 0

    def _finish(self, values: dict) -> None:
        ep = values["episode"]
        self.usage = Usage.from_state(ep["usage"])
        self.stats = Stats.from_state(ep["stats"])
        self.transcript = list(ep["transcript"])
        if self.memory is not None and ep.get("memory"):
            self.memory.load_state(ep["memory"])

    def drive(self, env) -> None:
        """Run the whole episode on ``env`` (already reset) with the blocking graph."""
        from langgraph.errors import GraphRecursionError

        self._env = env
        self._window = self.client.window()
        thread = self.thread_id(env)
        db = self._db_path(thread)
        saver = self._saver(db, thread)
        finished = False
        try:
            run, kw = self._runner(saver, is_async=False)
            # No file, no checkpoint: skip LangGraph's state read (a fresh episode's usual case).
            snapshot = None if saver.absent() else self._graph(saver).get_state(self._save_config)
            start = self._start_input(snapshot)
            try:
                while not self._values["episode"]["done"]:  # one segment per pass
                    self._since_checkpoint = 0
                    try:  # nothing streamed: the state after the run is self._values
                        for _ in run.stream(start, context=self, stream_mode=[], **kw):
                            pass
                    except GraphRecursionError as e:
                        raise PolicyError("recursion_limit", str(e)) from e
                    if not self._values["episode"]["pause"]:
                        break
                    self._save(self._graph(saver))
                    start = self._segment_input(self._values)
            except BaseException:
                if self.durability == "exit":  # keep the finished turns (see the module doc)
                    self._save(self._graph(saver))
                raise
            self._finish(self._values)
            finished = True
        finally:
            saver.close()
            self.client.close()
            # A saver that never opened its file left none (an existing one is read first).
            if finished and not self.keep_checkpoints and saver.opened:
                _remove_db(db)

    async def adrive(self, env) -> None:
        """Run the whole episode on ``env`` without blocking the event loop (as :meth:`drive`)."""
        from langgraph.errors import GraphRecursionError

        self._env = env
        self._window = await self.client.awindow()
        thread = self.thread_id(env)
        db = self._db_path(thread)
        saver = self._saver(db, thread)
        finished = False
        try:
            run, kw = self._runner(saver, is_async=True)
            snapshot = (
                None
                if saver.absent()
                else await self._graph(saver, True).aget_state(self._save_config)
            )
            start = self._start_input(snapshot)
            try:
                while not self._values["episode"]["done"]:  # one segment per pass
                    self._since_checkpoint = 0
                    try:
                        async for _ in run.astream(start, context=self, stream_mode=[], **kw):
                            pass
                    except GraphRecursionError as e:
                        raise PolicyError("recursion_limit", str(e)) from e
                    if not self._values["episode"]["pause"]:
                        break
                    await self._asave(self._graph(saver, True))
                    start = self._segment_input(self._values)
            except BaseException:
                if self.durability == "exit":
                    await self._asave(self._graph(saver, True))
                raise
            self._finish(self._values)
            finished = True
        finally:
            saver.close()
            await self.client.aclose()
            # A saver that never opened its file left none (an existing one is read first).
            if finished and not self.keep_checkpoints and saver.opened:
                _remove_db(db)

    # ----- the graph ----------------------------------------------------------------------
    def _saver(self, db: Path, thread: str):
        from .checkpoints import EpisodeSaver

        self._done = False
        self._unsaved = 0
        self._save_config = {"configurable": {"thread_id": thread}}
        # A finished episode's thread is deleted: its last checkpoint is not worth writing.
        return EpisodeSaver(db, discard=lambda: self._done and not self.keep_checkpoints)

    def _compiled(self, is_async: bool):
        """This class's compiled graph (built once per class and mode)."""
        key = (type(self), is_async)
        if key not in _COMPILED:
            _COMPILED[key] = build_graph(is_async)
        return _COMPILED[key]

    def _graph(self, saver, is_async: bool = False):
        """The compiled graph with this episode's saver and store (state reads and writes)."""
        return self._compiled(is_async).copy(update={"checkpointer": saver, "store": self.store})

    def _runner(self, saver, is_async: bool) -> tuple[Any, dict]:
        """The graph the episode's runs use and their keyword arguments.

        ``exit``: no checkpointer (the policy writes its checkpoints, :meth:`_save`), so a run
        pays none of LangGraph's per-superstep checkpoint bookkeeping nor, at its exit, the
        background thread that hands a checkpoint to the saver. ``sync`` / ``async``: the saver,
        written by LangGraph after every superstep.
        """
        limit = {"recursion_limit": self.recursion_limit()}
        if self.durability == "exit":
            graph = self._compiled(is_async)
            if self.store is not None:
                graph = graph.copy(update={"store": self.store})
            return graph, {"config": limit}
        config = {**self._save_config, **limit}
        return self._graph(saver, is_async), {"config": config, "durability": self.durability}

    # One agent turn = one superstep: the model call, then its reply's calls (see graph.py).
    def _before_model(self, ep: Episode) -> tuple[Stats, Usage]:
        if ep["turns"] >= self.core.max_model_turns():  # unreachable by construction
            raise PolicyError("turn_limit", "model turn limit reached")
        stats, usage = Stats.from_state(ep["stats"]), Usage.from_state(ep["usage"])
        self.stats, self.usage = stats, usage  # live objects: an error record still has counts
        self.core.set_window(stats, self._window)
        return stats, usage

    # A context-length refusal trims the view to fit and retries once, as in the native loop.
    def _turn(self, state: AgentState, runtime: Runtime) -> dict:
        ep, history = state["episode"], state["messages"]
        stats, usage = self._before_model(ep)
        request, kept = self.core.view(history, stats)
        try:
            turn = self.client.complete(request, self.core.tools(), usage)
        except ContextOverflow as e:
            self.core.after_overflow(e, request, stats, ep["turns"] + 1)
            request, kept = self.core.view(history, stats)
            turn = self.client.complete(request, self.core.tools(), usage)
        return self._after_model(ep, kept, turn, stats, usage, runtime)

    async def _aturn(self, state: AgentState, runtime: Runtime) -> dict:
        ep, history = state["episode"], state["messages"]
        stats, usage = self._before_model(ep)
        request, kept = self.core.view(history, stats)
        try:
            turn = await self.client.acomplete(request, self.core.tools(), usage)
        except ContextOverflow as e:
            self.core.after_overflow(e, request, stats, ep["turns"] + 1)
            request, kept = self.core.view(history, stats)
            turn = await self.client.acomplete(request, self.core.tools(), usage)
        # The calls run inline, as the native asyncio loop steps its environment inline.
        return self._after_model(ep, kept, turn, stats, usage, runtime)

    def _after_model(
        self, ep: Episode, kept: list[dict], turn, stats: Stats, usage: Usage, runtime: Runtime
    ) -> dict:
        """Execute the reply's calls (environment steps, memory calls through the graph's
        store) and return the turn's writes: the new history and the whole new episode."""
        turn_no = ep["turns"] + 1
        messages = [*kept, turn.assistant_message()]
        events = [self.core.model_event(turn_no, turn)]
        if self.memory is not None and runtime.store is not None:
            self.memory.bind(runtime.store)
        items = self.core.interpret(messages[-1], ep["free_streak"], stats)
        steps_before = stats.env_actions
        actions, shas, done = [], [], False
        for item in items:
            if done:  # calls after the episode ended are not executed
                break
            if item.kind == "memory":
                messages.append(self.core.run_memory(item))
                events.append(self.core.answer_event(None, messages[-1]))
                continue
            obs, _, terminated, truncated, _ = self._live_env.step(item.action)
            stats.env_actions += 1
            actions.append(_storable(item.action))
            shas.append(digest(obs))
            messages.append(self.core.result_message(item, obs))
            done = bool(terminated or truncated)
            if not done:  # as in the native loop: only answers the model goes on to read
                events.append(self.core.answer_event(stats.env_actions, messages[-1]))
        self._done = done
        self._since_checkpoint += stats.env_actions - steps_before
        self._unsaved += 1
        pause = (
            not done
            and self.checkpoint_every > 0
            and self._since_checkpoint >= self.checkpoint_every
        )
        self._values = {
            "messages": messages,
            "episode": {
                "env_actions": [*ep["env_actions"], *actions],
                "obs_sha": [*ep["obs_sha"], *shas],
                "transcript": [*ep["transcript"], *events],
                "usage": usage.to_state(),
                "stats": stats.to_state(),
                "memory": self.memory.to_state() if self.memory else None,
                "free_streak": ep["free_streak"] + 1 if self.core.free_turn(items) else 0,
                "turns": turn_no,
                "done": done,
                "pause": pause,
            },
        }
        return self._values

    # ----- records ------------------------------------------------------------------------
    def episode_extras(self) -> dict:
        out = {
            "usage": self.usage.as_record(self.cfg),
            "llm": {
                **self.stats.to_state(),
                "model": self.cfg.model,
                "model_calls": self.usage.calls,
                "context_tokens": self.cfg.context_tokens,
                "recursion_limit": self.recursion_limit(),
                "resumed_steps": self.resumed_steps,
            },
            "transcript": list(getattr(self, "transcript", [])),
        }
        if self.memory is not None:
            out["memory"] = {
                **self.memory.summary(),
                "charged_to_env": self.stats.memory_calls_charged,
            }
        return out

    def describe(self) -> dict:
        d = super().describe()
        d["backend"] = self.backend
        return d


def _storable(action):
    """An action as the checkpoint keeps it: a dict call as its JSON text (``{"call": text}``).

    The checkpointer's msgpack cannot hold every value a call may carry (an integer beyond 64
    bits, for one); the text can, and :func:`_restored` gives back the same dict.
    """
    if isinstance(action, dict):
        return {"call": json.dumps(action, ensure_ascii=True)}
    return action


def _restored(action):
    if isinstance(action, dict) and set(action) == {"call"}:
        return json.loads(action["call"])
    return action
