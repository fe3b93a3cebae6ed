"""``aider``: Aider (the coding agent) as a SWE-lite policy, the paper's coding-agent baseline.

The harness owns the episode loop (``drive(env)``, like the LangGraph policies): every step it
charges is an environment call, so the record's calls are the whole evidence, replayed by
``evaluate``/``verify`` like any other record, and the numbers sit in the same tables as the
other agents' under the same budgets.

Episode, per controller (``progress.units`` in the observations marks UNITQGP's tracker):

* **standard**: ``list_units`` (every page), ``inspect`` of every unit (the issue texts), one
  Aider turn with the whole backlog, Aider's edits (below), ``submit`` of every unit, then
  ``final`` with the number of units the verifier accepted.
* **unitqgp** (the tracker present): after ``list_units``, the tracker's next ``failing`` or
  ``pending`` unit (at most ``max_turns_per_unit`` turns each) is ``inspect``ed and handed to
  Aider alone (with the last verifier output when it failed before), Aider's edits, then
  ``run_verifier`` and, if it passed, ``submit``; until no unit is left or the budget is spent;
  then ``final`` (a final the completion gate blocks below target is repeated, one step each,
  until the budget ends the episode).

**Step charge** (docs/aider.md): one step per environment call above, and per Aider turn
``max(model requests, edit calls)`` steps: Aider's file changes become ``edit_file`` calls (one
per changed region, :mod:`.edits`), and each model request beyond those is charged as one
``status`` call, so no model request is free. Files Aider created or deleted (``edit_file``
cannot express them) are undone in its copy and listed in the turn.

Aider works in its own copy of the episode workspace (in a private temporary folder), a turn is
one ``aider --message`` process (:mod:`.process`) with ``turn_timeout`` seconds, the episode
has ``episode_timeout`` seconds; a turn that times out, a crashed Aider (non-zero exit) or a
model server that does not start end the episode as ``backend_error`` (a
:class:`~pushbench.policies.errors.PolicyError`: ``terminated_by: "error"``, record kept).

``model_server: oracle-edit`` serves the SWE-lite reference fixes (an oracle: the policy is
marked ``simulated``/``oracle`` and its rows are never a result); ``base_url`` (+ ``model``,
``api_key_env``) points Aider at a real OpenAI-compatible endpoint. The record gets an ``aider``
block (version, edit format, endpoint, turns, requests, step charge) and a ``transcript``
(per turn: the message, Aider's LLM history of every request and answer, the edits).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ...baselines import installer as baselines
from ..base import NoParams, Policy, UnsupportedFamily, parse_observation
from ..errors import PolicyError
from . import edits as E
from . import process as P

MAX_HISTORY_CHARS = 400_000  # per turn kept in the transcript (the digest-free rest is cut)


class AiderParams(NoParams):
    model_server: Literal["oracle-edit"] | None = Field(
        None,
        description="serve this text-edit policy on loopback (oracle-edit: the "
        "reference fixes; an oracle, never a result)",
    )
    base_url: str | None = Field(
        None,
        max_length=2048,
        description="a real OpenAI-compatible endpoint (with /v1) instead of model_server",
    )
    model: str = Field("pushbench-policy", min_length=1, max_length=256)
    api_key_env: str | None = Field(
        None, max_length=128, description="variable holding the endpoint's key"
    )
    edit_format: Literal["diff", "whole"] = "diff"
    map_tokens: int = Field(0, ge=0, le=65536, description="Aider's repo-map size (0: none)")
    context: int = Field(
        32768, ge=1024, le=10**7, description="the model's context window (Aider's model metadata)"
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=10**6,
        description="completion tokens per request (sent by Aider; default: the endpoint's)",
    )
    turn_timeout: float = Field(600.0, gt=0, le=86400)
    episode_timeout: float = Field(7200.0, gt=0, le=10 * 86400)
    max_turns_per_unit: int = Field(2, ge=1, le=20)
    aider_bin: str | None = Field(
        None,
        max_length=4096,
        description="Aider program (default: "
        "the one `pushbench baselines install aider` installed)",
    )

    @model_validator(mode="after")
    def _one_endpoint(self):
        if (self.model_server is None) == (self.base_url is None):
            raise ValueError("give exactly one of model_server and base_url")
        return self


class _Over(Exception):
    """The episode ended (terminated or truncated) inside the harness."""


class AiderPolicy(Policy):
    name = "aider"
    Params = AiderParams

    def __init__(self, seed: int | None = None, **params) -> None:
        super().__init__(seed=seed, **params)
        self.p = AiderParams.model_validate(params)
        self.oracle = self.p.model_server is not None
        self.simulated = self.oracle  # oracle rows stay out of agent tables
        self.turns: list[dict] = []
        self.info: dict = {}

    @classmethod
    def params_for(cls, family: str):
        if family != "swelite":
            raise UnsupportedFamily(f"policy 'aider' runs on SWE-lite tasks only, not {family}")
        return AiderParams

    def describe(self) -> dict:
        out = super().describe()
        out["simulated"] = self.simulated
        if self.oracle:
            out.update(
                oracle=True,
                note="oracle-edit answers with the reference fixes; tests "
                "the harness, never a result",
            )
        return out

    def reset(self, first_observation: str) -> None:
        self.first = parse_observation(first_observation)
        self.check_family(self.first["result"].get("family", "swelite"))

    def act(self, observation: str):  # the harness steps the env itself (drive)
        raise NotImplementedError("AiderPolicy drives the environment (drive)")

    # ----- the episode ----------------------------------------------------------------------
    def drive(self, env) -> None:
        program = self.p.aider_bin or str(self._program())
        work = Path(tempfile.mkdtemp(prefix="pushbench-aider-"))
        server = None
        try:
            self.repo = work / "repo"
            shutil.copytree(env.unwrapped._ws.root, self.repo, symlinks=True)
            (work / "home").mkdir()
            P.write_metadata(work / "model-metadata.json", self.p.model, self.p.context)
            P.write_settings(
                work / "model-settings.yml", self.p.model, self.p.edit_format, self.p.max_tokens
            )
            version = P.aider_version(program)
            if self.oracle:
                try:
                    server = P.ModelServer(self.p.model_server or "", work)  # oracle: set
                except RuntimeError as e:
                    raise PolicyError("model_server", str(e)) from None
                url, key = server.url, "pushbench-offline"
            else:
                url = self.p.base_url or ""  # params: exactly one of model_server, base_url
                key = os.environ.get(self.p.api_key_env or "", "") or "none"
            self.info = {
                "version": version,
                "edit_format": self.p.edit_format,
                "model": self.p.model,
                "endpoint": "model-server" if self.oracle else self.p.base_url,
                "oracle": self.oracle,
                "step_charge": "one step per environment call; per Aider turn "
                "max(model requests, edit_file calls)",
            }
            self.env, self.work, self.program = env, work, program
            self.url, self.key = url, key
            self.deadline = time.monotonic() + self.p.episode_timeout
            self.last = self.first
            try:
                if isinstance(self.first.get("progress", {}).get("units"), dict):
                    self._unitqgp()
                else:
                    self._standard()
            except _Over:
                pass
        finally:
            if server is not None:
                server.close()
            shutil.rmtree(work, ignore_errors=True)

    def _program(self) -> Path:
        # Not a PolicyError: a missing install is a setup problem, so the episode goes to
        # errors.jsonl (run again on resume, once installed), not a recorded backend_error.
        return baselines.require("aider")

    def _step(self, call: dict) -> dict:
        obs, _, terminated, truncated, _ = self.env.step(call)
        self.last = parse_observation(obs)
        if terminated or truncated:
            raise _Over
        return self.last

    def _list_units(self) -> list[str]:
        ids, page = [], 1
        while True:
            r = self._step({"tool": "list_units", "page": page}).get("result") or {}
            ids += [u["id"] for u in r.get("units", ())]
            if not r.get("has_more"):
                return ids
            page += 1

    @staticmethod
    def _issue_text(uid: str, r: dict) -> str:
        text = f"## Issue {uid}: {r.get('title', '')}\n\n{r.get('issue', '')}\n"
        if r.get("observed"):
            text += f"\nObserved: {r['observed']}\n"
        return text

    def _standard(self) -> None:
        ids = self._list_units()
        issues = [
            self._issue_text(u, self._step({"tool": "inspect", "unit_id": u}).get("result") or {})
            for u in ids
        ]
        msg = (
            f"This repository has {len(ids)} reported issues. Fix each of them by editing "
            f"the library source under {', '.join(self.first['result'].get('editable', []))}"
            " (not the tests).\n\n" + "\n".join(issues)
        )
        self._turn(ids, msg)
        accepted = 0
        for uid in ids:
            r = self._step({"tool": "submit", "unit_id": uid}).get("result") or {}
            accepted += sum(v.get("verdict") == "accepted" for v in r.get("verdicts", ()))
        self._step(
            {
                "tool": "final",
                "reported_count": accepted,
                "message": f"Aider worked through the backlog; {accepted} accepted",
            }
        )

    def _unitqgp(self) -> None:
        self._list_units()
        tries: dict[str, int] = {}
        failed_output: dict[str, str] = {}
        while True:
            book = (self.last.get("progress") or {}).get("units") or {}
            for uid in book.get("passed", ()):  # verified but not submitted: submit it
                self._step({"tool": "submit", "unit_id": uid})
            book = (self.last.get("progress") or {}).get("units") or {}
            todo = [
                u
                for u in list(book.get("failing", ())) + list(book.get("pending", ()))
                if tries.get(u, 0) < self.p.max_turns_per_unit
            ]
            if not todo:
                break
            uid = todo[0]
            tries[uid] = tries.get(uid, 0) + 1
            r = self._step({"tool": "inspect", "unit_id": uid}).get("result") or {}
            uid = r.get("unit_id", uid)  # the controller may have moved to another unit
            msg = (
                "Fix this reported issue by editing the library source under "
                f"{', '.join(self.first['result'].get('editable', []))} (not the tests).\n\n"
                + self._issue_text(uid, r)
            )
            if uid in failed_output:
                msg += (
                    "\nA previous fix did not pass the issue's tests. The end of the test "
                    f"output:\n\n{failed_output[uid]}\n"
                )
            self._turn([uid], msg)
            v = self._step({"tool": "run_verifier", "unit_id": uid}).get("result") or {}
            if v.get("passed"):
                self._step({"tool": "submit", "unit_id": uid})
            else:
                failed_output[uid] = str(v.get("output_tail", ""))[-3000:]
        count = int((self.last.get("progress") or {}).get("valid_count", 0))
        while True:  # the completion gate may turn final into status below target
            self._step(
                {
                    "tool": "final",
                    "reported_count": count,
                    "message": "Aider worked through every unit the tracker handed over",
                }
            )

    # ----- one Aider turn -------------------------------------------------------------------
    def _turn(self, units: list[str], message: str) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PolicyError(
                "aider_timeout",
                f"the episode timeout of "
                f"{self.p.episode_timeout:g} s passed before turn "
                f"{len(self.turns) + 1}",
            )
        before = E.tree(self.repo)
        argv = P.turn_argv(
            self.program,
            self.url,
            self.key,
            self.p.model,
            self.p.edit_format,
            self.p.map_tokens,
            self.work,
            message,
            [],
        )
        res = P.run_turn(
            argv,
            self.repo,
            P.turn_env(self.work / "home", self.oracle),
            self.work,
            min(self.p.turn_timeout, left),
        )
        after = E.tree(self.repo)
        changed, created, deleted = E.changes(before, after)
        calls, unexpressed = [], []
        for path in changed:
            try:
                calls += E.edit_calls(
                    path, before[path].decode("utf-8"), after[path].decode("utf-8")
                )
            except (UnicodeDecodeError, ValueError) as e:
                unexpressed.append(f"{path}: {e}")
                (self.repo / path).write_bytes(before[path])
        for path in created:
            (self.repo / path).unlink()
        for path in deleted:
            (self.repo / path).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / path).write_bytes(before[path])
        requests = P.count_requests(res.llm_history)
        turn: dict[str, Any] = {
            "turn": len(self.turns) + 1,
            "units": units,
            "rc": res.rc,
            "timed_out": res.timed_out,
            "seconds": res.seconds,
            "model_requests": requests,
            "edit_calls": len(calls),
            "status_charged": max(0, requests - len(calls)),
            "created_undone": created,
            "deleted_undone": deleted,
            "unexpressed": unexpressed,
            "message": message,
            "llm_history": res.llm_history[:MAX_HISTORY_CHARS],
            "llm_history_clipped": len(res.llm_history) > MAX_HISTORY_CHARS,
            "aider_output_tail": res.stdout_tail,
            "edits": calls,
        }
        self.turns.append(turn)
        for _ in range(turn["status_charged"]):
            self._step({"tool": "status"})
        for call in calls:
            obs = self._step(call)
            if not obs.get("ok"):  # refused (e.g. a test file): Aider's copy follows the env
                cur = self.repo / call["path"]
                cur.write_bytes(before[call["path"]])
                turn.setdefault("refused", []).append(
                    {"path": call["path"], "error": obs.get("error", "")[:300]}
                )
        if res.timed_out:
            raise PolicyError(
                "aider_timeout",
                f"Aider turn {turn['turn']} ran past the turn "
                f"timeout of {min(self.p.turn_timeout, left):g} s; killed",
            )
        if res.rc != 0:
            raise PolicyError(
                "aider_crashed",
                f"Aider turn {turn['turn']} exited with status "
                f"{res.rc}: {res.stdout_tail[-300:].strip()}",
            )

    def episode_extras(self) -> dict:
        turns = self.turns
        summary = {
            **self.info,
            "turns": len(turns),
            "model_requests": sum(t["model_requests"] for t in turns),
            "edit_calls": sum(t["edit_calls"] for t in turns),
            "status_charged": sum(t["status_charged"] for t in turns),
            "aider_seconds": round(sum(t["seconds"] for t in turns), 2),
        }
        return {"aider": summary, "transcript": turns}
