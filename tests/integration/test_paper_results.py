"""The table of docs/results/paper.md is the committed campaign report's numbers: each of its rows is
recomputed here from `benchmarks/results/paper/report/evaluation.csv` (one line per policy)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from npsco.stats import iqm

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "benchmarks" / "results" / "paper" / "report" / "evaluation.csv"
TASKS = {"Hopper": "Hopper-v5", "Walker2d": "Walker2d-v5", "HalfCheetah": "HalfCheetah-v5"}


def group_of_label(label: str) -> str:
    """The report's group for a README method label, e.g. `IPD at 0.5x` -> `ipd-r0x0.5`, `TNB (4 of 5)` -> `tnb`."""
    label = re.sub(r"\s*\(.*\)$", "", label.replace("*", "")).strip()
    if label.startswith("IPD at "):
        scale = label.removeprefix("IPD at ").removesuffix("x")
        return "ipd" if scale == "1" else f"ipd-r0x{scale}"
    return label.lower()


def readme_rows() -> list[list[str]]:
    text = (ROOT / "docs" / "results" / "paper.md").read_text(encoding="utf-8")
    section = text
    section = section[section.index("| task | method | ours: reward") :]
    lines = section.split("\n\n", 1)[0].splitlines()[2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_readme_table_matches_the_committed_report():
    rows = list(csv.DictReader(CSV.open(encoding="utf-8")))
    table = readme_rows()
    assert len(table) >= 12
    for task, method, reward, iqm_ci, success, novelty, *_ in table:
        group = group_of_label(method)
        policies = [r for r in rows if r["task"] == TASKS[task] and r["group"] == group]
        assert policies, f"{task} {method}: no such group {group!r} in the report"
        returns = np.array([float(r["return_mean"]) for r in policies])
        mean, std = (float(x) for x in re.findall(r"[\d.]+", reward.replace("*", "")))
        assert mean == pytest.approx(returns.mean(), abs=0.5), f"{task} {method}: mean"
        assert std == pytest.approx(returns.std(), abs=0.5), f"{task} {method}: std"
        assert float(iqm_ci.split()[0]) == pytest.approx(iqm(returns), abs=0.5), f"{task} {method}: IQM"
        during, final = (float(x) for x in success.split(","))
        assert during == pytest.approx(np.mean([r["success"] == "True" for r in policies]), abs=0.005)
        assert final == pytest.approx(np.mean([r["success_final"] == "True" for r in policies]), abs=0.005)
        rel = np.mean([float(r["relative_novelty_paper"]) for r in policies])
        assert float(novelty) == pytest.approx(rel, abs=0.005), f"{task} {method}: relative novelty"


def test_group_of_label():
    assert group_of_label("PPO (5 references)") == "ppo"
    assert group_of_label("TNB (4 of 5)") == "tnb"
    assert group_of_label("IPD at 1x") == "ipd" and group_of_label("IPD at 0.5x") == "ipd-r0x0.5"


def test_the_new_methods_rows_are_the_development_chains_measurement():
    """docs/results/paper.md's table of the new methods repeats benchmarks/results/novel_everywhere/dev.md's
    "Beside the paper campaign's methods" rows (made by its measure.py from npsco's evaluation)."""
    text = (ROOT / "docs" / "results" / "paper.md").read_text(encoding="utf-8")
    section = text[text.index("| task | new method |") :].split("\n\n", 1)[0].splitlines()[2:]
    ours = [[cell.strip() for cell in line.strip("|").split("|")] for line in section]
    dev = (ROOT / "benchmarks" / "results" / "novel_everywhere" / "dev.md").read_text(encoding="utf-8")
    settings = {"Lagrangian, state distance": "lagr-state", "reward switching (RSPO)": "rspo"}
    assert len(ours) == 6 and {row[1] for row in ours} == set(settings)
    for task, method, reward, iqm_ci, success, novelty in ours:
        block = dev[dev.index(f"### {TASKS[task]}") :].split("\n\n", 2)[1]
        row = next(line for line in block.splitlines() if line.startswith(f"| {settings[method]} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[2:6] == [reward, iqm_ci, success, novelty], (task, method)
