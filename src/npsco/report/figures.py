"""The paper's figures as pure functions: plain data in, a ``matplotlib.figure.Figure`` out.

- ``maze_trajectories_figure``: Fig. 2, trajectories of each method's policies on the Four Reward Maze.
- ``novelty_reward_figure``: Fig. 3, relative novelty vs reward per task, mean +- std per method.
- ``threshold_ablation_figure``: Fig. 4, box plots of returns under different novelty thresholds.
- ``learning_curves_figure``: training curves, one line per policy, bold mean per group in a band of +- one std.
- ``body_trajectories_figure``: the x position and height of a MuJoCo body over an episode, one line per policy.
- ``filmstrip`` / ``filmstrip_figure``: behaviour pictures (appendix E), frames laid side by side.
- ``distance_heatmap_figure``: the pairwise action distances between the policies of a task, grouped by method.

Figures are built with ``matplotlib.figure.Figure`` directly, never through ``pyplot``: no global state, no GUI
backend, and nothing to close. Render with ``fig.savefig(...)`` or ``save_figure`` (atomic write).
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Circle, Rectangle

from npsco.envs.maze import GOAL_RADIUS, GOALS, MAP_SIZE
from npsco.io import remove_inside
from npsco.stats import mean_std

_PANEL_INCHES = 3.2
"""Side of one square panel."""
_MAX_COLUMNS = 6
"""Panels per row before wrapping to the next row."""


def _colour(index: int) -> str:
    """The index-th colour of matplotlib's default cycle ("C0".."C9", repeating)."""
    return f"C{index % 10}"


def _grid(n: int, columns: int) -> tuple[int, int]:
    """(rows, columns) of a grid holding n panels with at most ``columns`` per row."""
    cols = max(1, min(n, columns))
    return math.ceil(n / cols), cols


def _method_order(data: Mapping[str, Mapping[str, object]]) -> list[str]:
    """Method names across all tasks, in order of first appearance (fixes one colour per method)."""
    names: dict[str, None] = {}
    for per_method in data.values():
        names.update(dict.fromkeys(per_method))
    return list(names)


def _require(data: Mapping, what: str) -> None:
    if not data:
        raise ValueError(f"no {what} to plot")


def maze_trajectories_figure(panels: Mapping[str, Sequence[np.ndarray]], title: str | None = None) -> Figure:
    """Paper Fig. 2: one square panel per method showing its trajectories on the Four Reward Maze.

    ``panels`` maps a method name to its trajectories, each a (T, 2) array of (x, y) positions. Each panel shows the
    ``MAP_SIZE`` square, the four reward regions as disks labelled with their reward, and every trajectory in its own
    colour with a circle marker at its start and a small square at its end (so that a trajectory of one or two steps
    stays visible). Panels wrap after six per row, the rows balanced (7 panels: 4 + 3).
    """
    _require(panels, "methods")
    rows = math.ceil(len(panels) / _MAX_COLUMNS)
    rows, cols = _grid(len(panels), math.ceil(len(panels) / rows))
    fig = Figure(figsize=(_PANEL_INCHES * cols, _PANEL_INCHES * rows + (0.4 if title else 0.0)), layout="constrained")
    max_reward = max(reward for _, _, reward in GOALS)
    margin = GOAL_RADIUS + 0.5
    for index, (method, trajectories) in enumerate(panels.items()):
        ax = fig.add_subplot(rows, cols, index + 1)
        ax.add_patch(Rectangle((0.0, 0.0), MAP_SIZE, MAP_SIZE, facecolor="0.96", edgecolor="0.3", linewidth=1.0))
        for _, centre, reward in GOALS:
            ax.add_patch(Circle(centre, GOAL_RADIUS, facecolor="gold", alpha=0.3 + 0.6 * reward / max_reward))
            ax.text(*centre, f"+{reward:g}", ha="center", va="center", fontsize=8, fontweight="bold")
        for k, trajectory in enumerate(trajectories):
            positions = np.asarray(trajectory, dtype=float)
            if positions.ndim != 2 or positions.shape[1] != 2 or len(positions) == 0:
                raise ValueError(f"trajectory {k} of {method!r} must be a non-empty (T, 2) array")
            ax.plot(positions[:, 0], positions[:, 1], color=_colour(k), linewidth=1.5)
            ax.plot(*positions[0], marker="o", color=_colour(k), markersize=6, markeredgecolor="black")
            ax.plot(
                *positions[-1], marker="s", color=_colour(k), markersize=4, markeredgecolor="black", markeredgewidth=0.5
            )
        ax.set_xlim(-margin, MAP_SIZE + margin)
        ax.set_ylim(-margin, MAP_SIZE + margin)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(method)
    if title:
        fig.suptitle(title)
    return fig


def novelty_reward_figure(data: Mapping[str, Mapping[str, tuple[np.ndarray, np.ndarray]]]) -> Figure:
    """Paper Fig. 3: relative novelty (x) vs reward (y), one panel per task.

    ``data[task][method] = (relative_novelties, rewards)``, one value per policy. Each policy is a faint point; each
    method's mean is a bold marker with error bars of one (population) standard deviation in x and y, as in the
    paper. A dashed vertical line marks relative novelty 1 (the PPO baseline). One legend for all panels.
    """
    _require(data, "tasks")
    methods = _method_order(data)
    fig = Figure(figsize=(_PANEL_INCHES * 1.3 * len(data) + 1.5, _PANEL_INCHES * 1.1), layout="constrained")
    handles = {}
    for index, (task, per_method) in enumerate(data.items()):
        ax = fig.add_subplot(1, len(data), index + 1)
        ax.axvline(1.0, color="0.6", linestyle="--", linewidth=1.0)
        for method, (novelty, reward) in per_method.items():
            x, y = np.asarray(novelty, dtype=float).ravel(), np.asarray(reward, dtype=float).ravel()
            if x.shape != y.shape:
                raise ValueError(f"{task}/{method}: {x.size} novelties but {y.size} rewards")
            colour = _colour(methods.index(method))
            ax.scatter(x, y, color=colour, alpha=0.3, s=18, linewidths=0)
            (mx, sx), (my, sy) = mean_std(x), mean_std(y)
            handles[method] = ax.errorbar(
                mx, my, xerr=sx, yerr=sy, fmt="o", color=colour, markersize=8, capsize=3, linewidth=1.5
            )
        ax.set_title(task)
        ax.set_xlabel("relative novelty (/ PPO mean novelty)")
        if index == 0:
            ax.set_ylabel("reward")
    # matplotlib's stubs type legend handles as Artists; an errorbar's container is drawn as one
    fig.legend([handles[m] for m in methods], methods, loc="outside right upper")  # type: ignore[call-overload]
    return fig


def threshold_ablation_figure(data: Mapping[str, Mapping[str, np.ndarray]]) -> Figure:
    """Paper Fig. 4: box plots of returns for each novelty threshold, one panel per task.

    ``data[task][label] = returns`` (one per policy), with labels such as ``"0.5x"``, ``"1x"``, ``"2x"`` in the order
    given. Returns under the label ``"PPO"``, if present, are drawn first as a grey reference box. Boxes span the
    quartiles with a line at the median; whiskers reach the furthest point within 1.5 IQR and points beyond are
    drawn as fliers (matplotlib's default, as in the paper's caption).
    """
    _require(data, "tasks")
    fig = Figure(figsize=(_PANEL_INCHES * 1.2 * len(data), _PANEL_INCHES * 1.1), layout="constrained")
    for index, (task, per_label) in enumerate(data.items()):
        _require(per_label, f"thresholds for task {task!r}")
        labels = ["PPO"] * ("PPO" in per_label) + [label for label in per_label if label != "PPO"]
        ax = fig.add_subplot(1, len(data), index + 1)
        boxes = ax.boxplot(
            [np.asarray(per_label[label], dtype=float).ravel() for label in labels],
            tick_labels=labels,
            patch_artist=True,
            medianprops={"color": "black"},
        )
        for label, box in zip(labels, boxes["boxes"], strict=True):
            box.set_facecolor("0.8" if label == "PPO" else "C0")
            box.set_alpha(0.7)
        ax.set_title(task)
        ax.set_xlabel("novelty threshold")
        if index == 0:
            ax.set_ylabel("return")
    return fig


def learning_curves_figure(
    curves: Mapping[str, Sequence[tuple[np.ndarray, np.ndarray]]], ylabel: str = "return"
) -> Figure:
    """Training curves: environment steps (x) vs a value (y), one thin line with a dot at each evaluation per policy,
    coloured by group.

    ``curves[group]`` is a sequence of ``(steps, values)`` pairs, steps increasing. Each group's mean curve is drawn
    bold with its markers, in a band of one (population) standard deviation across the group's policies: the policies
    are linearly interpolated onto the union of their steps within the range all of them cover (no mean is drawn if
    they share no range). Markers keep a curve of one evaluation visible; a mean of one point has an error bar.
    """
    _require(curves, "groups")
    fig = Figure(figsize=(7.0, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for index, (group, runs) in enumerate(curves.items()):
        colour = _colour(index)
        pairs = [(np.asarray(s, dtype=float).ravel(), np.asarray(v, dtype=float).ravel()) for s, v in runs]
        for k, (steps, values) in enumerate(pairs):
            if steps.shape != values.shape or steps.size == 0:
                raise ValueError(f"{group} curve {k}: steps and values must be non-empty and of equal length")
            if np.any(np.diff(steps) <= 0):
                raise ValueError(f"{group} curve {k}: steps must be strictly increasing")
            ax.plot(steps, values, color=colour, alpha=0.35, linewidth=1.0, marker="o", markersize=2.5)
        start = max(steps[0] for steps, _ in pairs)
        end = min(steps[-1] for steps, _ in pairs)
        grid = np.unique(np.concatenate([steps[(steps >= start) & (steps <= end)] for steps, _ in pairs]))
        if grid.size:
            mean, std = mean_std_curve(grid, pairs)
            label = f"{group} (n={len(pairs)}{', mean ± std' if len(pairs) > 1 else ''})"
            if len(pairs) > 1 and grid.size > 1:
                ax.fill_between(grid, mean - std, mean + std, color=colour, alpha=0.18, linewidth=0)
            elif len(pairs) > 1:
                ax.errorbar(grid, mean, yerr=std, color=colour, capsize=4, linewidth=1.5)
            ax.plot(grid, mean, color=colour, linewidth=2.5, marker="o", markersize=4, label=label)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return fig


def mean_std_curve(grid: np.ndarray, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std across curves ``(steps, values)``, each linearly interpolated onto ``grid``."""
    values = np.array([np.interp(grid, steps, v) for steps, v in pairs])
    return values.mean(axis=0), values.std(axis=0)


def body_trajectories_figure(
    tracks: Mapping[str, Sequence[tuple[str, np.ndarray]]], title: str | None = None, max_columns: int = 4
) -> Figure:
    """Where each policy goes and how high it moves: per group a column of two panels over the steps of one
    episode, the root body's x position (top) and its height (bottom), one line per policy with a dot where its
    episode ended.

    ``tracks[group]`` is a sequence of ``(label, positions)``, positions an (T + 1, 3) array of (x, y, z) after the
    reset and after every step. Columns wrap after ``max_columns`` groups; all x panels share one scale, all height
    panels another, so that the groups compare at a glance.
    """
    _require(tracks, "groups")
    pair_rows, cols = _grid(len(tracks), max_columns)
    fig = Figure(figsize=(3.4 * cols, 4.6 * pair_rows + (0.4 if title else 0.0)), layout="constrained")
    axes = fig.subplots(2 * pair_rows, cols, squeeze=False, sharex=True)
    for (row, col), ax in np.ndenumerate(axes):
        if (row, col) != (row % 2, 0):  # x panels share one y scale, height panels another
            ax.sharey(axes[row % 2, 0])
        if (row // 2) * cols + col >= len(tracks):
            ax.set_axis_off()
    for index, (group, policies) in enumerate(tracks.items()):
        top, bottom = axes[2 * (index // cols), index % cols], axes[2 * (index // cols) + 1, index % cols]
        for k, (label, positions) in enumerate(policies):
            positions = np.asarray(positions, dtype=float)
            if positions.ndim != 2 or positions.shape[1] != 3 or len(positions) == 0:
                raise ValueError(f"positions of {label!r} ({group}) must be a non-empty (T + 1, 3) array")
            steps = np.arange(len(positions))
            for ax, column in ((top, 0), (bottom, 2)):
                ax.plot(steps, positions[:, column], color=_colour(k), linewidth=1.2, label=label)
                ax.plot(steps[-1], positions[-1, column], marker="o", color=_colour(k), markersize=4)
        top.set_title(group)
        top.legend(fontsize=7, loc="upper left")
        top.grid(alpha=0.3)
        bottom.grid(alpha=0.3)
        bottom.set_xlabel("step")
        bottom.tick_params(labelbottom=True)  # steps under every pair, not only the last row
        if index % cols == 0:
            top.set_ylabel("x position (m)")
            bottom.set_ylabel("height (m)")
    if title:
        fig.suptitle(title)
    return fig


def filmstrip(frames: Sequence[np.ndarray], columns: int | None = None, pad: int = 2) -> np.ndarray:
    """Lay frames side by side into one image, as the paper's behaviour pictures.

    ``frames`` are (H, W, 3) uint8 images of one size. With ``columns=None`` they form one row; otherwise they wrap
    into ``ceil(n / columns)`` rows of ``columns``. ``pad`` white pixels separate the frames and surround the whole
    strip, so the result has shape ``(rows * H + (rows + 1) * pad, cols * W + (cols + 1) * pad, 3)``; cells after the
    last frame stay white.
    """
    if not frames:
        raise ValueError("no frames")
    shape = np.shape(frames[0])
    for k, frame in enumerate(frames):
        if np.ndim(frame) != 3 or np.shape(frame)[2] != 3 or np.asarray(frame).dtype != np.uint8:
            raise ValueError(f"frame {k} must be an (H, W, 3) uint8 array")
        if np.shape(frame) != shape:
            raise ValueError(f"frame {k} has shape {np.shape(frame)}, frame 0 has {shape}")
    if pad < 0:
        raise ValueError("pad must be non-negative")
    if columns is not None and columns < 1:
        raise ValueError("columns must be at least 1")
    height, width = shape[:2]
    cols = len(frames) if columns is None else columns
    rows = math.ceil(len(frames) / cols)
    strip = np.full((rows * height + (rows + 1) * pad, cols * width + (cols + 1) * pad, 3), 255, dtype=np.uint8)
    for k, frame in enumerate(frames):
        top = pad + (k // cols) * (height + pad)
        left = pad + (k % cols) * (width + pad)
        strip[top : top + height, left : left + width] = frame
    return strip


def filmstrip_figure(strips: Mapping[str, np.ndarray], width_inches: float = 10.0) -> Figure:
    """Stack several filmstrips (images from ``filmstrip``) vertically, each titled with its label."""
    _require(strips, "filmstrips")
    heights = [width_inches * np.shape(image)[0] / np.shape(image)[1] for image in strips.values()]
    fig = Figure(figsize=(width_inches, sum(heights) + 0.35 * len(strips)), layout="constrained")
    axes = fig.subplots(len(strips), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (label, image) in zip(axes, strips.items(), strict=True):
        ax.imshow(image)
        ax.set_title(label, loc="left", fontsize=10)
        ax.set_axis_off()
    return fig


def group_spans(groups: Sequence[str]) -> list[tuple[str, int, int]]:
    """Consecutive runs of equal labels as (label, first index, last index + 1): `["a", "a", "b"]` ->
    `[("a", 0, 2), ("b", 2, 3)]`."""
    spans: list[tuple[str, int, int]] = []
    for i, g in enumerate(groups):
        if spans and spans[-1][0] == g:
            spans[-1] = (g, spans[-1][1], i + 1)
        else:
            spans.append((g, i, i + 1))
    return spans


def distance_heatmap_figure(
    matrix: np.ndarray, labels: Sequence[str], groups: Sequence[str], title: str | None = None
) -> Figure:
    """Heatmap of a distance matrix D (row i, column j: D[i, j]) between policies ordered by group.

    Lines separate the groups (``groups[i]`` is the group of policy i; equal groups must be adjacent) and each group is
    named along both axes; cells show their value when there are at most 16 policies. Colour: 0 dark, far bright.
    """
    matrix = np.asarray(matrix, dtype=float)
    n = len(labels)
    if matrix.shape != (n, n) or len(groups) != n or n == 0:
        raise ValueError(f"a ({n}, {n}) matrix with one label and one group per policy is needed, got {matrix.shape}")
    side = min(12.0, max(5.0, 2.5 + 0.42 * n))  # at least tall enough for the colour bar's label, whole
    fig = Figure(figsize=(side + 1.6, side), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="viridis", vmin=0.0, interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.8, label="D(row, column):\naction distance on the row's states")
    ax.set_xticks(range(n), labels, rotation=90, fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    top = float(np.nanmax(matrix)) if np.isfinite(matrix).any() else 1.0
    if n <= 16:
        for i in range(n):
            for j in range(n):
                if np.isfinite(matrix[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{matrix[i, j]:.2g}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if matrix[i, j] > 0.6 * top else "white",
                    )
    for name, start, end in group_spans(groups):
        if start > 0:
            ax.axhline(start - 0.5, color="white", linewidth=2.0)
            ax.axvline(start - 0.5, color="white", linewidth=2.0)
        ax.annotate(
            name,
            xy=(-0.02, 1 - (start + end) / 2 / n),
            xycoords="axes fraction",
            ha="right",
            va="center",
            fontsize=9,
            fontweight="bold",
            xytext=(-60, 0),
            textcoords="offset points",
        )
        ax.annotate(
            name,
            xy=((start + end) / 2 / n, 1.01),
            xycoords="axes fraction",
            ha="center",
            va="bottom",
            fontsize=9,
            fontweight="bold",
        )
    if title:
        ax.set_title(title, pad=22)
    return fig


def save_figure(fig: Figure, path: str | os.PathLike[str], dpi: int = 150) -> Path:
    """Write ``fig`` to ``path`` atomically, in the format of its suffix (PNG if none); returns the path.

    The figure is rendered to a temporary file in the same folder, then moved over ``path`` with ``os.replace``, so
    a reader never sees a half-written file and an interrupted save leaves the old file intact. Missing parent
    folders are created.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fmt = target.suffix.lstrip(".").lower() or "png"
    # A fresh exclusive name (not mkstemp) so the file gets the usual umask permissions rather than 0600.
    temp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temp, "xb") as handle:
            fig.savefig(handle, format=fmt, dpi=dpi)
        os.replace(temp, target)
    except BaseException:
        remove_inside(target.parent, temp)
        raise
    return target
