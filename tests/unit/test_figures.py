"""Figures render to real images with the right panels; filmstrip arithmetic; atomic save."""

import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread

from npsco.report.figures import (
    body_trajectories_figure,
    filmstrip,
    filmstrip_figure,
    learning_curves_figure,
    maze_trajectories_figure,
    novelty_reward_figure,
    save_figure,
    threshold_ablation_figure,
)

RNG = np.random.default_rng(0)


def _render(fig: Figure) -> np.ndarray:
    """Render to PNG in memory, check it is a real image, and return its pixels."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=60)
    assert buffer.tell() > 3000
    buffer.seek(0)
    pixels = imread(buffer)
    assert pixels.ndim == 3 and pixels.shape[0] > 50 and pixels.shape[1] > 50
    assert pixels.std() > 0.01  # not a uniform image
    return pixels


def _maze_trajectory(end: tuple[float, float]) -> np.ndarray:
    start = np.array([14.0, 8.0])
    return start + np.linspace(0.0, 1.0, 12)[:, None] * (np.asarray(end) - start)


def test_maze_trajectories_figure():
    panels = {
        "PPO": [_maze_trajectory((0.0, 8.0)) for _ in range(3)],
        "IPD": [_maze_trajectory(end) for end in [(0.0, 8.0), (8.0, 16.0), (8.0, 0.0), (16.0, 8.0)]],
    }
    fig = maze_trajectories_figure(panels, title="Four Reward Maze")
    assert len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["PPO", "IPD"]
    texts = {t.get_text() for t in fig.axes[1].texts}
    assert texts == {"+5", "+10", "+1"}
    assert len(fig.axes[1].patches) == 5  # the map and the four reward disks
    _render(fig)


def test_maze_trajectories_figure_wraps_and_validates():
    panels = {f"m{i}": [_maze_trajectory((0.0, 8.0))] for i in range(7)}
    assert len(maze_trajectories_figure(panels).axes) == 7
    with pytest.raises(ValueError, match="T, 2"):
        maze_trajectories_figure({"bad": [np.zeros((5, 3))]})


def test_novelty_reward_figure():
    data = {
        task: {
            method: (RNG.normal(loc, 0.2, size=10), RNG.normal(1000 * loc, 100, size=10))
            for method, loc in [("PPO", 1.0), ("WSR", 1.4), ("IPD", 1.8)]
        }
        for task in ("Hopper", "Walker2d", "HalfCheetah")
    }
    fig = novelty_reward_figure(data)
    assert len(fig.axes) == 3
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["PPO", "WSR", "IPD"]
    _render(fig)
    with pytest.raises(ValueError, match="novelties"):
        novelty_reward_figure({"t": {"m": (np.zeros(3), np.zeros(4))}})


def test_threshold_ablation_figure():
    data = {
        task: {label: RNG.normal(1000, 200, size=10) for label in ("0.5x", "1x", "2x", "PPO")}
        for task in ("Hopper", "Walker2d")
    }
    fig = threshold_ablation_figure(data)
    assert len(fig.axes) == 2
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["PPO", "0.5x", "1x", "2x"]
    _render(fig)


def test_learning_curves_figure():
    steps = np.arange(0, 100_000, 5_000)
    curves = {
        "PPO": [(steps, np.sqrt(steps) + RNG.normal(0, 10, steps.size)) for _ in range(3)],
        "IPD": [(steps[:15], np.sqrt(steps[:15]) * 1.2), (steps[3:] + 1000, np.sqrt(steps[3:]))],
    }
    fig = learning_curves_figure(curves, ylabel="episodic return")
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_ylabel() == "episodic return"
    assert len(ax.lines) == 3 + 1 + 2 + 1  # policies plus one bold mean per group
    ipd_mean = ax.lines[-1]
    assert ipd_mean.get_xdata()[0] == 16_000 and ipd_mean.get_xdata()[-1] == 70_000  # shared range only
    assert all(line.get_marker() == "o" for line in ax.lines)  # a dot at every evaluation
    assert len(ax.collections) == 2  # a band per group
    _render(fig)


def test_learning_curves_band_is_the_std_across_the_groups_policies():
    steps = np.array([1.0, 2.0, 3.0])
    fig = learning_curves_figure({"ppo": [(steps, np.array([0.0, 2.0, 4.0])), (steps, np.array([2.0, 4.0, 10.0]))]})
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.lines[-1].get_ydata(), [1.0, 3.0, 7.0])  # the mean
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == pytest.approx(0.0) and band[:, 1].max() == pytest.approx(10.0)  # mean +- std (1, 1, 3)
    assert ax.get_legend().get_texts()[0].get_text() == "ppo (n=2, mean ± std)"


def test_a_single_evaluation_is_visible():
    # one evaluation per policy (a tiny budget): markers, and an error bar across the policies
    fig = learning_curves_figure(
        {"ppo": [(np.array([2048.0]), np.array([5.0])), (np.array([2048.0]), np.array([9.0]))]}
    )
    ax = fig.axes[0]
    points = [line for line in ax.lines if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    assert len(points) == 3 and points[-1].get_ydata()[0] == 7.0  # both policies and their mean
    assert ax.containers and ax.containers[0].has_yerr  # mean +- std as an error bar
    pixels = _render(fig)
    assert (np.abs(pixels[..., :3] - np.array([0.12, 0.47, 0.71])).sum(axis=-1) < 0.1).sum() > 20  # C0 dots drawn


def test_body_trajectories_figure():
    t = np.arange(6)
    hop = np.stack([0.5 * t, np.zeros(6), 1.2 + 0.3 * np.sin(t)], axis=1)
    fall = np.stack([0.1 * t[:3], np.zeros(3), [1.25, 1.0, 0.7]], axis=1)
    fig = body_trajectories_figure({"ppo": [("ref0", hop), ("ref1", fall)], "ipd": [("k0", hop)]}, title="Hopper")
    top, bottom = fig.axes[0], fig.axes[2]  # ppo: x position above, height below (ipd in the second column)
    assert [ax.get_title() for ax in fig.axes[:2]] == ["ppo", "ipd"]
    assert top.get_ylabel() == "x position (m)" and bottom.get_ylabel() == "height (m)"
    lines = [line for line in top.lines if len(line.get_xdata()) > 1]
    np.testing.assert_array_equal(lines[0].get_ydata(), hop[:, 0])
    np.testing.assert_array_equal(lines[1].get_xdata(), [0, 1, 2])  # a fall: its line stops where it ended
    heights = [line for line in bottom.lines if len(line.get_xdata()) > 1]
    np.testing.assert_array_equal(heights[1].get_ydata(), [1.25, 1.0, 0.7])
    ends = [line for line in bottom.lines if len(line.get_xdata()) == 1]
    assert [(e.get_xdata()[0], e.get_ydata()[0]) for e in ends] == [(5, hop[-1, 2]), (2, 0.7)]
    assert [t.get_text() for t in top.get_legend().get_texts()] == ["ref0", "ref1"]
    assert fig.axes[1].get_shared_y_axes().joined(fig.axes[0], fig.axes[1])  # one x scale for every method
    _render(fig)
    assert len(body_trajectories_figure({f"g{i}": [("a", hop)] for i in range(5)}).axes) == 4 * 4  # wraps after 4
    with pytest.raises(ValueError, match="T \\+ 1, 3"):
        body_trajectories_figure({"ppo": [("ref0", np.zeros((4, 2)))]})
    with pytest.raises(ValueError, match="increasing"):
        learning_curves_figure({"x": [(np.array([2.0, 1.0]), np.array([0.0, 1.0]))]})


def _frames(n: int, height: int = 6, width: int = 4) -> list[np.ndarray]:
    return [np.full((height, width, 3), 10 * (k + 1), dtype=np.uint8) for k in range(n)]


def test_filmstrip_single_row_shape_and_placement():
    strip = filmstrip(_frames(3), pad=2)
    assert strip.shape == (6 + 2 * 2, 3 * 4 + 4 * 2, 3)
    assert strip.dtype == np.uint8
    assert (strip[2:8, 2:6] == 10).all()
    assert (strip[2:8, 8:12] == 20).all()
    assert (strip[2:8, 14:18] == 30).all()
    assert (strip[:2] == 255).all() and (strip[:, 6:8] == 255).all()


def test_filmstrip_wraps_into_rows():
    strip = filmstrip(_frames(5), columns=2, pad=1)
    assert strip.shape == (3 * 6 + 4 * 1, 2 * 4 + 3 * 1, 3)
    assert (strip[15:21, 1:5] == 50).all()  # fifth frame: third row, first column
    assert (strip[15:21, 6:10] == 255).all()  # empty last cell
    assert filmstrip(_frames(2), pad=0).shape == (6, 8, 3)


def test_filmstrip_validates_frames():
    with pytest.raises(ValueError):
        filmstrip([])
    with pytest.raises(ValueError, match="shape"):
        filmstrip(_frames(1) + _frames(1, height=5))
    with pytest.raises(ValueError, match="uint8"):
        filmstrip([np.zeros((4, 4, 3))])


def test_filmstrip_figure():
    strips = {
        "IPD policy 1": filmstrip([RNG.integers(0, 255, (24, 24, 3), dtype=np.uint8) for _ in range(5)]),
        "PPO seed 1": filmstrip([RNG.integers(0, 255, (24, 24, 3), dtype=np.uint8) for _ in range(5)]),
    }
    fig = filmstrip_figure(strips)
    assert len(fig.axes) == 2
    assert [ax.get_title(loc="left") for ax in fig.axes] == list(strips)
    _render(fig)


def test_save_figure_writes_atomically(tmp_path):
    fig = threshold_ablation_figure({"Hopper": {"1x": np.arange(5.0)}})
    target = tmp_path / "sub" / "fig4.png"
    assert save_figure(fig, target, dpi=50) == target
    assert imread(target).std() > 0.01
    assert sorted(p.name for p in target.parent.iterdir()) == ["fig4.png"]
    old = target.read_bytes()
    save_figure(fig, target.with_suffix(".pdf"))
    assert target.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError):
        save_figure(fig, tmp_path / "sub" / "fig4.notaformat")
    assert sorted(p.name for p in target.parent.iterdir()) == ["fig4.pdf", "fig4.png"]  # no temp file left
    assert target.read_bytes() == old
