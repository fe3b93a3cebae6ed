"""Deterministic lexical search over a snapshot's definitions (BM25 over path, name, signature).

The identifier (path and qualified name) and the snippet the result shows are indexed, with
Python keywords as stop words: a keyword says nothing about topic, and indexing ``assert`` or
``raise`` would turn a query for the property's keyword into a filter on the property itself.
So result pages mix definitions that have the property with ones that do not, and the agent
must read the code.

What the query loses is said, not silent: :func:`ignored_terms` lists the query's keyword
terms (they match words of definition paths and names only, never the code) and
:func:`search_feedback` the block a search result carries about them (also for a query with no
letters or digits, which browses like the empty query). Both are functions of the query text
alone: nothing about the snapshot, its definitions or a valid set enters them.

One document per identifier (its first definition in file order). Ranking is by BM25 score,
ties broken by identifier order, so the same query always returns the same pages. The empty
query browses every definition in identifier order. Results carry display fields only
(identifier, kind, signature, location, snippet); predicate facts never enter this module.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict, defaultdict
from dataclasses import dataclass

import numpy as np

from .indexer import Definition

PAGE_SIZE = 10
_WORD = re.compile(r"[A-Za-z][a-z0-9]*|[A-Z]+(?![a-z])|[0-9]+")
_K1, _B = 1.2, 0.75
# Python 3.11's keywords and soft keywords, lower-cased, written out: ``keyword.softkwlist``
# grows with the interpreter (3.12 adds ``type``), and the index, its rankings and the
# ``ignored`` feedback must not depend on which Python runs the benchmark.
_STOP = frozenset(
    (
        "_",
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "case",
        "class",
        "continue",
        "def",
        "del",
        "elif",
        "else",
        "except",
        "false",
        "finally",
        "for",
        "from",
        "global",
        "if",
        "import",
        "in",
        "is",
        "lambda",
        "match",
        "none",
        "nonlocal",
        "not",
        "or",
        "pass",
        "raise",
        "return",
        "true",
        "try",
        "while",
        "with",
        "yield",
    )
)


KEYWORD_REASON = (
    "Python keywords (with None, True, False, match and case) are not indexed in code, only in "
    "definition paths and names: indexing them in code would turn a search for a keyword into "
    "a filter on the property the task asks about. These words matched only paths and names; "
    "search other words of the code, or read the results."
)
NO_WORDS_REASON = (
    "the query has no ASCII letters or digits (words are runs of letters and digits; anything "
    "else only separates words), so it lists every definition, as the empty query does."
)
_ECHO = 80


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; identifiers split on ``_``, ``.``, ``/`` and camelCase."""
    out = []
    for raw in re.split(r"[^A-Za-z0-9]+", text):
        if not raw:
            continue
        out.append(raw.lower())
        parts = _WORD.findall(raw)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
    return out


def ignored_terms(query: str) -> list[str]:
    """The distinct terms of ``query`` (as :func:`tokenize` gives them, first occurrence first)
    that are Python keywords, so are not matched against code (module docstring)."""
    out: list[str] = []
    for t in tokenize(query):
        if t in _STOP and t not in out:
            out.append(t)
    return out


def search_feedback(query: str) -> dict | None:
    """The ``ignored`` block of a search result for ``query``, or ``None`` when nothing of it
    was ignored: ``{"terms": [...], "reason": str}``. A pure function of the query text.

    Keyword terms are listed with :data:`KEYWORD_REASON`. A query with visible characters but
    no word lists itself (clipped to 80 characters) with :data:`NO_WORDS_REASON`.
    """
    terms = ignored_terms(query)
    if terms:
        return {"terms": terms, "reason": KEYWORD_REASON}
    text = query.strip()
    if text and not tokenize(text):
        return {
            "terms": [text if len(text) <= _ECHO else text[:_ECHO] + "..."],
            "reason": NO_WORDS_REASON,
        }
    return None


@dataclass(frozen=True)
class Hit:
    ident: str
    kind: str
    signature: str
    location: str
    snippet: str

    def as_dict(self) -> dict:
        return {
            "id": self.ident,
            "kind": self.kind,
            "signature": self.signature,
            "location": self.location,
            "snippet": self.snippet,
        }


class SearchIndex:
    """BM25 index; :meth:`page` returns one page of hits and whether more follow."""

    def __init__(self, definitions: list[Definition], cache_size: int = 256) -> None:
        seen: dict[str, Definition] = {}
        for d in definitions:
            seen.setdefault(d.ident, d)
        docs = [seen[k] for k in sorted(seen)]
        self.hits = [
            Hit(d.ident, d.kind, d.signature, f"{d.path}:{d.line}", d.snippet) for d in docs
        ]
        postings: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        lengths = np.zeros(len(docs))
        for i, d in enumerate(docs):
            toks = tokenize(d.ident) + [t for t in tokenize(d.snippet) if t not in _STOP]
            lengths[i] = len(toks)
            for t in toks:
                postings[t][i] += 1
        n, avg = len(docs), float(lengths.mean()) if len(docs) else 1.0
        self._terms: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, tf_map in postings.items():
            idx = np.fromiter(tf_map.keys(), dtype=np.int64, count=len(tf_map))
            tf = np.fromiter(tf_map.values(), dtype=np.float64, count=len(tf_map))
            idf = math.log(1 + (n - len(idx) + 0.5) / (len(idx) + 0.5))
            w = idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * lengths[idx] / avg))
            self._terms[term] = (idx, w)
        self._n = n
        self._cache: OrderedDict[tuple[str, ...], np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def __len__(self) -> int:
        return self._n

    def ranking(self, query: str) -> np.ndarray:
        """Document order for ``query``: matching docs by score desc, ties by identifier."""
        terms = tuple(sorted(set(tokenize(query))))
        cached = self._cache.get(terms)
        if cached is not None:
            self._cache.move_to_end(terms)
            return cached
        if not terms:
            order = np.arange(self._n)
        else:
            scores = np.zeros(self._n)
            hit = np.zeros(self._n, dtype=bool)
            for t in terms:
                entry = self._terms.get(t)
                if entry is not None:
                    scores[entry[0]] += entry[1]
                    hit[entry[0]] = True
            matched = np.flatnonzero(hit)
            # lexsort: last key is primary; stable tie-break on document (identifier) order.
            order = matched[np.lexsort((matched, -scores[matched]))]
        self._cache[terms] = order
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return order

    def page(self, query: str, page: int) -> tuple[list[Hit], bool, int]:
        """Hits of 1-based ``page`` for ``query``, whether more pages follow, and total matches."""
        order = self.ranking(query)
        start = (page - 1) * PAGE_SIZE
        sel = order[start : start + PAGE_SIZE]
        return [self.hits[i] for i in sel], start + PAGE_SIZE < len(order), int(len(order))
