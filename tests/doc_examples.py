"""The code blocks of README.md and docs/**/*.md, and how tests/test_doc_examples.py runs them.

The convention (docs/examples.md tells authors):

* Every fenced block names its language. ```` ```python ```` and ```` ```bash ```` blocks are
  run; every other language (``text``, ``yaml``, ``json``, ``toml``, ...) is not, so a snippet
  that cannot run as written (a placeholder, a real API key, a hosted client) is fenced ``text``.
* A runnable block may carry a marker, an HTML comment on the line right before its fence
  (invisible in the rendered page): ``<!-- example: KEY[; KEY ...] -->`` with keys

  - ``slow``: a long run; executed in the slow set (``-m slow``) instead of the fast one;
  - ``stub``: the block talks to an OpenAI-compatible server at ``127.0.0.1:8080`` (for the
    reader: their own server, e.g. llama.cpp with SmolLM2); the test serves the local stub
    (:class:`pushbench.policies.llm.stub.StubServer`) on a free port and puts that port in
    place of 8080;
  - ``install``: a ``pip install`` block; executed in the slow set with ``pip install
    --dry-run`` so the resolution is checked without touching the test's environment;
  - ``xfail: REASON``: a known bug; the block must fail (strict: a pass fails the test, so the
    marker is removed when the bug is fixed);
  - ``tested: tests/test_x.py``: the block is run by that test (e.g. a server it starts and
    stops around other blocks); checked to exist and to name the page, not run here;
  - ``clients[: claude-code, codex]``: the block runs a real black-box client (Claude Code,
    Codex CLI; both when no value is given); slow. The runner finds each as
    ``pushbench blackbox run`` does (``$PUSHBENCH_CLAUDE`` / ``$PUSHBENCH_CODEX``, then
    ``PATH``) and puts it on the block's ``PATH`` as ``claude`` / ``codex``, so the block runs
    as written for a reader who installed the clients. A client that cannot be found fails
    the page when ``PUSHBENCH_REQUIRE_CLIENTS=1`` (CI) and skips it, with the reason, otherwise.

* The blocks of one page run in document order in one scratch folder that holds links to the
  repository's top-level entries (``experiments/``, ``tasks/``, ...), with a private
  ``PUSHBENCH_HOME``; each python block is its own process (self-contained: its own imports),
  each bash block runs under ``bash -euo pipefail``. Files one block writes are there for the
  next. The fast set runs a page's blocks without ``slow``/``install``; the slow set runs the
  whole page (so a fast block may not depend on a slow one).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE = ("python", "bash")
KEYS = ("slow", "stub", "install", "xfail", "tested", "clients")
CLIENTS = ("claude-code", "codex")
_OPEN = re.compile(r"^(\s*)(`{3,})([^\s`]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    """One fenced block: where it is, its language, its markers and its code (dedented)."""

    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marks: dict[str, str] = field(default_factory=dict)

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE

    @property
    def runs_here(self) -> bool:
        return self.runnable and "tested" not in self.marks

    @property
    def slow(self) -> bool:
        return any(k in self.marks for k in ("slow", "install", "clients"))

    @property
    def clients(self) -> tuple[str, ...]:
        """The black-box clients the block runs (``clients`` marker; empty without one)."""
        if "clients" not in self.marks:
            return ()
        named = [c.strip() for c in self.marks["clients"].split(",") if c.strip()]
        unknown = [c for c in named if c not in CLIENTS]
        if unknown:
            raise ValueError(f"{self.where()}: unknown client(s) {unknown} (known: {CLIENTS})")
        return tuple(named) or CLIENTS

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/, found afresh (a new page needs no registration)."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def parse_marks(text: str) -> dict[str, str]:
    """``slow; xfail: why`` -> ``{"slow": "", "xfail": "why"}``; unknown keys raise ValueError."""
    marks = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, value = part.partition(":")
        key = key.strip()
        if key not in KEYS:
            raise ValueError(f"unknown example marker {key!r} (known: {', '.join(KEYS)})")
        marks[key] = value.strip()
    return marks


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one markdown file, in order; a fence left open raises ValueError."""
    lines = path.read_text().splitlines()
    rel = str(path.relative_to(ROOT))
    out, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        j = i + 1
        while j < len(lines) and lines[j].strip() != ticks:
            j += 1
        if j == len(lines):
            raise ValueError(f"{rel}:{i + 1}: a code fence is never closed")
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = _MARK.match(prev)
        code = textwrap.dedent("\n".join(lines[i + 1 : j])) + "\n"
        marks = parse_marks(mark.group(1)) if mark else {}
        out.append(Block(rel, i + 1, lang.lower(), code, marks))
        i = j + 1
    return out
