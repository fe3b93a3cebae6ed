"""Metadata-repair material derived from a RepoScan snapshot (requests, flask or pytest).

:func:`facts` reads the snapshot's own ``PKG-INFO`` (name, version, summary, requires-python,
license; the license falls back to the last part of the ``License ::`` classifier when there is
no ``License`` header) and finds the source module that declares ``__version__`` (if any).

A metadata unit's workspace folder holds the evidence (``PKG-INFO`` headers as shipped in the
sdist, plus that version module) and a metadata file to repair in one of two formats:

* ``pyproject.toml``: a ``[project]`` table (``license = {text = "..."}``) plus keys that must be
  kept unchanged (``readme``, ``classifiers``, ``[project.urls]``);
* ``METADATA``: ``Key: value`` header lines (core-metadata style; ``Classifier`` may repeat,
  every other key appears once; the header block must have no malformed line).

One or two fields are planted wrong (a changed value, or, in TOML, an unterminated string).
The checker parses the file (``tomllib`` / a strict header parser) and compares each field with
the facts held in memory, so editing the evidence files cannot make a unit pass.
"""

from __future__ import annotations

import json
import re
import tomllib
from functools import cache
from pathlib import Path

import numpy as np

from ... import snapshots

FIELDS = ("name", "version", "summary", "requires_python", "license")
TOML_KEY = {
    "name": "name",
    "version": "version",
    "summary": "description",
    "requires_python": "requires-python",
    "license": "license",
}
META_KEY = {
    "name": "Name",
    "version": "Version",
    "summary": "Summary",
    "requires_python": "Requires-Python",
    "license": "License",
}
_VERSION_RE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?["']([^"']+)["']""", re.M)


def pkg_info_headers(text: str) -> list[tuple[str, str]]:
    """Header lines of a PKG-INFO (up to the first blank line), continuation lines joined."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t" and out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
        elif ":" in line:
            k, v = line.split(":", 1)
            out.append((k.strip(), v.strip()))
    return out


@cache
def facts(snapshot: str) -> dict:
    """Facts of ``snapshot`` plus the evidence texts: ``pkg_info`` and ``version_file``."""
    root = Path(snapshots.ensure(snapshot))
    pkg_text = (root / "PKG-INFO").read_text(encoding="utf-8")
    headers = pkg_info_headers(pkg_text)
    h: dict[str, str] = {}
    for k, v in headers:
        h.setdefault(k, v)
    lic = h.get("License") or next(
        (
            v.split("::")[-1].strip()
            for k, v in headers
            if k == "Classifier" and v.startswith("License ::")
        ),
        "UNKNOWN",
    )
    version_file = None
    for py in sorted((root / "src").rglob("*.py")):
        m = _VERSION_RE.search(py.read_text(encoding="utf-8", errors="replace"))
        if m and m.group(1) == h["Version"]:
            version_file = (str(py.relative_to(root)), py.read_text(encoding="utf-8"))
            break
    return {
        "name": h["Name"],
        "version": h["Version"],
        "summary": h.get("Summary", ""),
        "requires_python": h.get("Requires-Python", ""),
        "license": lic,
        "classifiers": [v for k, v in headers if k == "Classifier"][:8],
        "urls": [v for k, v in headers if k == "Project-URL"][:4],
        "pkg_info": "\n".join(f"{k}: {v}" for k, v in headers) + "\n",
        "version_file": version_file,
    }


def _wrong(field: str, value: str, rng: np.random.Generator) -> str:
    if field == "version":
        parts = value.split(".")
        i = int(rng.integers(len(parts)))
        parts[i] = str(int(parts[i]) + int(rng.integers(1, 3))) if parts[i].isdigit() else "0"
        return ".".join(parts)
    if field == "requires_python":
        return [">=3.6", ">=3.7", ">=3.9", ">=2.7", "<3.8"][int(rng.integers(5))]
    if field == "name":
        return [
            value + "-lib",
            value.rstrip("s") if value.endswith("s") else value + "s",
            "py" + value.lower(),
        ][int(rng.integers(3))]
    if field == "license":
        options = [x for x in ("MIT", "Apache-2.0", "BSD License", "GPL-3.0", "ISC") if x != value]
        return options[int(rng.integers(len(options)))]
    return value.rstrip(".") + " (draft)"  # summary


def render(fmt: str, values: dict, f: dict, broken: str | None = None) -> str:
    """The metadata file text; ``broken`` names a field whose TOML string is left unterminated."""
    if fmt == "toml":

        def s(x: str) -> str:
            return json.dumps(x)

        lines = ["[project]"]
        for field in FIELDS:
            val = values[field]
            text = (
                f"license = {{text = {s(val)}}}"
                if field == "license"
                else f"{TOML_KEY[field]} = {s(val)}"
            )
            if field == broken:  # drop the closing quote: the line no longer parses
                text = text[:-2] + "}" if field == "license" else text[:-1]
            lines.append(text)
            if field == "summary":
                lines.append('readme = "README.md"')
        lines.append("classifiers = [")
        lines += [f"    {s(c)}," for c in f["classifiers"]]
        lines.append("]")
        lines.append("")
        lines.append("[project.urls]")
        for u in f["urls"]:
            k, _, v = u.partition(",")
            lines.append(f"{s(k.strip())} = {s(v.strip())}")
        return "\n".join(lines) + "\n"
    lines = ["Metadata-Version: 2.1"]
    lines += [f"{META_KEY[field]}: {values[field]}" for field in FIELDS]
    lines += [f"Classifier: {c}" for c in f["classifiers"]]
    return "\n".join(lines) + "\n"


def build(rng: np.random.Generator, snapshot: str) -> dict:
    """A metadata unit's material: format, file texts, planted fields and in-memory facts."""
    f = facts(snapshot)
    fmt = "toml" if rng.random() < 0.6 else "meta"
    k = 1 + int(rng.random() < 0.5)
    planted = sorted(str(x) for x in rng.choice(list(FIELDS), size=k, replace=False))
    values = {field: f[field] for field in FIELDS}
    broken = None
    for field in planted:
        if fmt == "toml" and broken is None and rng.random() < 0.25:
            broken = field  # the value stays right but the line no longer parses
        else:
            values[field] = _wrong(field, f[field], rng)
    files = {"PKG-INFO": f["pkg_info"]}
    if f["version_file"]:
        files[f["version_file"][0]] = f["version_file"][1]
    target = "pyproject.toml" if fmt == "toml" else "METADATA"
    files[target] = render(fmt, values, f, broken)
    expected = {field: f[field] for field in FIELDS}
    keep = (
        {"readme": "README.md", "classifiers": list(f["classifiers"])}
        if fmt == "toml"
        else {"Classifier": list(f["classifiers"])}
    )
    return {
        "format": fmt,
        "target": target,
        "files": files,
        "planted": planted,
        "expected": expected,
        "keep": keep,
    }


def parse_meta(text: str) -> dict[str, list[str]]:
    """Strict ``Key: value`` header parser; raises ``ValueError`` on a malformed line."""
    out: dict[str, list[str]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            break
        m = re.fullmatch(r"([A-Za-z][A-Za-z0-9-]*): ?(.*)", line)
        if not m:
            raise ValueError(f"line {n} is not a 'Key: value' header")
        out.setdefault(m.group(1), []).append(m.group(2).strip())
    return out


def check(fmt: str, text: str, expected: dict, keep: dict) -> tuple[str, str] | None:
    """``None`` when every rule holds, else ``(rule, reason)`` of the first failing rule.

    Total: any text (deep nesting, huge numbers) gives a ``parses`` failure, never an exception.
    """
    if fmt == "toml":
        try:
            proj = tomllib.loads(text).get("project")
        except ValueError as e:  # TOMLDecodeError, or an integer too long to convert
            return "parses", f"the file is not valid TOML ({str(e)[:200]})"
        except RecursionError:  # tomllib recurses per nesting level of arrays/tables
            return "parses", "the file is not valid TOML (nested too deeply)"
        if not isinstance(proj, dict):
            return "parses", "the file has no [project] table"
        for field in FIELDS:
            val = proj.get(TOML_KEY[field])
            if field == "license":
                val = val.get("text") if isinstance(val, dict) else None
            if val != expected[field]:
                return field, (
                    f"project.{TOML_KEY[field]}"
                    f"{'.text' if field == 'license' else ''} does not match "
                    f"{_source(field)}"
                )
        for key, val in keep.items():
            if proj.get(key) != val:
                return "unchanged", f"project.{key} must keep its original value"
        return None
    try:
        headers = parse_meta(text)
    except ValueError as e:
        return "parses", f"the header block does not parse ({e})"
    for field in FIELDS:
        vals = headers.get(META_KEY[field], [])
        if len(vals) != 1:
            return field, f"{META_KEY[field]} must appear exactly once"
        if vals[0] != expected[field]:
            return field, f"{META_KEY[field]} does not match {_source(field)}"
    for key, val in keep.items():
        if headers.get(key, []) != val:
            return "unchanged", f"the {key} lines must keep their original values and order"
    return None


def _source(field: str) -> str:
    if field == "license":
        return (
            "the License header of PKG-INFO (or, without one, the last part of its "
            "'License ::' classifier)"
        )
    return f"the {META_KEY[field]} header of PKG-INFO"


def rules(fmt: str, target: str) -> list[dict]:
    """The rules shown to the agent (data): parse, each field's source, keep the rest."""
    out = [
        {
            "rule": "parses",
            "file": target,
            "text": f"{target} parses ({'TOML' if fmt == 'toml' else 'Key: value headers'})",
        }
    ]
    for field in FIELDS:
        key = (
            f"project.{TOML_KEY[field]}" + (".text" if field == "license" else "")
            if fmt == "toml"
            else META_KEY[field]
        )
        out.append(
            {
                "rule": field,
                "field": key,
                "equals": f"PKG-INFO:{META_KEY[field]}",
                "text": f"{key} equals {_source(field)}",
            }
        )
    kept = "readme and classifiers" if fmt == "toml" else "the Classifier lines"
    out.append({"rule": "unchanged", "text": f"{kept} keep their original values"})
    return out
