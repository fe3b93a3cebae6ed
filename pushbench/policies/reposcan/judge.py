"""How an offline agent reads a RepoScan objective and judges a search hit from its snippet.

This is observation-only reasoning: the property comes from the objective's plain words and the
judgement from the snippet (at most 8 lines, so long functions are only partly visible).
``judge`` answers ``"yes"`` (evidence visible), ``"no"`` (the visible code rules it out) or
``"maybe"`` (the snippet may be cut before the evidence).
"""

from __future__ import annotations

import re

SNIPPET_LINES = 8

_PATTERNS = {
    "assert": re.compile(r"^\s*assert\b"),
    "returns": re.compile(r"\breturn\s+[^\s#;]"),
    "raises": re.compile(r"^\s*(?:[^#]*:\s*)?raise\b"),
}


JUDGED = ("docstring", "assert", "returns", "raises", "decorated")  # plus fixture:X


def property_from_objective(objective: str) -> str:
    """Predicate spec the objective describes (``docstring``, ``fixture:app``, ...).

    Exact: the objective must contain the description of one of the atoms this judge reads
    (:data:`JUDGED` and ``fixture:X``), word for word. Anything else (a negation, a compound
    predicate, a newer atom) raises ``ValueError`` rather than being read as the nearest atom,
    so a calibration never measures an agent that pursued the wrong property.
    """
    from ...families.reposcan.predicates import parse_predicate

    if "of these conditions:" in objective:
        raise ValueError("the objective combines several conditions; the scripted judge "
                         "reads single atoms only (" + ", ".join(JUDGED) + ", fixture:X)")
    m = re.search(r"parameter named `([A-Za-z_][A-Za-z0-9_]*)`", objective)
    if m and parse_predicate(f"fixture:{m.group(1)}").description in objective:
        return f"fixture:{m.group(1)}"
    for spec in JUDGED:
        if parse_predicate(spec).description in objective:
            return spec
    raise ValueError("cannot tell the property from the objective: the scripted judge reads "
                     "the atoms " + ", ".join(JUDGED) + " and fixture:X")


def queries_for(spec: str) -> list[str]:
    """Queries a sensible agent tries, most specific first; ``""`` browses everything."""
    if spec.startswith("fixture:"):
        name = spec.split(":", 1)[1]
        return [f"test {name}", name, "test", ""]
    return {"assert": ["assert", "test", ""], "returns": ["return", ""],
            "raises": ["raise", "error", "exception", "fail", "invalid", ""],
            "docstring": [""],
            "decorated": ["fixture", "property", "setupmethod", ""]}[spec]


def _split(snippet: str) -> tuple[list[str], list[str], bool]:
    lines = snippet.split("\n")
    start = next((i for i, l in enumerate(lines)
                  if l.lstrip().startswith(("def ", "async def "))), 0)
    end = start
    while end < len(lines) - 1 and not lines[end].rstrip().endswith(":"):
        end += 1
    return lines[: end + 1], lines[end + 1:], len(lines) >= SNIPPET_LINES


def judge(spec: str, hit: dict) -> str:
    """``yes`` / ``no`` / ``maybe`` for one search hit under property ``spec``."""
    head, body, maybe_cut = _split(hit.get("snippet", ""))
    if spec == "decorated":
        return "yes" if head and head[0].lstrip().startswith("@") else "no"
    if spec.startswith("fixture:"):
        name = spec.split(":", 1)[1]
        sig = " ".join(l.strip() for l in head)
        fn = hit.get("id", "").rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        if not fn.startswith("test"):
            return "no"
        if re.search(rf"[(,]\s*{re.escape(name)}\s*[,:)=]", sig):
            return "yes"
        return "maybe" if not head[-1].rstrip().endswith(":") else "no"
    if spec == "docstring":
        first = next((l.strip() for l in body if l.strip()), None)
        if first is None:
            return "maybe" if maybe_cut else "no"
        return "yes" if re.match(r"^[rRuUbBfF]{0,2}('''|\"\"\"|'|\")", first) else "no"
    pattern = _PATTERNS[spec]
    if any(pattern.search(l) for l in body):
        return "yes"
    return "maybe" if maybe_cut else "no"
