"""Behaviour pictures: frames of one deterministic episode of a policy, laid out as a filmstrip (PNG) or an animation
(GIF), as the paper's appendix pictures, and the frames of a short video of the same episode (`report/video.py`).

The maze is drawn by its own `rgb_array` render (map, regions, the path so far); MuJoCo tasks are rendered offscreen by
`gymnasium.make(env_id, render_mode="rgb_array")`, which needs an OpenGL backend: `MUJOCO_GL=egl` (set here by default
before MuJoCo is first used, where libEGL is installed) works headless with Mesa. Other tasks render at their own size,
scaled to the frame size. GIFs are written with Pillow (a matplotlib dependency).
"""

from __future__ import annotations

import ctypes.util
import io
import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from npsco.envs.make import make_env
from npsco.errors import NpscoError
from npsco.io import atomic_write_bytes
from npsco.policy import Policy
from npsco.tasks import MAZE_ID


def default_mujoco_gl(
    environ: MutableMapping[str, str] = os.environ, find_library: Callable[[str], str | None] = ctypes.util.find_library
) -> None:
    """Render MuJoCo offscreen with EGL unless `MUJOCO_GL` is set, and only where libEGL is installed: without it,
    `import mujoco` under `MUJOCO_GL=egl` fails outright, and training, which renders nothing, would fail with it."""
    if "MUJOCO_GL" not in environ and find_library("EGL"):
        environ["MUJOCO_GL"] = "egl"


default_mujoco_gl()  # before MuJoCo is first imported: it picks its OpenGL backend then


@dataclass
class Frames:
    """Frames of one deterministic episode, and the step at which each was taken (0 = after reset)."""

    images: list[np.ndarray]
    steps: list[int]
    ended: bool
    """Whether the episode ended before all the frames asked for were taken (its last frame is the final state)."""
    episode_return: float
    """The return of the episode up to the last frame."""
    clip: list[np.ndarray] = field(default_factory=list)
    """With `clip_every`: a frame every `clip_every` steps over the same span (and the final state): the video."""
    clip_steps: list[int] = field(default_factory=list)


def default_sampling(env_id: str, animation: bool = False) -> tuple[int, int]:
    """(frames, every): maze 6 frames every 5 steps (its episodes last 5-30 steps); MuJoCo 8 frames every 25 steps
    (200 steps, 1.6 s of Hopper); animations take every step (maze) or every 4th (MuJoCo), up to 100 frames."""
    if env_id == MAZE_ID:
        return (40, 1) if animation else (6, 5)
    return (100, 4) if animation else (8, 25)


def default_clip(env_id: str) -> tuple[int, float]:
    """(every, fps) of the report's video: the maze every step at 8 frames/s; other tasks every 5th step at 12
    frames/s (MuJoCo Hopper and Walker2d at about half speed)."""
    return (1, 8.0) if env_id == MAZE_ID else (5, 12.0)


def default_size(env_id: str) -> int:
    """Side of a frame in pixels: 160 for the maze, 240 for MuJoCo (small: software rendering is slow)."""
    return 160 if env_id == MAZE_ID else 240


def fit_frame(image: Any, size: int) -> np.ndarray:
    """A rendered frame as (H, W, 3) uint8 whose longer side is `size` pixels (unchanged when it already is)."""
    if image is None:
        raise NpscoError("the environment rendered nothing (does it support render_mode='rgb_array'?)")
    image = np.ascontiguousarray(np.asarray(image)[..., :3], dtype=np.uint8)
    h, w = image.shape[:2]
    if max(h, w) == size:
        return image
    scale = size / max(h, w)
    shape = (max(2, round(w * scale)), max(2, round(h * scale)))
    return np.asarray(Image.fromarray(image).resize(shape, Image.Resampling.BILINEAR))


def episode_frames(
    policy: Policy,
    frames: int | None = None,
    every: int | None = None,
    seed: int = 0,
    start: tuple[float, float] | None = None,
    size: int | None = None,
    max_episode_steps: int | None = None,
    animation: bool = False,
    clip_every: int | None = None,
) -> Frames:
    """Run one deterministic episode (env seeded `seed`; `start` fixes the maze's start) and take a frame after the
    reset and every `every` steps, `frames` in all; if the episode ends first, its final state is the last frame.
    With `clip_every`, the same episode also gives a video: a frame every `clip_every` steps (`Frames.clip`)."""
    env_id = policy.metadata["env_id"]
    d_frames, d_every = default_sampling(env_id, animation)
    frames, every = frames or d_frames, every or d_every
    max_episode_steps = max_episode_steps or (policy.metadata.get("config") or {}).get("max_episode_steps")
    if frames < 1 or every < 1:
        raise NpscoError("--frames and --every must be >= 1")
    size = size or default_size(env_id)
    env = make_env(env_id, max_episode_steps, render_mode="rgb_array", render_size=size)
    clip: list[np.ndarray] = []
    clip_steps: list[int] = []

    def take(t: int, last: bool = False) -> None:
        strip, video = last or t % every == 0, clip_every is not None and (last or t % clip_every == 0)
        if strip or video:
            image = fit_frame(env.render(), size)
            if strip:
                images.append(image)
                steps.append(t)
            if video:
                clip.append(image)
                clip_steps.append(t)

    try:
        try:
            obs, _ = env.reset(seed=seed, options={"start": start} if start is not None else None)
        except ValueError as e:  # the maze refuses a start outside the map or inside a region
            raise NpscoError(f"start {start}: {e}") from None
        images: list[np.ndarray] = []
        steps: list[int] = []
        total, t, ended = 0.0, 0, False
        take(0)
        while len(images) < frames:
            obs, reward, terminated, truncated, _ = env.step(policy.mean_action(obs))
            total += float(reward)
            t += 1
            if terminated or truncated:
                take(t, last=True)
                ended = len(images) < frames
                break
            take(t)
    finally:
        env.close()
    return Frames(images=images, steps=steps, ended=ended, episode_return=total, clip=clip, clip_steps=clip_steps)


def filmstrip_image(frames: Frames, columns: int | None = None, pad: int = 2) -> np.ndarray:
    """The frames side by side, each with a thin grey border; with `columns` the strip keeps that width (white cells
    after an early end)."""
    from npsco.report.figures import filmstrip  # lazy: matplotlib, which `npsco render` needs only for filmstrips

    framed = []
    for image in frames.images:
        image = image.copy()
        image[[0, -1], :] = 150
        image[:, [0, -1]] = 150
        framed.append(image)
    return filmstrip(framed, columns=columns, pad=pad)


def png_bytes(image: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as PNG bytes."""
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(image, dtype=np.uint8)).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def gif_bytes(images: list[np.ndarray], fps: float = 10.0) -> bytes:
    """Frames as a looping animated GIF (Pillow)."""
    pictures = [Image.fromarray(np.asarray(i, dtype=np.uint8)) for i in images]
    buffer = io.BytesIO()
    pictures[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=pictures[1:],
        duration=max(20, int(round(1000 / fps))),
        loop=0,
    )
    return buffer.getvalue()


def save_image(image: np.ndarray, path: str | os.PathLike) -> Path:
    """Write an image as PNG, atomically."""
    atomic_write_bytes(path, png_bytes(image))
    return Path(path)


def save_animation(images: list[np.ndarray], path: str | os.PathLike, fps: float = 10.0) -> Path:
    """Write frames as an animated GIF, atomically."""
    atomic_write_bytes(path, gif_bytes(images, fps))
    return Path(path)
