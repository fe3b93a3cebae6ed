"""The hidden verifier: identifier well-formedness at its edges, verdicts, digest, secrecy.

These are the fast tests `experiments/mutation_score.py` runs against
`pushbench/families/reposcan/verifier.py`;
each boundary here is one a mutant of the verifier moved (the length limit, the control
character ranges, the path-trick checks, duplicate and acceptance bookkeeping).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pushbench
from pushbench.families.reposcan import verifier
from pushbench.families.reposcan.verifier import (
    ACCEPTED,
    DUPLICATE,
    MALFORMED,
    MAX_IDENT_LEN,
    REJECTED,
    Verifier,
    digest,
    is_well_formed,
)

CONTROL = [chr(c) for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]]  # C0, DEL, C1
# Where a character can sit in `<path>.py::<name>`: each is a separate branch of the pattern.
POSITIONS = {
    "leading": lambda c: f"{c}src/a.py::f",
    "path": lambda c: f"src/a{c}b.py::f",
    "before_ext": lambda c: f"src/a{c}.py::f",
    "name": lambda c: f"src/a.py::f{c}g",
    "trailing": lambda c: f"src/a.py::f{c}",
}


def _ident_of_length(n: int) -> str:
    """A well-formed identifier shape of exactly ``n`` characters."""
    head = "src/mod.py::f"
    return head + "x" * (n - len(head))


# ----- the length limit ------------------------------------------------------------------------


def test_length_limit_is_inclusive():
    assert MAX_IDENT_LEN == 512
    at, over = _ident_of_length(MAX_IDENT_LEN), _ident_of_length(MAX_IDENT_LEN + 1)
    assert len(at) == 512 and len(over) == 513
    assert is_well_formed(at)
    assert not is_well_formed(over)
    assert is_well_formed(_ident_of_length(MAX_IDENT_LEN - 1))
    # a long path counts as much as a long name
    long_path = "d/" * 250 + "m.py::f"
    assert len(long_path) == 507 and is_well_formed(long_path)
    assert not is_well_formed("d/" * 254 + "m.py::f")  # 515


def test_judge_applies_the_length_limit():
    at, over = _ident_of_length(512), _ident_of_length(513)
    v = Verifier(frozenset({at, over}))  # even an over-long id in the set is never accepted
    assert v.judge(over) == MALFORMED
    assert v.judge(at) == ACCEPTED
    assert v.valid_count == 1


# ----- characters that never appear in an identifier -----------------------------------------


@pytest.mark.parametrize("where", sorted(POSITIONS))
@pytest.mark.parametrize("char", CONTROL, ids=lambda c: f"U+{ord(c):04X}")
def test_control_characters_anywhere_are_malformed(char, where):
    assert not is_well_formed(POSITIONS[where](char))


@pytest.mark.parametrize("where", ["leading", "path", "before_ext"])
@pytest.mark.parametrize(
    "char", [" ", "~", "\xa0", "\xa1", "\u00e9", "\u2028"], ids=lambda c: f"U+{ord(c):04X}"
)
def test_printable_neighbours_of_the_control_ranges_are_fine_in_paths(char, where):
    # The ranges end exactly at 0x1f, 0x7f and 0x9f: their neighbours are ordinary path text.
    assert is_well_formed(POSITIONS[where](char))


@pytest.mark.parametrize(
    "ident",
    [
        "..a.py::f",
        "../a.py::f",
        "a/../b.py::f",
        "a/..b.py::f",
        "a..b.py::f",
        "a/b..py::f",
        "a.py::f..g",
        "a.py::..f",
        "src/x/...py::f",
        "a.py::f..",
    ],
)
def test_double_dot_anywhere_is_malformed(ident):
    assert not is_well_formed(ident)


def test_single_dots_are_fine():
    for ident in ("a.b.py::f", "./a.py::f", "a/.hidden/b.py::f", "a.py::C.m", ".a.py::f"):
        assert is_well_formed(ident), ident


@pytest.mark.parametrize(
    "ident", ["\\a.py::f", "a\\b.py::f", "a\\.py::f", "a.py::f\\", "a.py::\\f", "a.py\\::f"]
)
def test_backslashes_anywhere_are_malformed(ident):
    assert not is_well_formed(ident)


@pytest.mark.parametrize("ident", ["/a.py::f", "//a.py::f", "/src/a.py::f"])
def test_a_leading_slash_is_malformed(ident):
    assert not is_well_formed(ident)
    assert is_well_formed(ident.lstrip("/"))


@pytest.mark.parametrize(
    "ident", [None, 7, 7.0, b"a.py::f", ["a.py::f"], ("a.py::f",), {"a.py::f"}, object()]
)
def test_non_strings_are_malformed(ident):
    assert not is_well_formed(ident)
    assert Verifier(frozenset({"a.py::f"})).judge(ident) == MALFORMED


# ----- verdicts --------------------------------------------------------------------------------


def test_verdict_sequence():
    v = Verifier(frozenset({"a.py::f", "a.py::g"}))
    assert v.valid_count == 0
    assert [
        v.judge(i)
        for i in ("a.py::f", "b.py::h", "a.py::f", "b.py::h", "a..py::f", "a..py::f", "a.py::g")
    ] == [ACCEPTED, REJECTED, DUPLICATE, DUPLICATE, MALFORMED, MALFORMED, ACCEPTED]
    assert v.valid_count == 2
    assert (ACCEPTED, DUPLICATE, REJECTED, MALFORMED) == (
        "accepted",
        "duplicate",
        "rejected",
        "malformed",
    )


def test_valid_count_counts_only_acceptances():
    v = Verifier(frozenset({"a.py::f"}))
    v.judge("b.py::x")
    v.judge("a.py::f")
    v.judge("a.py::f")
    v.judge("/bad.py::x")
    assert v.valid_count == 1


def test_repr_shows_counts_never_identifiers():
    v = Verifier(frozenset({"secret/one.py::hidden_name"}))
    assert repr(v) == "Verifier(accepted=0, submitted=0)"
    v.judge("secret/one.py::hidden_name")
    v.judge("other.py::x")
    v.judge("../m.py::x")  # malformed: not submitted
    assert repr(v) == "Verifier(accepted=1, submitted=2)"
    assert "hidden" not in repr(v) and "hidden" not in str(v)
    with pytest.raises(TypeError):  # __slots__: no instance dict to dump by accident
        vars(v)


def test_digest_is_sha256_of_sorted_newline_joined_ids():
    assert digest({"b.py::g", "a.py::f"}) == hashlib.sha256(b"a.py::f\nb.py::g").hexdigest()
    assert digest({"a.py::f"}) == hashlib.sha256(b"a.py::f").hexdigest()
    assert digest(set()) == hashlib.sha256(b"").hexdigest()
    assert (
        digest(frozenset({"caf\u00e9.py::f"}))
        == hashlib.sha256("caf\u00e9.py::f".encode()).hexdigest()
    )


# ----- properties over arbitrary input ---------------------------------------------------------

_NAME = st.from_regex(
    r"[A-Za-z_][A-Za-z0-9_]{0,12}(\.[A-Za-z_][A-Za-z0-9_]{0,12}){0,3}", fullmatch=True
)
_SEGMENT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\."),
    min_size=1,
    max_size=12,
)
_WELL_FORMED = st.builds(
    lambda segs, name: "/".join(segs) + ".py::" + name,
    st.lists(_SEGMENT, min_size=1, max_size=4),
    _NAME,
)


@settings(max_examples=300, deadline=None)
@given(_WELL_FORMED)
def test_generated_identifiers_are_well_formed(ident):
    assert is_well_formed(ident) == (len(ident) <= MAX_IDENT_LEN)


@settings(max_examples=300, deadline=None)
@given(_WELL_FORMED, st.sampled_from(CONTROL + ["\\", ".."]), st.data())
def test_inserting_a_forbidden_character_anywhere_makes_it_malformed(ident, bad, data):
    at = data.draw(st.integers(0, len(ident)))
    assert not is_well_formed(ident[:at] + bad + ident[at:])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_well_formed_text_has_none_of_the_forbidden_features(text):
    if is_well_formed(text):
        assert len(text) <= MAX_IDENT_LEN and ".." not in text and "\\" not in text
        assert not text.startswith("/") and ".py::" in text
        assert not any(c in text for c in CONTROL)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_WELL_FORMED, st.text(max_size=20)), max_size=30), st.data())
def test_verdicts_follow_the_reference_model(submissions, data):
    pool = [s for s in submissions if is_well_formed(s)]
    valid = frozenset(data.draw(st.lists(st.sampled_from(pool), unique=True)) if pool else [])
    v = Verifier(valid)
    seen: set[str] = set()
    accepted: set[str] = set()
    for s in submissions:
        if not is_well_formed(s):
            expected = MALFORMED
        elif s in seen:
            expected = DUPLICATE
        else:
            seen.add(s)
            expected = ACCEPTED if s in valid else REJECTED
            if expected == ACCEPTED:
                accepted.add(s)
        assert v.judge(s) == expected
        assert v.valid_count == len(accepted)


# ----- what the environment echoes -------------------------------------------------------------


def test_env_echoes_ids_up_to_the_limit_and_clips_longer_ones():
    env = pushbench.make("RepoScan-flask-decorated-N10")
    env.reset(seed=0)
    at, over = _ident_of_length(512), _ident_of_length(513)
    huge = "a" * 50_000
    obs, *_ = env.step({"tool": "submit", "ids": [at, over, huge]})
    verdicts = json.loads(obs)["result"]["verdicts"]
    assert verdicts[0] == {"id": at, "verdict": "rejected"}
    assert verdicts[1] == {"id": over[:200] + "...", "verdict": "malformed"}
    assert verdicts[2] == {"id": "a" * 200 + "...", "verdict": "malformed"}
    assert len(obs) < 2_000
    assert verifier.MAX_IDENT_LEN == 512  # the env clips by the verifier's own constant
