"""Black-box agents over MCP (docs/blackbox.md): ``pushbench mcp``, ``mcp-prompt``, ``evaluate``
and ``blackbox run`` (thin layers over :mod:`pushbench.blackbox` and
:mod:`pushbench.blackbox_run`; a ``RunDirError`` is left to the one handler in :mod:`.common`).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from .common import console, fail, out, split, writable_dir

bb_app = typer.Typer(
    no_args_is_help=True,
    help="Run black-box agents (Claude Code, Codex CLI) on PushBench episodes.",
)


# ----- black-box agents over MCP (docs/blackbox.md) -----------------------------------------
def mcp_cmd(
    task: str = typer.Option(..., "--task", help="task id, e.g. RepoScan-requests-docstring-N50"),
    run_dir: Path = typer.Option(
        ...,
        "--run-dir",
        help="where the record goes (one per episode; keep it out of the agent's reach)",
    ),
    seed: int = typer.Option(0, min=0, help="reset seed (also picks a suite's instance)"),
    controller: str = typer.Option("standard", help="controller wrapping the environment"),
    workspace: Path | None = typer.Option(
        None, help="prepare a fresh copy of the snapshot here for the agent to read"
    ),
    condition: str = typer.Option("default", help="prompt condition label: default | checklist"),
    agent: str | None = typer.Option(None, help="agent label for the report, e.g. claude-code"),
    instance: str | None = typer.Option(None, help="instance of a suite task"),
    budget: int | None = typer.Option(None, min=1, help="step-budget override"),
    overwrite: bool = typer.Option(False, help="discard a run already in --run-dir"),
    allow_shared_cache: bool = typer.Option(
        False,
        "--allow-shared-cache",
        help="serve even if "
        "other users can read the cache or the run dir "
        "(a warning instead of a refusal)",
    ),
) -> None:
    """Serve one episode of TASK to a black-box agent as a stdio MCP server."""
    from ..blackbox.evaluate import check_label

    try:
        check_label("condition", condition)
        if agent is not None:
            check_label("agent", agent)
    except ValueError as e:
        fail(f"--{str(e)}")
    writable_dir(run_dir, "--run-dir")
    if workspace is not None and workspace.exists() and not workspace.is_dir():
        fail(f"--workspace {workspace} is a file; give a new directory for the copy")
    try:
        from ..blackbox import server as mcp_server
    except ImportError as e:
        fail(f"the MCP server needs the optional dependency ({e}): pip install 'pushbench[mcp]'")
    code = mcp_server.main(
        task,
        run_dir,
        seed=seed,
        controller=controller,
        workspace=workspace,
        condition=condition,
        agent=agent,
        instance=instance,
        budget=budget,
        overwrite=overwrite,
        allow_shared_cache=allow_shared_cache,
    )
    raise typer.Exit(code)


def mcp_prompt_cmd(
    condition: str = typer.Argument("default", help="default | checklist"),
    task: str | None = typer.Option(
        None,
        help="append this task's first observation (the "
        "episode `pushbench mcp` serves with the same options)",
    ),
    seed: int = typer.Option(0, min=0, help="with --task: the episode's seed"),
    controller: str = typer.Option("standard", help="with --task: the episode's controller"),
    instance: str | None = typer.Option(None, help="with --task: instance of a suite task"),
    budget: int | None = typer.Option(None, min=1, help="with --task: step-budget override"),
) -> None:
    """Print the prompt to give a black-box agent under CONDITION."""
    from ..blackbox.prompts import PROMPTS

    if condition not in PROMPTS:
        fail(f"unknown condition {condition!r}; known: {', '.join(PROMPTS)}")
    if task is None:
        print(PROMPTS[condition])
        return
    from ..blackbox.episode_prompt import episode_prompt

    try:
        print(episode_prompt(condition, task, seed, controller, instance, budget), end="")
    except (KeyError, ValueError) as e:
        fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))


def evaluate_cmd(
    run_dirs: list[Path] = typer.Argument(..., help="run directories written by `pushbench mcp`"),
    out_dir: Path = typer.Option(..., "--out", help="where episodes.jsonl and the report go"),
    seed: int = typer.Option(0, help="bootstrap seed (same seed -> identical CSVs)"),
    resamples: int = typer.Option(9999, min=100, help="bootstrap resamples"),
    overwrite: bool = typer.Option(
        False,
        help="discard what --out holds, even if another "
        "command or an evaluation of other runs wrote it",
    ),
) -> None:
    """Turn black-box run directories into episodes.jsonl plus the report tables."""
    import warnings

    from ..blackbox.evaluate import check_evaluation_out, evaluate_run_dirs, write_evaluation

    writable_dir(out_dir, "--out")
    check_evaluation_out(out_dir, run_dirs, overwrite)  # before any replay (refusal: exit 2)
    present, refused = [], []
    for d in run_dirs:
        if d.is_dir():
            present.append(d)
        else:
            kind = "a file" if d.exists() else "not found"
            refused.append(
                (
                    str(d),
                    f"{d} is not a run directory ({kind}); give the "
                    "--run-dir folders of `pushbench mcp`",
                )
            )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records, more = evaluate_run_dirs(present)
    refused += more
    for w in caught:
        console.print(f"[yellow]warning:[/] {w.message}", highlight=False)
    for _, why in refused:  # one line per refused folder; the batch goes on
        console.print(f"[red]refused:[/] {why}", highlight=False, soft_wrap=True)
    if not records:
        fail(f"no run directory could be evaluated ({len(refused)} refused)")
    try:
        write_evaluation(
            records,
            out_dir,
            seed=seed,
            n_resamples=resamples,
            console=console,
            out=out,
            run_dirs=run_dirs,
            overwrite=overwrite,
            arguments={
                "run_dirs": [str(d) for d in run_dirs],
                "seed": seed,
                "resamples": resamples,
                "overwrite": overwrite,
            },
        )
    except OSError as e:
        fail(f"cannot write the evaluation to {out_dir}: {e.strerror or e}")
    if refused:
        console.print(
            f"[red]{len(refused)} run folder(s) refused[/] (listed above); the "
            f"other {len(records)} were evaluated",
            highlight=False,
        )
        raise typer.Exit(1)


@bb_app.command("run")
def blackbox_run_cmd(
    agent: str = typer.Option(..., "--agent", help="claude-code | codex | letta (docs/letta.md)"),
    tasks: list[str] = typer.Option(..., "--tasks", help="task ids (repeat or comma-separate)"),
    seeds: list[str] = typer.Option(["0"], "--seeds", help="seeds (repeat or comma-separate)"),
    condition: str = typer.Option("default", help="prompt condition: default | checklist"),
    out_dir: Path = typer.Option(..., "--out", help="batch folder (episodes, report)"),
    policy: str | None = typer.Option(
        None,
        "--model-server",
        help="drive the client with this offline policy behind a loopback model server",
    ),
    params: str | None = typer.Option(None, "--params", help="policy parameters as JSON"),
    base_url: str | None = typer.Option(
        None, "--base-url", help="a real model endpoint instead of --model-server (no /v1)"
    ),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="with --base-url: the environment variable holding the key"
    ),
    model: str | None = typer.Option(None, "--model", help="with --base-url: model name"),
    controller: str = typer.Option("standard", help="controller wrapping the environment"),
    budget: int | None = typer.Option(None, min=1, help="step-budget override"),
    timeout: float = typer.Option(
        600.0, min=1, help="seconds per episode before the client is killed"
    ),
    client_bin: str | None = typer.Option(None, "--client-bin", help="path of the client"),
    context_window: int | None = typer.Option(
        None,
        "--context-window",
        min=1024,
        help="letta only: the model's context in tokens (default 32000; e.g. 8192 for SmolLM2)",
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", min=1, help="letta only: completion tokens per request (2048)"
    ),
    max_turns: int | None = typer.Option(
        None, "--max-turns", min=1, help="letta only: turns per episode (50)"
    ),
    steps_per_turn: int | None = typer.Option(
        None, "--steps-per-turn", min=1, help="letta only: Letta steps per turn (100)"
    ),
) -> None:
    """Run a batch of episodes through a real client headless, then evaluate it."""
    import json as _json

    from .. import blackbox_run
    from ..blackbox import clients as blackbox_clients
    from ..blackbox.prompts import PROMPTS

    if agent not in (*blackbox_clients.LAUNCHERS, "letta"):
        fail(f"--agent {agent!r}: choose claude-code, codex or letta")
    if agent != "letta" and (context_window or max_tokens or max_turns or steps_per_turn):
        fail(
            "--context-window, --max-tokens, --max-turns and --steps-per-turn are Letta's "
            "settings (--agent letta)"
        )
    if condition not in PROMPTS:
        fail(f"--condition {condition!r}: choose {' or '.join(PROMPTS)}")
    if (policy is None) == (base_url is None):
        fail("give exactly one of --model-server POLICY and --base-url URL")
    # split() is None only for no values, and "--tasks ," gives none either: an empty batch
    # would run nothing and still report success.
    task_list = split(tasks) or fail("--tasks: give at least one task id")
    try:
        seed_list = [int(x) for x in split(seeds) or fail("--seeds: give at least one seed")]
    except ValueError:
        fail("--seeds takes integers")
    endpoint = None
    parsed = None
    try:
        parsed = _json.loads(params) if params else None
        if policy is not None:
            from ..modelserver import PolicyBackend

            PolicyBackend(policy, parsed, 0)  # validates name and params before any episode
        else:
            assert base_url is not None  # exactly one of policy and base_url (checked above)
            key = os.environ.get(api_key_env or "", "") if api_key_env else ""
            if api_key_env and not key:
                fail(f"--api-key-env {api_key_env}: the variable is not set")
            endpoint = blackbox_clients.Endpoint(
                base_url=base_url, api_key=key or "none", model=model or "default", offline=False
            )
    except (KeyError, ValueError) as e:
        fail(str(e.args[0] if isinstance(e, KeyError) and e.args else e))
    writable_dir(out_dir, "--out")
    batch = blackbox_run.Batch(
        agent=agent,
        tasks=task_list,
        seeds=seed_list,
        condition=condition,
        out=out_dir,
        policy=policy,
        params=parsed,
        endpoint=endpoint,
        controller=controller,
        budget=budget,
        timeout=timeout,
        client_bin=client_bin,
        context_window=context_window,
        max_tokens=max_tokens,
        max_turns=max_turns,
        steps_per_turn=steps_per_turn,
    )
    try:
        summary = blackbox_run.run_batch(
            batch, log=lambda m: console.print(m, highlight=False), console=console, out=out
        )
    except FileNotFoundError as e:
        fail(str(e))
    console.print(_json.dumps(summary, indent=1), highlight=False)
    if summary["never_started"] or summary["refused"]:  # a failed batch must not read as done
        console.print(
            f"[red]{len(summary['never_started'])} episode(s) without a record, "
            f"{len(summary['refused'])} refused[/] (the client's output: client.err "
            "and client.json beside each run folder)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
