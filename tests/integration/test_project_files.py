"""The repository stands on its own and its numbers are traceable: every link of README.md and docs/ reaches a file of
the repository, every results file they name exists and says the command that made it, every test they cite exists,
no file mentions a file outside the repository, and every declared dependency is used."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
RESULTS = re.compile(r"benchmarks/results/[\w./-]+\.(?:md|json|csv)")
CITED_TEST = re.compile(r"((?:tests/[\w/]+/)?test_\w+\.py)(?:::(\w+))?")
"""A test a page cites: `test_x.py`, `tests/unit/test_x.py`, with `::test_name` or not."""
COMMAND = re.compile(r"python benchmarks/[\w/]+\.py|npsco (?:train|population|evaluate|experiment|sweep|report)")


def tracked_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / n for n in names.split("\0") if n and (REPO / n).is_file()]


def links(page: Path) -> list[tuple[str, Path]]:
    """(link as written, file it points to) of every relative link of a page (anchors dropped)."""
    out = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        out.append((target, (page.parent / target.split("#")[0]).resolve()))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_reaches_a_file_of_the_repository(page):
    broken = [t for t, path in links(page) if not path.exists() or REPO not in (path, *path.parents)]
    assert not broken, f"{page.name}: links to nothing in the repository: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_results_file_a_page_names_exists_and_names_its_command(page):
    text = page.read_text(encoding="utf-8")
    named = {REPO / m for m in RESULTS.findall(text)}
    named |= {p for _, p in links(page) if "benchmarks/results" in str(p)}
    missing = sorted(str(p.relative_to(REPO)) for p in named if not p.exists())
    assert not missing, f"{page.name} names results files that do not exist: {missing}"
    silent = sorted(
        str(p.relative_to(REPO))
        for p in named
        if p.suffix == ".md" and not COMMAND.search(p.read_text(encoding="utf-8"))
    )
    assert not silent, f"results files that do not say the command that made them: {silent}"


def cited_tests(text: str) -> list[str]:
    """The tests `text` cites that do not exist: a file under tests/ (a bare name found in any of its folders), and the
    function `::name` in it (a test of that name, or a function it parametrizes)."""
    missing = []
    for file, name in CITED_TEST.findall(text):
        paths = [REPO / file] if "/" in file else sorted((REPO / "tests").rglob(file))
        paths = [path for path in paths if path.exists()]
        if not paths:
            missing.append(file)
        elif name and not any(re.search(rf"^(?:async )?def {name}\(", p.read_text(), re.M) for p in paths):
            missing.append(f"{file}::{name}")
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_test_a_page_cites_exists(page):
    missing = cited_tests(page.read_text(encoding="utf-8"))
    assert not missing, f"{page.name} cites tests that do not exist: {missing}"


def test_the_test_check_finds_a_missing_file_and_a_missing_function():
    found = "`test_forward.py::test_the_bits_are_pinned_on_every_processor`, `tests/unit/test_policy.py`"
    assert cited_tests(found) == []
    assert cited_tests("`test_nothing_here.py`, `test_forward.py::test_that_does_not_exist`") == [
        "test_nothing_here.py",
        "test_forward.py::test_that_does_not_exist",
    ]


def test_the_link_check_finds_a_missing_results_file(tmp_path):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text("[results](../benchmarks/results/nothing.md)\n")
    assert [t for t, p in links(page) if not p.exists()] == ["../benchmarks/results/nothing.md"]


OUTSIDE = [re.compile(p) for p in (r"DESIGN\.md", r"\.\./shared", r"(?<![\w.])/work/", r"/tmp/(?:site|npsco)")]


def test_no_file_mentions_a_file_outside_the_repository():
    found = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for pattern in OUTSIDE:
            for m in pattern.finditer(text) if path.name != Path(__file__).name else ():
                found.append(f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}")
    assert not found, "\n".join(found[:20])


IMPORT_NAMES = {"gymnasium[mujoco]": ["gymnasium"], "tensorboard": ["torch.utils.tensorboard"]}  # mujoco: via gymnasium


def test_every_declared_dependency_is_imported_by_npsco():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "src" / "npsco").rglob("*.py"))
    unused = []
    for requirement in project["dependencies"]:
        name = re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0]
        modules = IMPORT_NAMES.get(name, [name.replace("-", "_")])
        for module in modules:
            if not re.search(rf"^\s*(?:import|from) {re.escape(module)}\b", source, re.MULTILINE):
                unused.append(f"{requirement} ({module})")
    assert not unused, f"declared dependencies that nothing in src/npsco imports: {unused}"
