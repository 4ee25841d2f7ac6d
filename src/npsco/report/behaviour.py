"""Behaviour pictures: frames of one deterministic episode of a policy, spread over the whole episode and laid out as
a filmstrip (PNG) or an animation (GIF), as the paper's appendix pictures; the frames of a video of the same episode
(`report/video.py`); and, on MuJoCo, where its body went (`Frames.body`).

The maze is drawn by its own `rgb_array` render (map, regions, the path so far); MuJoCo tasks are rendered offscreen by
`gymnasium.make(env_id, render_mode="rgb_array")` and filmed by a camera that follows the body (`FollowCamera`),
which needs an OpenGL backend: `MUJOCO_GL=egl` (set here by default
before MuJoCo is first used, where libEGL is installed) works headless with Mesa. Other tasks render at their own size,
scaled to the frame size. GIFs are written with Pillow (a matplotlib dependency).
"""

from __future__ import annotations

import ctypes.util
import io
import math
import os
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from PIL import Image

from npsco.envs.make import DEFAULT_EPISODE_STEPS, make_env
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


REPORT_FRAME = 160
"""Side of the report's frames in pixels (filmstrips and the tiles of population videos), every task alike: eight
frames of a filmstrip fill the page's width, five tiles a row of a population video."""
SHADOW_MAP = 1024
"""Side of MuJoCo's shadow map while rendering (the models ask for 4096): software rendering is 2x faster, the
shadows as sharp at the frame sizes used here."""
CAMERA_ELEVATION = -20.0
"""Degrees the camera that follows a MuJoCo body looks down (Hopper's and Walker2d's own view; HalfCheetah's -45
hides its legs under its back)."""
FLOOR_HALF_SIZE = 500.0
"""Metres of floor drawn each way from the origin while rendering MuJoCo (`FollowCamera`)."""
PLANE = 0
"""MuJoCo's geom type of a plane (`mujoco.mjtGeom.mjGEOM_PLANE`)."""
REFLECTION = 2
"""MuJoCo's rendering flag of reflections (`mujoco.mjtRndFlag.mjRND_REFLECTION`)."""


@dataclass
class Frames:
    """Frames of one deterministic episode, and the step at which each was taken (0 = after reset)."""

    images: list[np.ndarray]
    steps: list[int]
    ended: bool
    """Whether the episode ended within the steps run (its last frame is then the final state)."""
    episode_return: float
    """The return of the episode up to the last step run."""
    length: int = 0
    """Steps run: the episode's length when it `ended`."""
    terminated: bool = False
    """Whether the task ended the episode (a fall), not its time limit."""
    clip: list[np.ndarray] = field(default_factory=list)
    """With `clip_every`: a frame every `clip_every` steps over the same span (and the final state): the video."""
    clip_steps: list[int] = field(default_factory=list)
    clip_every: int = 1
    """Steps between the video's frames."""
    body: np.ndarray | None = None
    """MuJoCo: the world position (x, y, z) of the root body (the torso) after the reset and after every step run,
    shape (length + 1, 3); None for other tasks."""


def default_frames(env_id: str, animation: bool = False) -> int:
    """Frames of a filmstrip: maze 6, other tasks 8; of an animation: maze 40, others 100."""
    if env_id == MAZE_ID:
        return 40 if animation else 6
    return 100 if animation else 8


def time_limit(env: gym.Env) -> int:
    """Steps after which the task cuts an episode: its time limit, the maze's own `max_steps`, else
    `DEFAULT_EPISODE_STEPS`."""
    limit = env.spec.max_episode_steps if env.spec else None
    return int(limit or getattr(env.unwrapped, "max_steps", None) or DEFAULT_EPISODE_STEPS)


def clip_every(max_episode_steps: int) -> int:
    """Steps between the frames of the report's videos: about 100 frames for a whole episode of the task's time
    limit (MuJoCo's 1000 steps: every 10th, 0.08 s of simulated time, so that 12 frames/s is about real time; the
    maze's 100 steps: every step)."""
    return max(1, math.ceil(max_episode_steps / 100))


def clip_fps(env_id: str) -> float:
    """Frames per second of the report's videos: the maze 8, other tasks 12."""
    return 8.0 if env_id == MAZE_ID else 12.0


def default_size(env_id: str) -> int:
    """Side of a frame of `npsco render` in pixels: 160 for the maze, 240 for MuJoCo (small: software rendering is
    slow)."""
    return 160 if env_id == MAZE_ID else 240


def spread_steps(length: int, frames: int) -> list[int]:
    """`frames` steps spread evenly over an episode of `length` steps, its first (0) and final (`length`) state
    included; fewer when the episode has fewer steps than that. One frame is the final state."""
    if frames < 1 or length < 0:
        raise ValueError(f"frames must be >= 1 and length >= 0, got {frames} and {length}")
    if frames == 1:
        return [length]
    return sorted({round(length * k / (frames - 1)) for k in range(frames)})


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


# ------------------------------------------------------------------------------------------------- MuJoCo camera
def is_mujoco(env: gym.Env) -> bool:
    """Whether `env` is a Gymnasium MuJoCo environment (it has MuJoCo's data and renderer)."""
    return hasattr(env.unwrapped, "mujoco_renderer") and hasattr(env.unwrapped, "data")


def body_position(env: gym.Env) -> np.ndarray:
    """The world position (x, y, z) of a MuJoCo task's root body: body 1, the first child of the world (the torso of
    Hopper, Walker2d and HalfCheetah)."""
    unwrapped: Any = env.unwrapped
    return np.array(unwrapped.data.xpos[1], dtype=float)


class FollowCamera(gym.Wrapper):
    """A MuJoCo task rendered by a camera that follows its body: the task's free camera (its distance and height),
    looking down by `CAMERA_ELEVATION`, moved before every frame so that it looks at the root body's x and y. The body
    stays in frame for the whole episode however far it goes; the camera's height stays, so a hop shows against a
    still horizon.

    The floor is drawn `FLOOR_HALF_SIZE` metres each way, its checks as large as before (the models draw 20-40 m, which
    a runner leaves within the episode): a plane collides as an infinite plane whatever its size, so the episode is
    the same. It renders without floor reflections (a mirrored body doubles the outline) and with a `SHADOW_MAP`
    shadow map: together 3-4x faster in software rendering (EGL with Mesa)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        unwrapped: Any = self.env.unwrapped
        model = unwrapped.model
        for geom in np.flatnonzero(model.geom_type == PLANE):
            half = float(model.geom_size[geom, :2].min())
            if 0 < half < FLOOR_HALF_SIZE:
                scale = FLOOR_HALF_SIZE / half
                model.geom_size[geom, :2] *= scale
                material = model.geom_matid[geom]
                if material >= 0 and not model.mat_texuniform[material]:  # the texture spans the plane: repeat more
                    model.mat_texrepeat[material] *= scale

    def render(self) -> Any:
        unwrapped: Any = self.env.unwrapped
        renderer = unwrapped.mujoco_renderer
        if renderer.viewer is None:  # the first frame makes the offscreen viewer, its camera and its scene
            unwrapped.model.vis.quality.shadowsize = min(SHADOW_MAP, unwrapped.model.vis.quality.shadowsize)
            self.env.render()
            viewer: Any = renderer.viewer
            viewer.scn.flags[REFLECTION] = 0
            viewer.cam.elevation = CAMERA_ELEVATION
        renderer.viewer.make_context_current()  # another environment may have rendered since: its OpenGL context
        renderer.viewer.cam.lookat[:2] = body_position(self.env)[:2]
        return self.env.render()


def follow_body(env: gym.Env) -> gym.Env:
    """`env` with a camera that follows its body (`FollowCamera`) when it is a MuJoCo task; else `env` itself."""
    return FollowCamera(env) if is_mujoco(env) else env


# ------------------------------------------------------------------------------------------------------ episodes
def _reset(env: gym.Env, seed: int, start: tuple[float, float] | None) -> Any:
    try:
        obs, _ = env.reset(seed=seed, options={"start": start} if start is not None else None)
    except ValueError as e:  # the maze refuses a start outside the map or inside a region
        raise NpscoError(f"start {start}: {e}") from None
    return obs


def episode_length(env: gym.Env, policy: Policy, seed: int, start: tuple[float, float] | None, limit: int) -> int:
    """Steps of one deterministic episode (env seeded `seed`), at most `limit`; nothing is rendered."""
    obs = _reset(env, seed, start)
    for t in range(1, limit + 1):
        obs, _, terminated, truncated, _ = env.step(policy.mean_action(obs))
        if terminated or truncated:
            return t
    return limit


def episode_frames(
    policy: Policy,
    frames: int | None = None,
    every: int | None = None,
    seed: int = 0,
    start: tuple[float, float] | None = None,
    size: int | None = None,
    max_episode_steps: int | None = None,
    animation: bool = False,
    video: bool = False,
) -> Frames:
    """Run one deterministic episode (env seeded `seed`; `start` fixes the maze's start) and take `frames` frames:
    spread evenly over the whole episode, the reset and the final state included (the episode is played once to
    learn its length, then again to render it: both are the same episode); with `every`, after the reset and every
    `every` steps instead, and the final state if the episode ends first. MuJoCo tasks are filmed by a camera that
    follows the body (`FollowCamera`). With `video`, the same episode also gives a video: a frame every `clip_every`
    steps of the task's time limit, and the final state (`Frames.clip`)."""
    env_id = policy.metadata["env_id"]
    frames = frames or default_frames(env_id, animation)
    max_episode_steps = max_episode_steps or (policy.metadata.get("config") or {}).get("max_episode_steps")
    if frames < 1 or (every is not None and every < 1):
        raise NpscoError("--frames and --every must be >= 1")
    size = size or default_size(env_id)
    env = follow_body(make_env(env_id, max_episode_steps, render_mode="rgb_array", render_size=size))
    try:
        if every is None:
            wanted = spread_steps(episode_length(env, policy, seed, start, time_limit(env)), frames)
        else:
            wanted = [k * every for k in range(frames)]
        return _record(env, policy, seed, start, size, wanted, clip_every(time_limit(env)) if video else None)
    finally:
        env.close()


def _record(
    env: gym.Env,
    policy: Policy,
    seed: int,
    start: tuple[float, float] | None,
    size: int,
    wanted: list[int],
    clip_every: int | None,
) -> Frames:
    """Play the episode up to the last `wanted` step (or its end), rendering the filmstrip's steps (and the final
    state) and, with `clip_every`, the video's."""
    strip_steps, last = set(wanted), max(wanted)
    out = Frames(images=[], steps=[], ended=False, episode_return=0.0, clip_every=clip_every or 1)
    bodies: list[np.ndarray] = []
    tracked = is_mujoco(env)
    obs = _reset(env, seed, start)
    while True:
        t = out.length
        if tracked:
            bodies.append(body_position(env))
        strip = t in strip_steps or out.ended
        video = clip_every is not None and (t % clip_every == 0 or out.ended)
        if strip or video:
            image = fit_frame(env.render(), size)
            if strip:
                out.images.append(image)
                out.steps.append(t)
            if video:
                out.clip.append(image)
                out.clip_steps.append(t)
        if out.ended or t >= last:
            break
        obs, reward, terminated, truncated, _ = env.step(policy.mean_action(obs))
        out.episode_return += float(reward)
        out.length += 1
        out.ended, out.terminated = bool(terminated or truncated), bool(terminated)
    out.body = np.stack(bodies) if tracked else None
    return out


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
