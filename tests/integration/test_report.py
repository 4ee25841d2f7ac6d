"""`npsco experiment` / `report` / `render` end to end with tiny budgets: a real maze experiment (2 PPO references in
their own population run, IPD at r0 x1 and x2 borrowing them, 2048 steps each, 2 workers) built once, its report
checked section by section; and a filmstrip of an (untrained) Hopper policy rendered offscreen."""

import csv
import os
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import no_browser
from PIL import Image

from npsco.cli import main

os.environ.setdefault("MUJOCO_GL", "egl")

SECTIONS = [
    "# npsco report",
    "## Table 1: reward, success rate and relative novelty",
    "## Novelty",
    "## Who is near whom: action distances",
    "## Fig. 2: Four Reward Maze trajectories",
    "## Fig. 3: relative novelty and reward",
    "## Fig. 4: threshold ablation",
    "## Training curves",
    "## Behaviour",
    "## Per-policy results",
    "## Configuration and commands",
]
PNG = b"\x89PNG\r\n\x1a\n"


EXPERIMENT = [
    "--refs",
    "2",
    "--novel",
    "1",
    "--steps",
    "2048",
    "--methods",
    "ipd",
    "--ablation",
    "2",
    "--episodes",
    "20",
    "--workers",
    "2",
]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("experiment").resolve() / "exp"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(out.parent)  # as scripts/main.sh: `npsco experiment --out runs/main` from the repository
        assert main(["experiment", "--out", "exp", *EXPERIMENT]) == 0
    return out


def test_experiment_layout(experiment):
    task = experiment / "FourRewardMaze-v0"
    assert (task / "ppo" / "manifest.json").exists() and (task / "ipd" / "manifest.json").exists()
    assert (task / "ipd" / "evaluation" / "evaluation.csv").exists()
    with open(experiment / "report" / "evaluation.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # the references once (borrowed by the ipd run), then one policy per IPD chain
    assert [(r["name"], r["group"], r["r0_scale"]) for r in rows] == [
        ("ref0", "ppo", ""),
        ("ref1", "ppo", ""),
        ("ipd-r0x0.5/k0", "ipd", "0.5"),
        ("ipd-r0x2/k0", "ipd-r0x2", "2.0"),
    ]
    assert all(r["episodes"] == "20" and r["relative_novelty"] for r in rows)


def test_report_has_every_section_and_real_images(experiment):
    report = experiment / "report"
    text = (report / "report.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    for section in SECTIONS:
        assert section in headings, section
    assert headings.index(SECTIONS[1]) < headings.index(SECTIONS[3]) < headings.index(SECTIONS[5])
    images = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    for name in (
        "fig2_maze_trajectories.png",
        "fig3_novelty_reward.png",
        "fig4_threshold_ablation.png",
        "curves_FourRewardMaze-v0.png",
        "distances_FourRewardMaze-v0.png",
    ):
        assert f"figures/{name}" in images
    assert sum(i.startswith("figures/behaviour/") for i in images) == 4  # one filmstrip per policy
    for image in images:
        data = (report / image).read_bytes()
        assert data.startswith(PNG) and len(data) > 500, image
        with Image.open(report / image) as picture:
            assert np.asarray(picture.convert("L")).std() > 5, image  # not a blank picture
    html = (report / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(images)
    assert '<h2 id="table-1-reward-success-rate-and-relative-novelty">' in html
    assert '<nav class="toc">' in html and '<a href="#behaviour">Behaviour</a>' in html
    assert html.count("<details") == html.count("</details>") > 5  # per task and per method
    # a population video per method (PPO, IPD, IPD at r0 x 2): MP4 where imageio-ffmpeg is installed (the dev
    # extra), else GIF
    videos = sorted((report / "figures" / "behaviour").glob("*.mp4")) or sorted(
        (report / "figures" / "behaviour").glob("*.gif")
    )
    assert sorted(v.stem for v in videos) == [f"FourRewardMaze-v0__population__{g}" for g in ("ipd", "ipd-r0x2", "ppo")]
    if videos[0].suffix == ".mp4":
        assert html.count('<video src="data:video/mp4;base64,') == 3 and text.count("<video src=") == 3


def test_every_figure_has_svg_and_pdf_and_every_table_csv_and_latex(experiment):
    report = experiment / "report"
    figures = sorted(p.stem for p in (report / "figures").glob("*.png"))
    assert figures == sorted(
        [
            "fig2_maze_trajectories",
            "fig3_novelty_reward",
            "fig4_threshold_ablation",
            "curves_FourRewardMaze-v0",
            "distances_FourRewardMaze-v0",
        ]
    )
    for name in figures:
        svg = (report / "figures" / f"{name}.svg").read_text()
        assert svg.lstrip().startswith("<?xml") and "<svg" in svg, name
        assert (report / "figures" / f"{name}.pdf").read_bytes().startswith(b"%PDF"), name
    text = (report / "report.md").read_text()
    for name in ("table1", "table1_iqm", "novelty", "maze_goals", "policies_FourRewardMaze-v0"):
        with open(report / f"{name}.csv", newline="") as f:
            rows = list(csv.reader(f))
        tex = (report / f"{name}.tex").read_text()
        assert tex.startswith("\\begin{tabular}") and tex.count(" \\\\\n") == len(rows), name  # header + rows
        assert f"[{name}.csv]({name}.csv)" in text, name
    with open(report / "table1.csv", newline="") as f:
        table1 = list(csv.DictReader(f))
    assert [(r["Task"], r["Method"], r["policies"]) for r in table1] == [
        ("FourRewardMaze-v0", "ppo", "2"),
        ("FourRewardMaze-v0", "ipd", "1"),
        ("FourRewardMaze-v0", "ipd-r0x2", "1"),
    ]
    with open(report / "policies_FourRewardMaze-v0.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 4


def test_the_distance_heatmap_holds_every_pair_of_the_task(experiment):
    rows = (experiment / "report" / "distances_FourRewardMaze-v0.csv").read_text().splitlines()
    assert rows[0] == "policy,group,ref0,ref1,ipd-r0x0.5/k0,ipd-r0x2/k0"
    values = np.array([[float(v) for v in line.split(",")[2:]] for line in rows[1:]])
    assert values.shape == (4, 4) and np.all(np.diag(values) == 0) and np.all(values[~np.eye(4, dtype=bool)] > 0)
    # the pairs of one run are the run's own evaluation numbers
    import json

    doc = json.loads((experiment / "FourRewardMaze-v0" / "ipd" / "evaluation" / "evaluation.json").read_text())
    block = doc["action_distance_matrix"]
    assert block["names"] == ["ref0", "ref1", "ipd-r0x0.5/k0", "ipd-r0x2/k0"]
    np.testing.assert_allclose(values, block["matrix"], atol=1e-6)


def test_report_html_renders_and_its_videos_play_in_chromium(experiment, tmp_path, load_script):
    check = load_script("scripts/check_report.py")
    if check.find_browser() is None:
        no_browser("Chromium is not installed (apt-get install chromium): report.html not checked in a browser")
    shot = tmp_path / "report.png"
    assert check.main([str(experiment / "report" / "report.html"), "--screenshot", str(shot)]) == 0
    found = check.check(
        experiment / "report" / "report.html", None, figures=tmp_path / "shots", match=["population video", "of ref0"]
    )
    mp4 = bool(list((experiment / "report" / "figures" / "behaviour").glob("*.mp4")))
    assert found["ok"] and len(found["videos"]) == (3 if mp4 else 0) and all(i["ok"] for i in found["images"])
    # 2 references, then 2 references and a policy: tiles of 160 pixels side by side
    assert sorted(v["width"] for v in found["videos"]) == ([326, 488, 488] if mp4 else [])
    assert all(v["time"] > 0 for v in found["videos"])
    assert found["details"] > 5 and found["links"] > 10 and not found["broken_links"]
    with Image.open(shot) as picture:
        assert picture.size[0] == 1200 and picture.size[1] > 3000  # the whole page, every section open
    # the figures asked for, each as its own picture; a video at its first frame, half-way and at its last
    saved = sorted(Path(p).name for p in found["figures"])
    videos = [
        f"population-video-fourrewardmaze-v0-{g}.{at}.png"
        for g in ("ipd", "ipd-r0x2", "ppo")
        for at in ("first", "middle", "last")
    ]
    assert saved == sorted(["filmstrip-of-ref0.png", *(videos if mp4 else [])])
    with Image.open(tmp_path / "shots" / "filmstrip-of-ref0.png") as picture:
        assert picture.size[0] > 6 * 160 and np.asarray(picture.convert("L")).std() > 5


def test_the_browser_check_fails_on_a_broken_video(tmp_path, load_script):
    check = load_script("scripts/check_report.py")
    if check.find_browser() is None:
        no_browser("Chromium is not installed (apt-get install chromium)")
    from npsco.report.document import Heading, Video, to_html

    (tmp_path / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + bytes(200))
    (tmp_path / "page.html").write_text(to_html([Heading("x"), Video("broken.mp4", "broken")], "x", tmp_path))
    assert check.main([str(tmp_path / "page.html"), "--timeout", "2"]) == 1


def test_the_browser_check_fails_on_a_link_to_no_heading(tmp_path, load_script, capsys):
    check = load_script("scripts/check_report.py")
    if check.find_browser() is None:
        no_browser("Chromium is not installed (apt-get install chromium)")
    (tmp_path / "page.html").write_text('<h2 id="a">a</h2><a href="#a">a</a> <a href="#gone">gone</a>')
    assert check.main([str(tmp_path / "page.html")]) == 1
    assert "problem: link #gone leads to no heading" in capsys.readouterr().out


def test_table_1_has_a_row_per_method_and_the_commands_are_listed(experiment):
    text = (experiment / "report" / "report.md").read_text()
    table = text.split("## Table 1")[1].split("## Novelty")[0]
    first_table = next(block for block in table.split("\n\n") if block.startswith("| "))
    main_rows = [[c.strip() for c in line.split("|")[1:-1]] for line in first_table.splitlines()]
    assert main_rows[0] == [
        "Task",
        "Method",
        "policies",
        "reward",
        "success (paper: during training)",
        "success (final policy)",
        "relative novelty (paper: / PPO novelty)",
        "relative novelty (/ PPO pairwise distance)",
    ]
    assert [r[:3] for r in main_rows[2:]] == [
        ["FourRewardMaze-v0", "ppo", "2"],
        ["FourRewardMaze-v0", "ipd", "1"],
        ["FourRewardMaze-v0", "ipd-r0x2", "1"],
    ]
    number = r"-?\d+\.\d+"
    assert re.fullmatch(rf"{number} ± {number}", main_rows[3][3])  # ipd's reward
    assert all(re.fullmatch(r"[01]\.\d\d", cell) for r in main_rows[2:] for cell in r[4:6])  # success rates
    assert main_rows[2][6].startswith("1.00 ± ")  # the references' own relative novelty (paper) averages 1
    assert "FourRewardMaze-v0 reward IQM [95% CI]" in table
    commands = text.split("## Configuration and commands")[1]
    task = "exp/FourRewardMaze-v0"  # relative to the folder the report was made in
    assert f"--method ppo --refs 2 --novel 0 --steps 2048 --out {task}/ppo" in commands
    assert f"--novel 1 --refs-from {task}/ppo --r0-scale 0.5 2.0 --steps 2048" in commands
    assert f"npsco evaluate {task}/ipd --episodes 20 --seed 0" in commands
    assert "npsco report exp --out exp/report --episodes 20" in commands
    assert "| torch |" in commands and '"total_timesteps": 2048' in commands


def test_the_report_names_no_absolute_path_so_it_travels_with_its_runs(experiment, tmp_path, monkeypatch):
    report = experiment / "report"
    for name in ("report.md", "report.html", "evaluation.csv", "evaluation.json"):
        assert str(experiment.parent) not in (report / name).read_text(), name
    # the experiment folder moved elsewhere: every run and checkpoint the report names is still there, relative to
    # the folder it was made in
    import json
    import shutil

    moved = tmp_path / "elsewhere"
    shutil.copytree(experiment, moved / "exp", symlinks=True)
    data = json.loads((moved / "exp" / "report" / "evaluation.json").read_text())
    assert data["policies"] and all(
        (moved / r["checkpoint"]).exists() and (moved / r["run"]).is_dir() for r in data["policies"]
    )


def test_rerunning_the_experiment_resumes_and_reuses_the_evaluations(experiment, capsys):
    evaluation = experiment / "FourRewardMaze-v0" / "ipd" / "evaluation" / "evaluation.json"
    before = evaluation.read_bytes()
    assert main(["experiment", "--out", str(experiment), *EXPERIMENT]) == 0
    out = capsys.readouterr().out
    assert " done " not in out  # nothing trained again
    assert out.count("evaluation up to date") == 2 and evaluation.read_bytes() == before
    assert f"report: {experiment / 'report' / 'report.md'}" in out


def test_report_of_an_experiment_directory_equals_its_population_runs(experiment, tmp_path, capsys):
    assert main(["report", str(experiment), "--out", str(tmp_path / "r"), "--no-filmstrips", "--episodes", "20"]) == 0
    text = (tmp_path / "r" / "report.md").read_text()
    assert "## Behaviour" not in text and "Behaviour" not in text and "ipd-r0x2" in text  # no empty section
    with open(tmp_path / "r" / "evaluation.csv") as a, open(experiment / "report" / "evaluation.csv") as b:
        assert a.read() == b.read()


def test_a_report_cut_short_is_rewritten_by_the_next_run(experiment, tmp_path, monkeypatch):
    # the first run writes its marker before anything else; a kill before report.md leaves the folder rewritable
    out = tmp_path / "r"

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as mp:
        mp.setattr("npsco.report.build.to_markdown", killed)
        assert main(["report", str(experiment), "--out", str(out), "--no-filmstrips", "--no-videos"]) == 130
    assert (out / ".npsco-report").exists() and (out / "evaluation.csv").exists() and not (out / "report.md").exists()
    assert main(["report", str(experiment), "--out", str(out), "--no-filmstrips", "--no-videos"]) == 0
    assert (out / "report.md").exists()


def test_render_maze_gif(experiment, tmp_path, capsys):
    out = tmp_path / "ref0.gif"
    assert (
        main(
            [
                "render",
                str(experiment / "FourRewardMaze-v0" / "ppo" / "refs" / "ref0"),
                "--gif",
                "--frames",
                "5",
                "--every",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    with Image.open(out) as gif:
        assert gif.format == "GIF" and gif.n_frames >= 2 and gif.size == (160, 160)
    assert "written: " in capsys.readouterr().out


def test_filmstrip_of_a_hopper_policy_is_a_real_picture(tmp_path, capsys):
    from npsco.ppo.config import preset
    from npsco.ppo.trainer import Trainer

    checkpoint = tmp_path / "hopper.safetensors"
    Trainer(preset("Hopper-v5"), tensorboard=False).policy().save(checkpoint)
    out = tmp_path / "hopper.png"
    assert main(["render", str(checkpoint), "--frames", "3", "--every", "2", "--size", "64", "--out", str(out)]) == 0
    with Image.open(out) as picture:
        pixels = np.asarray(picture.convert("RGB"))
    assert pixels.shape == (64 + 2 * 2, 3 * 64 + 4 * 2, 3)  # one row of 3 frames, 2-pixel padding
    frame = pixels[2:66, 2:66]
    assert frame.std() > 20 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 50  # a rendered scene, not a blank
    assert "3 frames at steps 0..4" in capsys.readouterr().out


def test_render_refuses_a_missing_checkpoint(tmp_path, capsys):
    assert main(["render", str(tmp_path / "none.safetensors")]) == 2
    assert "no such checkpoint" in capsys.readouterr().err


def test_render_refuses_a_start_inside_a_region(experiment, capsys):
    assert main(["render", str(experiment / "FourRewardMaze-v0" / "ppo" / "refs" / "ref0"), "--start", "15", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the 'right' reward region" in err
