"""Videos of policies for the report: MP4 (H.264) when an encoder is installed, else an animated GIF; and the frames
of a population video, the episodes of several policies side by side in one grid (`grid_frames`).

The encoder is the ffmpeg executable that the `imageio-ffmpeg` wheel ships (`pip install "npsco[video]"`; nothing is
downloaded at run time); without it, Pillow writes GIFs, which every browser and Markdown viewer plays too, at a few
times the size. Files are written atomically (temporary file in the same folder, then renamed).
"""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from npsco.errors import NpscoError
from npsco.io import remove_inside
from npsco.report.behaviour import save_animation
from npsco.report.figures import filmstrip

VIDEO_FORMATS = ("auto", "mp4", "gif")
"""`auto`: MP4 when imageio-ffmpeg is installed, else GIF."""


def mp4_available() -> bool:
    """Whether an H.264 encoder is at hand (the ffmpeg binary of the imageio-ffmpeg wheel)."""
    try:
        import imageio_ffmpeg  # an optional dependency (npsco[video])

        return Path(imageio_ffmpeg.get_ffmpeg_exe()).exists()
    except (ImportError, RuntimeError):
        return False


def resolve_format(fmt: str) -> str:
    """`mp4` or `gif` for a requested format; `mp4` without an encoder is an error that says what to install."""
    if fmt not in VIDEO_FORMATS:
        raise NpscoError(f"unknown video format {fmt!r}; choose one of {', '.join(VIDEO_FORMATS)}")
    if fmt == "auto":
        return "mp4" if mp4_available() else "gif"
    if fmt == "mp4" and not mp4_available():
        raise NpscoError("MP4 videos need an encoder: pip install imageio-ffmpeg (or npsco[video]); or use GIF")
    return fmt


def even_frames(images: list[np.ndarray]) -> list[np.ndarray]:
    """Frames cropped to even width and height (H.264 with 4:2:0 colour needs them), as uint8 RGB."""
    h, w = images[0].shape[:2]
    return [np.ascontiguousarray(np.asarray(i, np.uint8)[: h - h % 2, : w - w % 2, :3]) for i in images]


def write_mp4(images: list[np.ndarray], path: Path, fps: float) -> None:
    """Encode frames as H.264 MP4 (yuv420p, `faststart` so that browsers play it before it is fully read)."""
    import imageio_ffmpeg  # an optional dependency (npsco[video]); mp4_available() said it is there

    frames = even_frames(images)
    h, w = frames[0].shape[:2]
    writer = imageio_ffmpeg.write_frames(
        str(path),
        (w, h),
        fps=fps,
        codec="libx264",
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        quality=None,
        macro_block_size=2,
        ffmpeg_log_level="error",
        output_params=["-crf", "28", "-preset", "veryfast", "-movflags", "+faststart", "-f", "mp4"],
    )
    try:
        writer.send(None)
        for frame in frames:
            writer.send(frame)
    except (OSError, subprocess.SubprocessError) as e:
        raise NpscoError(f"{path}: the MP4 encoder failed ({e})") from None
    finally:
        writer.close()


def save_video(images: list[np.ndarray], path_stem: str | os.PathLike, fps: float, fmt: str = "auto") -> Path:
    """Write frames as `PATH_STEM.mp4` or `PATH_STEM.gif` (see `resolve_format`), atomically; returns the path. A dot
    in the stem stays (`ipd-r0x0.5-k1` -> `ipd-r0x0.5-k1.gif`): it is not taken for a suffix."""
    if not images:
        raise ValueError("no frames")
    fmt = resolve_format(fmt)
    stem = Path(path_stem)
    path = stem.with_name(f"{stem.name}.{fmt}")
    if fmt == "gif":
        return save_animation(images, path, fps=fps)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_mp4(images, temp, fps)
        os.replace(temp, path)
    finally:
        remove_inside(path.parent, temp)
    return path


# ------------------------------------------------------------------------------------------------ population video
LABEL_HEIGHT = 14
"""Pixels of the band above each tile of a population video that names the policy and the step shown."""


@dataclass
class Tile:
    """One policy's episode in a population video: its frames, the step of each, and whether the last is the end."""

    label: str
    frames: list[np.ndarray]
    steps: list[int]
    ended: bool


def grid_columns(n: int, max_columns: int = 5) -> int:
    """Columns of a grid of `n` tiles: at most `max_columns`, the rows balanced (6 tiles: 3 + 3, 7: 4 + 3)."""
    rows = math.ceil(n / max_columns)
    return math.ceil(n / rows)


@cache
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=11)


def label_band(text: str, width: int, ended: bool = False) -> np.ndarray:
    """A (LABEL_HEIGHT, width, 3) band with `text` in it: black on light grey, white on dark red once ended."""
    band = Image.new("RGB", (width, LABEL_HEIGHT), (120, 20, 20) if ended else (235, 235, 235))
    ImageDraw.Draw(band).text((3, 1), text, fill=(255, 255, 255) if ended else (0, 0, 0), font=_font())
    return np.asarray(band)


def grid_frames(tiles: list[Tile], max_columns: int = 5, pad: int = 2) -> list[np.ndarray]:
    """The frames of a population video: at frame j, tile i shows its j-th frame under a band naming the policy and
    the step; a tile whose episode has ended stays on its last frame, its band saying at which step it ended. The
    tiles (frames of one size) are laid out as `filmstrip` does, `grid_columns` a row; the video lasts as long as
    the longest episode. All tiles should be sampled alike (the same steps between frames): then every frame of the
    video shows one moment of every episode."""
    if not tiles or any(not t.frames or len(t.frames) != len(t.steps) for t in tiles):
        raise ValueError("every tile needs frames and one step per frame")
    columns = grid_columns(len(tiles), max_columns)
    width = tiles[0].frames[0].shape[1]
    out = []
    for j in range(max(len(t.frames) for t in tiles)):
        cells = []
        for t in tiles:
            k = min(j, len(t.frames) - 1)
            over = t.ended and k == len(t.frames) - 1
            text = f"{t.label}  ended at step {t.steps[k]}" if over else f"{t.label}  step {t.steps[k]}"
            cells.append(np.concatenate([label_band(text, width, over), t.frames[k]]))
        out.append(filmstrip(cells, columns=columns, pad=pad))
    return out
