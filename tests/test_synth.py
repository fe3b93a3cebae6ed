"""Seeded synthetic repositories (issue 15, section 4): determinism, validity, exact densities
measured with the real RepoScan indexer, and names that do not leak the valid set."""

from __future__ import annotations

import ast
import hashlib
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pushbench.families.reposcan import indexer
from pushbench.families.reposcan.predicates import parse_predicate
from pushbench.families.reposcan.synth import (
    ATOMS,
    DEFAULT_DENSITY,
    GENERATOR_VERSION,
    DensityError,
    generate,
    parse_density,
    render,
    tree_sha256,
)
from pushbench.families.reposcan.synth.measure import measure, measure_files
from pushbench.families.reposcan.synth.plan import target_count


def disk_hash(root: Path) -> str:
    """sha256 of every file under root (paths and bytes), independent of the generator's own."""
    digest = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            digest.update(p.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest()


def assert_exact(stats, measured: dict) -> None:
    """Every atom the indexer/predicates can judge is realised at exactly round(p * defs)."""
    assert measured["defs"] == stats.defs
    for atom in ATOMS:
        want = target_count(stats.density[atom], stats.defs)
        assert stats.counts[atom] == want, atom
        if measured[atom] is not None:
            assert measured[atom] == want, (atom, measured[atom], want)
            assert (
                abs(measured[atom] / stats.defs - stats.density[atom]) <= 0.5 / stats.defs + 1e-12
            )


# ----- determinism ---------------------------------------------------------------------------


def test_same_arguments_same_bytes_different_seed_different(tmp_path):
    args = dict(modules=4, defs=150, density={"docstring": 0.3, "yields": 0.1})
    a = generate(tmp_path / "a", seed=11, **args)
    b = generate(tmp_path / "b", seed=11, **args)
    c = generate(tmp_path / "c", seed=12, **args)
    assert disk_hash(tmp_path / "a") == disk_hash(tmp_path / "b")
    assert a == b
    assert disk_hash(tmp_path / "a") != disk_hash(tmp_path / "c")
    assert a.tree_sha256 != c.tree_sha256
    files, _ = render(seed=11, **args)
    assert tree_sha256(files) == a.tree_sha256
    assert {p: t.encode() for p, t in files.items()} == {
        p.relative_to(tmp_path / "a").as_posix(): p.read_bytes()
        for p in (tmp_path / "a").rglob("*")
        if p.is_file()
    }


def test_output_is_pinned_for_this_generator_version():
    """The bytes for fixed arguments never change silently: a pinned synthetic snapshot relies
    on them. If a change to the generator is intended, bump GENERATOR_VERSION and re-pin."""
    _, stats = render(seed=1, modules=3, defs=200)
    assert stats.generator_version == GENERATOR_VERSION == 1
    assert stats.tree_sha256 == "a6e5d7262b6a7807d4ede0f621d54cc5d3d8370be643ff8c749dcb6e4f93a014"


def test_identical_across_processes_with_different_hash_seeds(tmp_path):
    """String hashing is randomised per process; the output must not depend on it."""
    code = (
        "import sys; from pathlib import Path; "
        "from pushbench.families.reposcan.synth import generate; "
        "print(generate(Path(sys.argv[1]), seed=5, modules=3, defs=120).tree_sha256)"
    )
    hashes = set()
    for i, hash_seed in enumerate(("1", "2", "random")):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / f"r{i}")],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        hashes.add(out.stdout.strip())
        hashes.add(disk_hash(tmp_path / f"r{i}") + "-disk")
    assert len(hashes) == 2  # one generator hash, one disk hash, for all three processes


# ----- valid Python, importable, collectable -------------------------------------------------


def test_every_file_parses_and_the_package_imports_and_tests_collect(tmp_path):
    stats = generate(tmp_path / "repo", seed=2024, modules=5, defs=260)
    root = tmp_path / "repo"
    py = sorted(root.rglob("*.py"))
    assert {p.relative_to(root).as_posix() for p in py} == {
        f for f in stats.files if f.endswith(".py")
    }
    for p in py:
        ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    modules = sorted(p.stem for p in (root / stats.package).glob("*.py") if p.stem != "__init__")
    assert len(modules) == stats.modules
    imports = "; ".join(
        [f"import {stats.package}"] + [f"import {stats.package}.{m}" for m in modules]
    )
    subprocess.run([sys.executable, "-c", imports], cwd=root, check=True)
    # pytest collects every generated test (parametrize names match the signatures).
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "error" not in out.stdout.lower()
    items = [line for line in out.stdout.splitlines() if "::" in line]
    assert len({line.split("[")[0] for line in items}) == stats.counts["test"]


def test_a_fixture_test_takes_the_primary_fixture_and_conftest_defines_it(tmp_path):
    stats = generate(tmp_path / "r", seed=8, modules=3, defs=200)
    conftest = (tmp_path / "r" / "tests" / "conftest.py").read_text()
    assert f"def {stats.primary_fixture}(" in conftest
    pred = parse_predicate(f"fixture:{stats.primary_fixture}")
    facts = indexer.facts_tree(tmp_path / "r")
    users = [f for f in facts if pred.test(f)]
    assert len(users) == stats.counts["fixture"] > 0
    assert all(f.ident.startswith("tests/test_") for f in users)


# ----- exact densities, measured with the real indexer ---------------------------------------

DENSE = {
    "docstring": 0.9,
    "assert": 0.7,
    "returns": 0.8,
    "raises": 0.6,
    "decorated": 0.7,
    "yields": 0.1,
    "async": 0.2,
    "method": 0.6,
    "annotated": 0.9,
    "test": 0.4,
    "fixture": 0.3,
}
SPARSE = {a: 0.0 for a in ATOMS}
HALF = {a: 0.5 for a in ATOMS} | {"yields": 0.2, "fixture": 0.25}


@pytest.mark.parametrize(
    "density", [None, DENSE, SPARSE, HALF], ids=["default", "dense", "zero", "half"]
)
def test_densities_are_exact_on_disk(tmp_path, density):
    stats = generate(tmp_path / "r", seed=99, modules=6, defs=400, density=density)
    assert_exact(stats, measure(tmp_path / "r", stats.primary_fixture))


atom_densities = st.fixed_dictionaries(
    {}, optional={a: st.floats(0, 1) for a in ATOMS if a not in ("test", "fixture")}
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32),
    defs=st.integers(1, 90),
    modules=st.integers(1, 6),
    density=atom_densities,
    test=st.floats(0, 1),
    share=st.floats(0, 1),
)
def test_densities_are_exact_for_any_seed(seed, defs, modules, density, test, share):
    density = density | {"test": test, "fixture": test * share}
    try:
        files, stats = render(seed=seed, modules=modules, defs=defs, density=density)
    except DensityError:
        assume(False)
    for path, text in files.items():
        if path.endswith(".py"):
            ast.parse(text)
    assert_exact(stats, measure_files(files, stats.primary_fixture))
    assert (
        sum(
            1
            for p in files
            if p.startswith(f"{stats.package}/") and p != f"{stats.package}/__init__.py"
        )
        == modules
    )


def test_default_densities_are_always_feasible():
    for defs in (1, 2, 5, 17, 100):
        for seed in range(5):
            _, stats = render(seed=seed, modules=3, defs=defs)
            assert sum(stats.roles.values()) == defs


# ----- bad input -----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    density=st.dictionaries(
        st.text(max_size=12) | st.sampled_from(ATOMS),
        st.floats(allow_nan=True, allow_infinity=True)
        | st.integers(-3, 3)
        | st.booleans()
        | st.none()
        | st.text(max_size=3),
        max_size=4,
    )
)
def test_any_density_mapping_is_realised_or_refused_clearly(density):
    try:
        files, stats = render(seed=1, modules=2, defs=30, density=density)
    except DensityError as exc:
        assert str(exc)
        return
    assert_exact(stats, measure_files(files, stats.primary_fixture))


@given(st.dictionaries(st.sampled_from(ATOMS), st.floats(0, 1), max_size=len(ATOMS)))
def test_density_text_round_trips(density):
    text = ", ".join(f"{k} = {v!r}" for k, v in density.items())
    assert parse_density(text) == density


@given(st.text(alphabet="adeiorstxn=,.0123456789 -", max_size=40) | st.text(max_size=20))
def test_any_density_text_parses_or_is_refused_clearly(text):
    try:
        parsed = parse_density(text)
    except DensityError as exc:
        assert str(exc)
        return
    assert set(parsed) <= set(ATOMS)
    assert all(0 <= v <= 1 for v in parsed.values())


@pytest.mark.parametrize(
    "text, match",
    [
        ("docstring", "not ATOM=FRACTION"),
        ("docstring=0.1,docstring=0.2", "twice"),
        ("docstring=x", "number"),
        ("nope=0.1", "unknown density atom 'nope'"),
        ("raises=1.01", r"\[0, 1\]"),
        ("raises=nan", r"\[0, 1\]"),
        ("a=0.1,,b=0.2", "ATOM=FRACTION"),
    ],
)
def test_bad_density_text_names_the_problem(text, match):
    with pytest.raises(DensityError, match=match):
        parse_density(text)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"seed": True}, "seed"),
        ({"seed": 1, "defs": 0}, "defs"),
        ({"seed": 1, "modules": 0}, "modules"),
        ({"seed": 1, "density": {"docstrings": 0.5}}, "unknown density atom 'docstrings'"),
        ({"seed": 1, "density": {"raises": 1.5}}, r"\[0, 1\]"),
        ({"seed": 1, "density": {"test": 0.1, "fixture": 0.2}}, "only tests use fixtures"),
        (
            {
                "seed": 1,
                "defs": 50,
                "density": {"async": 0.6, "yields": 0.6, "returns": 0.9, "test": 0, "fixture": 0},
            },
            "async generator",
        ),
        ({"seed": 1, "defs": 50, "density": {"yields": 0.9}}, "'yields' asks for 45"),
    ],
)
def test_bad_arguments_raise_before_writing(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate(tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary folder left behind


def test_an_existing_folder_is_never_overwritten(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        generate(dest, seed=1, defs=20)
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert generate(empty, seed=1, defs=20).defs == 20


# ----- names do not leak validity ------------------------------------------------------------


def name_tokens(name: str) -> list[str]:
    return [t for t in re.split(r"_+", name.lower()) if t and t != "test"]


def leak_report(
    names: list[str], labels: list[bool], min_count: int = 25, z_limit: float = 5.0
) -> tuple[list[str], float, float]:
    """(tokens far more or less frequent among valid names than chance allows, held-out
    accuracy of a naive Bayes classifier on name tokens, majority-class accuracy)."""
    n, k = len(labels), sum(labels)
    p = k / n
    counts: Counter = Counter()
    valid: Counter = Counter()
    for name, label in zip(names, labels, strict=True):
        for tok in set(name_tokens(name)):
            counts[tok] += 1
            valid[tok] += label
    flagged = []
    if 0 < p < 1:
        for tok in sorted(counts):
            m = counts[tok]
            if m >= min_count and abs(valid[tok] - m * p) / math.sqrt(m * p * (1 - p)) > z_limit:
                flagged.append(tok)
    # Naive Bayes trained on even positions, scored on odd ones.
    train = [(names[i], labels[i]) for i in range(0, n, 2)]
    test = [(names[i], labels[i]) for i in range(1, n, 2)]
    tok_class: dict[bool, Counter] = {True: Counter(), False: Counter()}
    cls = Counter(label for _, label in train)
    for name, label in train:
        tok_class[label].update(set(name_tokens(name)))
    vocab_size = len(set(tok_class[True]) | set(tok_class[False])) + 1

    def score(name, label):
        s = math.log((cls[label] + 1) / (len(train) + 2))
        for tok in set(name_tokens(name)):
            s += math.log((tok_class[label][tok] + 1) / (cls[label] + vocab_size))
        return s

    correct = sum((score(nm, True) > score(nm, False)) == lab for nm, lab in test)
    majority = max(sum(lab for _, lab in test), len(test) - sum(lab for _, lab in test))
    return flagged, correct / len(test), majority / len(test)


def test_the_leak_check_catches_a_leaky_naming():
    """Control: names that encode the property are caught by both checks."""
    files, stats = render(seed=3, modules=8, defs=1200)
    facts = [
        f for p in sorted(files) if p.endswith(".py") for f in indexer.facts_in_source(files[p], p)
    ]
    labels = [f.docstring for f in facts]
    leaky = [f.name + ("_documented" if f.docstring and i % 3 else "") for i, f in enumerate(facts)]
    flagged, acc, base = leak_report(leaky, labels)
    assert "documented" in flagged
    assert acc > base + 0.1


@pytest.mark.parametrize("seed", [3, 4])
def test_names_do_not_leak_any_atom(seed):
    """Within each role (tests, everything else) a definition's name says nothing about its
    atoms. Across roles it can: tests assert more and return less than library code, and a
    test is recognisable by its name (and path), which is the definition of `test`."""
    files, stats = render(seed=seed, modules=8, defs=1500)
    facts, kinds = [], []
    for p in sorted(files):
        if p.endswith(".py"):
            facts += indexer.facts_in_source(files[p], p)
            kinds += [d.kind for d in indexer.definitions_in_source(files[p], p)]
    judged = {
        atom: parse_predicate(stats.spec(atom))
        for atom in ("docstring", "assert", "returns", "raises", "decorated", "fixture")
    }
    labels = {atom: [pred.test(f) for f in facts] for atom, pred in judged.items()}
    labels["async"] = [k.startswith("async") for k in kinds]
    labels["method"] = [k.endswith("method") for k in kinds]
    checked = 0
    for is_test in (True, False):
        rows = [i for i, f in enumerate(facts) if f.name.startswith("test") == is_test]
        for atom, lab in labels.items():
            sub = [lab[i] for i in rows]
            if sum(sub) < 20 or len(sub) - sum(sub) < 20:
                continue  # (nearly) constant in this role: nothing to leak
            flagged, acc, base = leak_report([facts[i].name for i in rows], sub)
            assert flagged == [], (is_test, atom, flagged)
            assert acc <= base + 0.03, (is_test, atom, acc, base)
            checked += 1
    assert checked >= 10


def test_default_density_table_is_the_documented_one():
    assert set(DEFAULT_DENSITY) == set(ATOMS)
    assert all(0 <= v <= 1 for v in DEFAULT_DENSITY.values())


def test_the_shipped_synthetic_family_builds_from_its_pins_and_keeps_its_valid_sets(
    tmp_path, monkeypatch
):
    """``tasks/synth`` ships RepoScan-synth-*: in an empty cache every instance regenerates
    from its pin, and the environment's own valid-set check (count and sha256) passes."""
    import json

    from gymnasium.utils.env_checker import check_env

    import pushbench
    from pushbench import tasks, userdata

    monkeypatch.setenv("PUSHBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(userdata.ENV_VAR, raising=False)
    tasks.reload()
    try:
        shipped = tasks.user_instances()
        names = sorted(
            n
            for n, (_, where) in shipped.items()
            if Path(where).parent.resolve() == userdata.shipped_dir().resolve()
        )
        assert names and all(n.startswith("synth-") for n in names)
        suite = tasks.get_task("RepoScan-synth-N10")
        assert sorted(suite.instances) == names
        for name in names:
            env = pushbench.make(f"RepoScan-{name}-N10")
            obs, _ = env.reset(seed=0)  # raises if the regenerated valid set differs from the pin
            assert name.split("-")[1] in json.loads(obs)["result"]["objective"]
            env.close()
        env = pushbench.make(f"RepoScan-{names[0]}-N10", controller="stateqgp")
        check_env(env.unwrapped, skip_render_check=True)
        env.close()
    finally:
        monkeypatch.undo()
        tasks.reload()
