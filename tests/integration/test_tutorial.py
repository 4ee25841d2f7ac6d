"""docs/tutorial.md runs: every ```python and ```bash block in order, in one temporary folder, with the tiny budgets
the page names (SB3_STEPS=512, STEPS=2048). It starts from an SB3 Hopper model and must end with three novel policies
and a report whose videos play in Chromium (that block is skipped, saying why, where Chromium is not installed)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import no_browser

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"

pytest.importorskip("stable_baselines3", reason="the tutorial starts from a Stable-Baselines3 model (dev extra)")


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"^```(python|bash)\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_tutorial_runs_end_to_end(tmp_path, monkeypatch, load_script):
    found = blocks()
    assert [kind for kind, _ in found].count("bash") >= 3 and [kind for kind, _ in found].count("python") >= 2
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")  # the page runs from the repository root
    env = {
        **os.environ,
        "SB3_STEPS": "512",
        "STEPS": "2048",
        "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    monkeypatch.setenv("SB3_STEPS", "512")
    namespace: dict = {"__name__": "__tutorial__"}
    skipped = []
    for k, (kind, code) in enumerate(found):
        if kind == "python":
            exec(compile(code, f"docs/tutorial.md block {k + 1}", "exec"), namespace)
            continue
        if "check_report.py" in code and load_script("scripts/check_report.py").find_browser() is None:
            skipped.append(k)
            continue
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"block {k + 1} failed:\n{code}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if "check_report.py" in code:
            assert "2/2 videos playing" in done.stdout, done.stdout
    manifest = json.loads((tmp_path / "runs/tutorial/ipd/manifest.json").read_text())
    assert [(m["name"], m["status"]) for m in manifest["members"]] == [
        ("ref0", "done"),
        ("ipd/k0", "done"),
        ("ipd/k1", "done"),
        ("ipd/k2", "done"),
    ]
    assert manifest["members"][0]["method"] == "sb3-ppo"
    report = (tmp_path / "runs/tutorial/report/report.md").read_text()
    behaviour = tmp_path / "runs/tutorial/report/figures/behaviour"
    videos = sorted(p.stem for p in [*behaviour.glob("*.mp4"), *behaviour.glob("*.gif")])
    assert videos == ["Hopper-v5__population__ipd", "Hopper-v5__population__ppo"]  # a video per method
    assert "figures/distances_Hopper-v5.png" in report
    if skipped:
        no_browser(
            "the report was built but not opened in a browser: Chromium is not installed (apt-get install chromium)"
        )
