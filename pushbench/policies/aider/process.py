"""Starting Aider (one turn = one ``aider --message`` process) and the loopback model server.

Aider runs non-interactively and offline-safe (the flags are the ones verified in issue 28):
``--yes-always --no-check-update --analytics-disable --no-show-model-warnings --no-pretty
--no-fancy-input --no-detect-urls``, a model-metadata file (else it fetches litellm's price map
at start-up), ``--no-auto-commits --no-git`` (the copy is not a git repository and no commit
message request is made), its chat, input and LLM history files outside the repository, a fresh
``HOME`` and, with a loopback endpoint, proxies pointing at a closed port so that nothing but
the model server can be reached. The process gets its own process group: at the turn timeout
the whole group is killed.

``--llm-history-file`` is Aider's own log of every model request and answer
(``TO LLM <time>`` / ``LLM RESPONSE <time>`` sections): :func:`count_requests` reads it, so
requests are counted the same way for the model server and for a real endpoint.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...processes import stop_group

DEAD_PROXY = "http://127.0.0.1:9"  # discard port: nothing listens, connections fail at once
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SSL_CERT_FILE")
_TO_LLM = re.compile(r"^TO LLM \d", re.MULTILINE)


@dataclass
class TurnResult:
    rc: int | None
    timed_out: bool
    seconds: float
    stdout_tail: str
    llm_history: str


def aider_version(program: str) -> str:
    try:
        out = subprocess.run(
            [program, "--version"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", ""), "HOME": "/nonexistent"},
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
    return (out.stdout.strip().splitlines() or ["unknown"])[-1].removeprefix("aider ").strip()


def count_requests(llm_history: str) -> int:
    """Model requests in Aider's LLM history text (one ``TO LLM`` section each)."""
    return len(_TO_LLM.findall(llm_history))


def write_metadata(path: Path, model: str, context: int = 32768) -> None:
    """The model-metadata file: Aider then needs no price map from the network."""
    path.write_text(
        json.dumps(
            {
                f"openai/{model}": {
                    "max_tokens": 4096,
                    "max_input_tokens": context,
                    "max_output_tokens": 4096,
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    "litellm_provider": "openai",
                    "mode": "chat",
                }
            },
            indent=1,
        )
    )


def write_settings(path: Path, model: str, edit_format: str, max_tokens: int | None) -> None:
    """Aider's model-settings file (YAML is a superset of JSON): the edit format and, when
    given, a ``max_tokens`` sent with every request (a small local model otherwise writes until
    its context is full)."""
    entry: dict = {"name": f"openai/{model}", "edit_format": edit_format}
    if max_tokens is not None:
        entry["extra_params"] = {"max_tokens": max_tokens}
    path.write_text(json.dumps([entry], indent=1))


def turn_argv(
    program: str,
    base_url: str,
    api_key: str,
    model: str,
    edit_format: str,
    map_tokens: int,
    work: Path,
    message: str,
    files: list[str],
) -> list[str]:
    return [
        program,
        "--model",
        f"openai/{model}",
        "--openai-api-base",
        base_url,
        "--openai-api-key",
        api_key,
        "--edit-format",
        edit_format,
        "--yes-always",
        "--no-check-update",
        "--analytics-disable",
        "--no-show-model-warnings",
        "--no-pretty",
        "--no-fancy-input",
        "--no-detect-urls",
        "--no-auto-commits",
        "--no-git",
        "--no-show-release-notes",
        "--map-tokens",
        str(map_tokens),
        "--model-metadata-file",
        str(work / "model-metadata.json"),
        "--model-settings-file",
        str(work / "model-settings.yml"),
        "--llm-history-file",
        str(work / "llm-history.txt"),
        "--chat-history-file",
        str(work / "chat-history.md"),
        "--input-history-file",
        str(work / "input-history.txt"),
        "--message",
        message,
        *files,
    ]


def turn_env(home: Path, offline: bool) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
    env.update(
        HOME=str(home),
        NO_COLOR="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        AIDER_ANALYTICS="false",
        TERM="dumb",
    )
    if offline:
        env.update(
            HTTP_PROXY=DEAD_PROXY,
            HTTPS_PROXY=DEAD_PROXY,
            ALL_PROXY=DEAD_PROXY,
            http_proxy=DEAD_PROXY,
            https_proxy=DEAD_PROXY,
            NO_PROXY="127.0.0.1,localhost,::1",
            no_proxy="127.0.0.1,localhost,::1",
        )
    return env


def run_turn(
    argv: list[str], cwd: Path, env: dict[str, str], work: Path, timeout: float
) -> TurnResult:
    """Run one Aider process to its end (or kill its group at ``timeout`` seconds)."""
    hist = work / "llm-history.txt"
    start = hist.stat().st_size if hist.exists() else 0
    log = work / "aider.out"
    t0 = time.monotonic()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = stop_group(proc, 10)
    text = hist.read_bytes()[start:].decode("utf-8", "replace") if hist.exists() else ""
    tail = log.read_bytes()[-2000:].decode("utf-8", "replace")
    return TurnResult(rc, timed_out, round(time.monotonic() - t0, 2), tail, text)


class ModelServer:
    """``pushbench model-server --policy NAME`` as a subprocess on a free loopback port
    (a subprocess: the model server's layer sits above the policies')."""

    def __init__(self, policy: str, work: Path, startup: float = 120.0) -> None:
        self.log = work / "model-server.jsonl"
        port_file = work / "model-server.port"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pushbench.cli",
                "model-server",
                "--policy",
                policy,
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--log",
                str(self.log),
            ],
            stdout=open(work / "model-server.out", "ab"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + startup
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                tail = (work / "model-server.out").read_bytes()[-500:].decode("utf-8", "replace")
                raise RuntimeError(f"the model server ({policy}) did not start: {tail.strip()}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{int(port_file.read_text())}/v1"

    def close(self) -> None:
        if self.proc.poll() is None:
            stop_group(self.proc, 10)
