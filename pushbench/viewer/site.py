"""Write the viewer's files for one run folder (see :mod:`pushbench.viewer`).

Layout of the output directory (default ``RUN_DIR/view``)::

    index.html              the page (one for every view; the view is in the URL's #fragment)
    assets/                 viewer.js, viewer.css and LICENSE (copied from this package)
    figures/                the run's figures (PNG), copied
    data/overview.js        run facts, counts, summary table, paired deltas, figure list
    data/episodes.js        one row per episode (loaded by the episode list)
    data/files.js           the episode file names written (the page opens only these)
    data/ep/<key>.js        one episode's full record (loaded when the episode is opened)

Data files are JavaScript (``PB.loaded(name, {...})``) rather than JSON because a page opened
from disk may not ``fetch`` other local files; a ``<script>`` element may load them. The JSON
inside is ASCII with ``<``, ``>`` and ``&`` escaped, and the page renders every string as text
(never as HTML), so what an agent wrote cannot become markup. A route names an episode by its
file name, and the page loads ``data/ep/<name>.js`` only for a name listed in ``files.js``
(the list's own string, never the URL's), so a crafted URL cannot load any other script. Files are
private to the user
(0700 / 0600) like the run folder they come from.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from .. import paths
from ..analysis.frame import controller_rank
from ..runner.rundir import TRACES, load_trace
from .data import file_stem, gather, plain

STATIC = ("index.html", "viewer.js", "viewer.css", "LICENSE")
_OURS = ("assets", "data", "figures")  # folders a rebuild replaces (nothing else is touched)


class OutDirError(ValueError):
    """The output directory would overwrite a run folder (message says what to do)."""


def js_payload(name: str, obj) -> bytes:
    """``PB.loaded(name, obj);`` as bytes; the JSON is ASCII and holds no ``<``, ``>``, ``&``."""
    return f"PB.loaded({_json(name)},{_json(plain(obj))});\n".encode("ascii")


def _json(obj) -> str:
    text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def static_bytes(name: str) -> bytes:
    """The bytes of the viewer's shipped file ``static/name``."""
    return resources.files(__package__).joinpath("static", name).read_bytes()


_static = static_bytes


def install_assets(out: Path) -> Path:
    """(Re)write ``out/assets`` (the viewer's script, style sheet and licence); return it."""
    if (out / "assets").is_dir():
        shutil.rmtree(out / "assets")
    assets = paths.private_dir(out / "assets")
    for name in STATIC[1:]:
        paths.write_private(assets / name, _static(name))
    return assets


def build_site(
    run_dir: str | Path, out: str | Path | None = None, log: Callable[[str], None] | None = None
) -> Path:
    """Build the viewer for ``run_dir`` into ``out`` (default ``run_dir/view``); return ``out``.

    Raises ``FileNotFoundError`` when ``run_dir`` has no ``episodes.jsonl``, :class:`OutDirError`
    when ``out`` is a run folder (it holds ``episodes.jsonl`` or ``traces``). A rebuild replaces
    only the viewer's own folders in ``out`` (``assets``, ``data``, ``figures``) and
    ``index.html``. Episodes whose trace file is missing get a page from their line alone
    (the page says so).
    """
    run_dir = Path(run_dir)
    if run_dir.is_file():
        run_dir = run_dir.parent
    out = Path(out) if out is not None else run_dir / "view"
    if (out / "episodes.jsonl").exists() or (out / TRACES).exists():
        raise OutDirError(
            f"{out} holds a run folder; give the viewer its own --out directory "
            f"(default {run_dir / 'view'})"
        )
    say = log or (lambda _m: None)
    overview, episode_list, lines, df = gather(run_dir)
    paths.private_dir(out, tighten=False)
    for sub in _OURS:
        if (out / sub).is_dir():
            shutil.rmtree(out / sub)
    install_assets(out)
    figures = paths.private_dir(out / "figures")
    for fig in overview["figures"]:
        paths.write_private(figures / fig["file"], (run_dir / fig["file"]).read_bytes())
    data = paths.private_dir(out / "data")
    paths.write_private(data / "overview.js", js_payload("overview", overview))
    paths.write_private(data / "episodes.js", js_payload("episodes", episode_list))
    paths.write_private(
        data / "files.js",
        js_payload("files", sorted({file_stem(line.get("key", "")) for line in lines})),
    )
    _write_episodes(run_dir, paths.private_dir(data / "ep"), lines, df, say)
    paths.write_private(out / "index.html", _static("index.html"))
    say(f"wrote {len(lines)} episode pages")
    return out


def _rank(controller: str) -> list:
    """Baseline-first position of a controller (the paired view puts the lower rank left)."""
    return list(controller_rank(controller))


def _write_episodes(run_dir: Path, dest: Path, lines: list[dict], df, say) -> None:
    siblings: dict[int, list[dict]] = {}
    for key, ctrl, pid in zip(df["key"], df["controller"], df["pair"], strict=True):
        siblings.setdefault(int(pid), []).append(
            {"key": key, "file": file_stem(key), "controller": ctrl, "rank": _rank(ctrl)}
        )
    traces = run_dir / TRACES
    for i, (line, row) in enumerate(zip(lines, df.itertuples(index=False), strict=True), 1):
        # A key that is not a plain file name never becomes a path (no reading outside traces/).
        safe = file_stem(row.key) == row.key
        has_trace = safe and (traces / f"{row.key}.json.gz").is_file()
        try:
            record = load_trace(run_dir, row.key) if has_trace else line
            problem = (
                None
                if has_trace
                else (
                    "no trace file: the page shows the episode line only"
                    if safe
                    else "the key is not a plain file name, so no trace is read: "
                    "the episode line only"
                )
            )
        except (OSError, ValueError, EOFError) as e:  # gzip raises EOFError when truncated
            record, problem = line, f"trace file unreadable ({e}): the episode line only"
        page = {
            "key": row.key,
            "outcome": row.outcome,
            "record": record,
            "problem": problem,
            "rank": _rank(row.controller),
            "siblings": [s for s in siblings[int(row.pair)] if s["key"] != row.key],
        }
        stem = file_stem(row.key)
        paths.write_private(dest / f"{stem}.js", js_payload("ep:" + stem, page))
        if i % 2000 == 0:
            say(f"{i}/{len(lines)} episode pages")
