"""The run folders' names come from `npsco.layout` alone: its paths on exact strings (every run folder on disk was
written with them), and no other module of the package spells one of its file names or joins one of its folders."""

from __future__ import annotations

import ast
from pathlib import Path

from npsco import layout
from npsco.layout import candidate_path, novel_path, reference_path

SRC = Path(__file__).resolve().parents[2] / "src" / "npsco"


def test_the_members_paths_are_the_documented_ones():
    assert reference_path(0) == "refs/ref0"
    assert reference_path(12) == "refs/ref12"
    assert novel_path("ipd-r0x0.5", 3) == "novel/ipd-r0x0.5/k3"
    assert candidate_path("novel/ipd/k3", 0) == "novel/ipd/k3"
    assert candidate_path("novel/ipd/k3", 2) == "novel/ipd/k3-c2"


def test_no_module_but_the_layout_spells_a_run_file_name():
    names = {
        value for key, value in vars(layout).items() if key.endswith(("_FILE", "_TABLE")) and isinstance(value, str)
    }
    assert {"policy.safetensors", "config.json", "manifest.json", "state.safetensors", "evaluation.csv"} <= names
    spelled = [
        f"{path.relative_to(SRC)}:{node.lineno}: {node.value}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "layout.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert spelled == []


def test_no_module_but_the_layout_joins_a_run_folder_name_onto_a_path():
    folders = {value for key, value in vars(layout).items() if key.endswith("_FOLDER")}
    assert {"checkpoints", "tensorboard", "evaluation", "refs", "novel"} <= folders
    joined = [
        f"{path.relative_to(SRC)}:{node.lineno}: / {node.right.value!r}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "layout.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Constant)
        and node.right.value in folders
    ]
    assert joined == []
