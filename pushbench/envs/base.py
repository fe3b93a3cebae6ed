"""Shared base of every PushBench environment: parsing, budget, termination and the ledger.

Contract common to all families (each family's docstring adds its tools):

* An action is one JSON tool call, ``{"tool": NAME, ...arguments}``, as text (or UTF-8 bytes, or
  the equivalent dict). :mod:`.actions` turns any input into a plain call or a refusal; every
  call costs one step of budget, valid or not. An invalid call changes nothing else and returns
  ``{"tool": ..., "ok": false, "error": MESSAGE, "error_type": CODE}`` with a code from
  :data:`.actions.ERROR_TYPES`. Every step, refused or not, is one ledger entry, so
  ``steps_used == len(calls)`` in every record (a tool that raises, i.e. a harness bug, is
  recorded as ``internal`` before the exception propagates).
* Every observation is ASCII-escaped JSON text with ``tool``, ``ok`` and ``result`` or ``error``.
* ``final`` and ``ask_user`` terminate; running out of budget truncates. Calls after the end
  return an ``episode_over`` error and change nothing (not even the step count): the one
  documented exception to "every call costs a step".
* ``step`` before ``reset`` or after ``close`` raises ``RuntimeError`` (a harness error, not an
  agent's); ``reset`` after ``close`` starts a new episode.
* ``budget`` (an override of the task's) must be an ``int`` in ``1..MAX_BUDGET``; anything else
  raises :class:`BudgetError` (a ``ValueError``) when the environment is made.
* ``info["qgp"]`` after every reset and step holds verifier-visible counts only.
* Every call is appended to the ledger; :meth:`episode_record` returns the schema-versioned
  record and the metric summary computed from it (:mod:`pushbench.metrics`).

Size: about 420 lines, the one contract every family shares (parsing, budget, termination,
ledger, record); the call decoding lives in :mod:`.actions`, the spaces in :mod:`.spaces`.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, ClassVar, cast

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .. import metrics
from ..errors import NotResetError
from ..tasks import TaskSpec, get_task
from . import actions
from .actions import _CONTROL, ActionError  # ActionError: re-exported for the families
from .spaces import MAX_OBSERVATION_CHARS, ToolCallSpace, observation_space

RECORD_SCHEMA_VERSION = 1
# A tool result may carry this key: its dict is merged into the call's ledger entry (e.g.
# ``{"check": {"unit": id, "passed": bool}}``) and is never shown to the agent.
LEDGER_EXTRA = "_ledger"
_OBS_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


MAX_BUDGET = 1_000_000


class BudgetError(ValueError):
    """A step budget that is not a whole number of steps in ``1..MAX_BUDGET``."""


def check_budget(budget: Any) -> int:
    """``budget`` if it is an ``int`` (not a bool) in ``1..MAX_BUDGET``, else :class:`BudgetError`.

    A budget of 0 would still judge the first call; strings, floats and bools are refused
    rather than coerced.
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise BudgetError(
            f"budget must be a whole number of steps, not {type(budget).__name__} {budget!r:.40}"
        )
    if not 1 <= budget <= MAX_BUDGET:
        raise BudgetError(f"budget must be between 1 and {MAX_BUDGET} steps, got {budget}")
    return int(budget)


class ToolArgs(BaseModel):
    """Base of tool argument models: strict types, no unknown arguments."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StatusArgs(ToolArgs):
    pass


MAX_REPORTED_COUNT = 10**9  # the largest count a ``final`` may report


class FinalArgs(ToolArgs):
    reported_count: int = Field(
        ge=0,
        le=MAX_REPORTED_COUNT,
        description="how many valid items you believe the verifier has accepted",
    )
    message: str = Field(default="", max_length=4000, description="a short closing message")


class AskUserArgs(ToolArgs):
    message: str = Field(max_length=4000, description="your question or reason for stopping")


def _describe_validation(tool: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"]) or "arguments"
        parts.append(f"{loc}: {e['msg']}")
    return f"{tool}: bad arguments ({'; '.join(parts)})"


class QGPEnv(gym.Env):
    """Base environment (abstract); subclasses set ``family`` and ``TOOLS`` and implement tools."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # gym.Env's type
    family: ClassVar[str] = ""
    # name -> (argument model, description); families extend this with their own tools.
    TOOLS: ClassVar[dict[str, tuple[type[ToolArgs], str]]] = {
        "status": (
            StatusArgs,
            "Show verified progress: accepted count, target, steps used and "
            "left, submissions so far (counts only).",
        ),
        "final": (
            FinalArgs,
            "End the episode, reporting how many items you believe were "
            "accepted. Success is judged by the verifier, not by this report.",
        ),
        "ask_user": (AskUserArgs, "End the episode by handing control back to the user."),
    }
    TERMINAL_TOOLS: ClassVar[frozenset[str]] = frozenset({"final", "ask_user"})

    def __init__(
        self, task_id: str, render_mode: str | None = None, budget: int | None = None
    ) -> None:
        spec = get_task(task_id)
        if budget is not None:
            spec = spec.model_copy(update={"budget": check_budget(budget)})
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.task: TaskSpec = spec
        self.render_mode = render_mode
        self.observation_space = observation_space()
        self.action_space = ToolCallSpace(self._sample_action)
        self._adapters = {name: TypeAdapter(model) for name, (model, _) in self.TOOLS.items()}
        self._started = self._closed = False
        self._last_obs = ""

    # ----- subclass hooks ---------------------------------------------------------------
    def _setup_episode(self, instance: str, options: dict) -> dict:
        """Prepare the instance; return the reset result (objective etc.)."""
        raise NotImplementedError

    def _sample_action(self, rng) -> dict:
        raise NotImplementedError

    def _valid_count(self) -> int:
        raise NotImplementedError

    def _sample_common(self, tool: str, rng) -> dict:
        """A random well-formed call of one of the base tools (status, final, ask_user)."""
        if tool == "final":
            return {
                "tool": tool,
                "reported_count": int(rng.integers(0, self.task.target + 1)),
                "message": "done",
            }
        if tool == "ask_user":
            return {"tool": tool, "message": "Should I continue?"}
        return {"tool": "status"}

    def _extra_qgp(self) -> dict:
        return {}

    # ----- the Gymnasium API ------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        instance = self._choose_instance(options)
        self.instance = instance
        self.seed_used = seed
        self.steps_used = 0
        self.terminated_by: str | None = None
        self.reported_count: int | None = None
        self.final_message: str | None = None
        self.counts = {"submitted": 0, "duplicates": 0, "rejected": 0, "malformed": 0}
        self.ledger: list[dict] = []
        self.progress: list[int] = []
        result = self._setup_episode(instance, options)
        result.update(
            family=self.family,
            task_id=self.task.task_id,
            target=self.task.target,
            budget=self.task.budget,
            tools=self.tool_schemas(),
        )
        self._started, self._closed = True, False
        obs = self._encode({"tool": "reset", "ok": True, "result": result})
        return obs, self._info()

    def _choose_instance(self, options: dict) -> str:
        key = self._instance_option
        if options.get(key) is not None:
            inst = options[key]
            if inst not in self.task.instances:
                raise ValueError(
                    f"{key} {inst!r} is not part of {self.task.task_id}; "
                    f"choose from {list(self.task.instances)}"
                )
            return inst
        if len(self.task.instances) == 1:
            return self.task.instances[0]
        return self.task.instances[int(self.np_random.integers(len(self.task.instances)))]

    _instance_option: ClassVar[str] = "instance"

    @classmethod
    def reset_options(cls, instance: str | None) -> dict | None:
        """The ``reset(options=...)`` that pins ``instance`` (``None``: the seed chooses).

        Families name the option after their instances (``instance``, ``backlog``,
        ``snapshot``); callers that only know an instance id use this."""
        return {cls._instance_option: instance} if instance else None

    def step(self, action: Any):
        return self._step(action, None)

    def step_decoded(self, call: dict):
        """``step(call)`` for a ``call`` that :func:`.actions.decode` returned (and nothing
        changed since): the same result, without decoding the call a second time.

        For the controller wrapper, which decodes each proposed call once before its
        components see it. ``call`` is only read; the caller may keep it."""
        return self._step(call, call)

    def _step(self, action: Any, call: dict | None):
        """:meth:`step`; ``call``: ``action`` already decoded (``None``: decode it here)."""
        if self._closed:
            raise NotResetError("the environment was closed; call reset() to start a new episode")
        if not self._started:
            raise NotResetError("call reset() before step()")
        if self.terminated_by is not None:
            obs = {
                "tool": None,
                "ok": False,
                "error_type": "episode_over",
                "error": f"the episode is over (ended by {self.terminated_by}); call reset()",
            }
            return (
                self._encode(obs),
                0.0,
                self.terminated_by != "budget",
                self.terminated_by == "budget",
                self._info(),
            )
        self.steps_used += 1
        entry: dict[str, Any] = {"step": self.steps_used}
        reward = 0
        try:
            tool, args = self._parse(action) if call is None else self._parse_call(call)
            entry.update(tool=tool, args=self._ledger_args(tool, args))
            unclipped = self._ledger_unclipped(tool, args)
            if unclipped:
                entry["unclipped"] = unclipped
            before = self._valid_count()
            result = getattr(self, f"_tool_{tool}")(args)
            entry.update(result.pop(LEDGER_EXTRA, None) or {})
            reward = self._valid_count() - before
            obs = {"tool": tool, "ok": True, "result": result}
            entry["ok"] = True
            if "verdicts" in result:
                entry["verdicts"] = [[v["id"], v["verdict"]] for v in result["verdicts"]]
        except ActionError as e:
            obs = {"tool": e.tool, "ok": False, "error_type": e.error_type, "error": e.message}
            entry.update(tool=e.tool, ok=False, error_type=e.error_type)
            entry.setdefault("args", None)
        except BaseException:
            # A harness bug (or an interrupt): the step stays recorded, so the record keeps
            # steps_used == len(calls); the exception still propagates.
            entry.update(ok=False, error_type="internal")
            entry.setdefault("tool", None)
            entry.setdefault("args", None)
            self._append(entry, reward)
            raise
        self._append(entry, reward)
        terminated = truncated = False
        if entry["ok"] and entry["tool"] in self.TERMINAL_TOOLS:
            self.terminated_by = entry["tool"]
            terminated = True
        elif self.steps_used >= self.task.budget:
            self.terminated_by = "budget"
            truncated = True
        text = self._encode(obs)
        return text, float(reward), terminated, truncated, self._info()

    def _append(self, entry: dict, reward: int) -> None:
        entry["reward"] = reward
        entry["valid_count"] = self._valid_count()
        self.ledger.append(entry)
        self.progress.append(entry["valid_count"])

    def close(self) -> None:
        """End the episode's resources; ``step`` then raises until the next ``reset``."""
        self._closed = True
        super().close()

    def render(self):
        if self.render_mode == "ansi" and not self._started:
            return f"[{self.task.task_id} | not reset yet]\n"
        if self.render_mode == "ansi":
            q = self._qgp()
            head = (
                f"[{self.task.task_id} | {q['valid_count']}/{q['target']} verified | "
                f"step {q['steps_used']}/{q['budget']}]"
            )
            return f"{head}\n{json.dumps(json.loads(self._last_obs), indent=2)}\n"
        return None

    # ----- parsing ----------------------------------------------------------------------
    def _parse(self, action: Any) -> tuple[str, Any]:
        """``(tool, validated arguments)`` of ``action``, via the shared :mod:`.actions` path."""
        try:
            call = actions.decode(action)
        except ActionError as e:
            if e.tool is None and isinstance(action, dict):  # name the tool when it is plain
                tool = dict.get(action, "tool")
                e.tool = tool if type(tool) is str and tool in self.TOOLS else None
            raise
        return self._parse_call(call)

    def _parse_call(self, call: dict) -> tuple[str, Any]:
        """``(tool, validated arguments)`` of a call :func:`.actions.decode` returned."""
        tool, args = actions.split_call(call, self.TOOLS)
        try:
            parsed = self._adapters[tool].validate_python(args)
        except ValidationError as e:
            raise ActionError("bad_arguments", _describe_validation(tool, e), tool) from None
        self._check_strings(tool, parsed)
        return tool, parsed

    def _check_strings(self, tool: str, args: ToolArgs) -> None:
        """Reject control characters in free-text arguments (newlines and tabs allowed)."""
        for name in ("query", "message"):
            v = vars(args).get(name)  # not getattr: a missing field is slow in pydantic
            if isinstance(v, str) and _CONTROL.search(v):
                raise ActionError(
                    "control_chars", f"{tool}: argument {name!r} contains control characters", tool
                )

    def _ledger_args(self, tool: str, args: ToolArgs) -> dict:
        return args.model_dump()

    def _ledger_unclipped(self, tool: str, args: ToolArgs) -> dict | None:
        """Arguments :meth:`_ledger_args` shortened, in full (``None``: nothing shortened)."""
        return None

    def _submission_ids(self, call: dict) -> list[str]:
        """The well-formed ids a ``submit`` call object names, in order (family hook)."""
        return []

    def proposal(self, action: Any) -> dict:
        """What ``action`` names, judged without executing it (pure; the state is untouched).

        ``{"tool": name or None, "valid": bool}`` (``valid``: the call would run as it is),
        plus, when the action is a JSON object within the size limit: for a ``submit``,
        ``ids``, the well-formed ids it names in order (also when the call as a whole is
        invalid, e.g. more than the per-call limit: they are what the policy tried to submit);
        for a ``final`` with an integer ``reported_count`` in ``[0, MAX_REPORTED_COUNT]`` (the
        range the tool accepts; a count outside it is no claim), that count. A controller
        records this for the calls it changed, so metrics can judge what the policy itself
        proposed (``metrics.proposed_duplicate_rate``, ``metrics.gated_over_claim``).
        """
        try:
            tool, _ = self._parse(action)
            out: dict[str, Any] = {"tool": tool, "valid": True}
        except ActionError as e:
            out = {"tool": e.tool, "valid": False}
        try:
            call: dict | None = actions.decode(action)
        except ActionError:
            call = None
        return self._proposal_of(out, call)

    def proposal_decoded(self, call: dict) -> dict:
        """``proposal(call)`` for a ``call`` that :func:`.actions.decode` returned: the same
        result without decoding it again (``call`` is only read)."""
        try:
            tool, _ = self._parse_call(call)
            out: dict[str, Any] = {"tool": tool, "valid": True}
        except ActionError as e:
            out = {"tool": e.tool, "valid": False}
        return self._proposal_of(out, call)

    def _proposal_of(self, out: dict[str, Any], call: dict | None) -> dict:
        """:meth:`proposal`'s ``out`` completed with the facts of the decoded ``call``."""
        if call is not None and call.get("tool") == "submit":
            out["ids"] = self._submission_ids(call)
        elif call is not None and call.get("tool") == "final":
            count = call.get("reported_count")
            if (
                isinstance(count, int)
                and not isinstance(count, bool)
                and 0 <= count <= MAX_REPORTED_COUNT
            ):
                out["reported_count"] = count
        return out

    # ----- common tools -----------------------------------------------------------------
    def _tool_status(self, args: StatusArgs) -> dict:
        q = self._qgp()
        return {
            "valid_count": q["valid_count"],
            "target": q["target"],
            "steps_used": q["steps_used"],
            "steps_left": q["budget"] - q["steps_used"],
            "submitted": q["submitted"],
            "duplicates": q["duplicates"],
            "rejected": q["rejected"],
            "malformed": q["malformed"],
        }

    def _tool_final(self, args: FinalArgs) -> dict:
        self.reported_count = args.reported_count
        self.final_message = args.message
        return {
            "ended": True,
            "reported_count": args.reported_count,
            "note": "episode ended; the verifier's count decides success",
        }

    def _tool_ask_user(self, args: AskUserArgs) -> dict:
        self.final_message = args.message
        return {"ended": True, "note": "episode ended by ask_user"}

    # ----- state views ------------------------------------------------------------------
    def tool_schemas(self) -> list[dict]:
        """OpenAI-style function tool definitions (usable directly as ``tools=``)."""
        # A class is hashable; mypy matches type[QGPEnv] against Hashable by the instance's
        # __hash__ signature and refuses it (a false positive).
        return copy.deepcopy(_tool_schemas(type(self)))  # type: ignore[arg-type]

    def _qgp(self) -> dict:
        vc = self._valid_count()
        q = {
            "valid_count": vc,
            "target": self.task.target,
            "steps_used": self.steps_used,
            "budget": self.task.budget,
            **self.counts,
            "success": vc >= self.task.target,
            "terminated_by": self.terminated_by,
        }
        q.update(self._extra_qgp())
        return q

    def _info(self) -> dict:
        return {"qgp": self._qgp()}

    def _encode(self, obs: dict) -> str:
        text = _OBS_ENCODER.encode(obs)
        if len(text) > MAX_OBSERVATION_CHARS:  # a harness bug, not an agent error
            raise RuntimeError(f"observation of {len(text)} chars exceeds the space")
        self._last_obs = text
        return text

    def episode_record(self) -> dict:
        """JSON-serialisable, schema-versioned record of every call plus the metric summary.

        Before the first ``reset()`` there is no episode: :class:`NotResetError` says so (a
        vector env's ``call("episode_record")`` raises it in the caller's process)."""
        if not hasattr(self, "ledger"):
            raise NotResetError("call reset() before episode_record(): there is no episode yet")
        record = {
            "schema_version": RECORD_SCHEMA_VERSION,
            "family": self.family,
            "task_id": self.task.task_id,
            "instance": self.instance,
            "target": self.task.target,
            "budget": self.task.budget,
            "seed": self.seed_used,
            "steps_used": self.steps_used,
            "terminated_by": self.terminated_by,
            "valid_count": self._valid_count(),
            "success": self._valid_count() >= self.task.target,
            "reported_count": self.reported_count,
            "final_message": self.final_message,
            "calls": [dict(e) for e in self.ledger],
            "progress": list(self.progress),
        }
        record["metrics"] = metrics.episode_metrics(record)
        return record


@functools.cache
def _tool_schemas(cls: type[QGPEnv]) -> list[dict]:
    # Building pydantic JSON schemas is slow; they depend only on the class's TOOLS.
    out = []
    for name, (model, desc) in cls.TOOLS.items():
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
            _declare_long_bound(prop)
        schema.setdefault("properties", {})
        schema["additionalProperties"] = False
        out.append(
            {
                "type": "function",
                "function": {"name": name, "description": desc, "parameters": schema},
            }
        )
    return out


# Local model servers turn a tool schema into a sampling grammar; llama.cpp expands
# ``maxLength: n`` into n nested optional repetitions and refuses grammars much past 1,000
# (llama-cpp-python then crashes the whole server). Longer bounds therefore go into the
# description; the environment enforces every bound either way.
GRAMMAR_SAFE_MAX_LENGTH = 1000


def _declare_long_bound(prop: dict) -> None:
    n = prop.get("maxLength")
    if isinstance(n, int) and n > GRAMMAR_SAFE_MAX_LENGTH:
        del prop["maxLength"]
        note = f"at most {n:,} characters; longer values are rejected"
        desc = prop.get("description")
        prop["description"] = f"{desc} ({note})" if desc else note


def base_env(env: gym.Env) -> QGPEnv:
    """The :class:`QGPEnv` under ``env``'s wrappers, typed as such.

    Every environment :func:`pushbench.make` builds is one; gymnasium types ``unwrapped`` as a
    plain ``Env``, so callers that use the QGP API (``reset_options``, ``tool_schemas``, ...)
    reach it through here. No check at run time: behaviour is that of ``env.unwrapped``.
    """
    return cast(QGPEnv, env.unwrapped)
