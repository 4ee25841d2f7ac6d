"""Is every MuJoCo policy in frame for its whole episode? Films one deterministic episode of each checkpoint as the
report does (env seed 0, 160-pixel frames, the camera that follows the body, a frame every 10th step and the final
state) and finds the robot in every frame by its colour: its parts are orange to pink (red well above green and
blue), the floor green, white and black, the sky grey-blue. A policy passes when the robot is in every frame and
touches no edge of any.

    MUJOCO_GL=egl python benchmarks/report_in_frame.py benchmarks/results/paper/sweep/*/*/refs/*/policy.safetensors

Prints one line per checkpoint (steps of its episode, fewest robot pixels in a frame, robot pixels on the frames'
edges) and a summary; exits 1 when a policy fails.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from npsco.policy import load_policy
from npsco.report.behaviour import REPORT_FRAME, episode_frames


def robot_pixels(image: np.ndarray) -> np.ndarray:
    """Where the robot is in a frame: red well above green and blue."""
    i = image.astype(int)
    return (i[..., 0] > i[..., 1] + 25) & (i[..., 0] > i[..., 2] + 40)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="policy .safetensors files of MuJoCo tasks")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.checkpoints:
        frames = episode_frames(load_policy(path), 2, seed=0, size=REPORT_FRAME, video=True)
        masks = [robot_pixels(image) for image in frames.clip]
        fewest = min(int(m.sum()) for m in masks)
        edges = max(int(m[[0, -1], :].sum() + m[:, [0, -1]].sum()) for m in masks)
        ok = fewest > 0 and edges == 0
        failed += not ok
        print(
            f"{path}: {frames.length} steps, {len(masks)} frames, fewest robot pixels {fewest}, on edges {edges}: "
            f"{'in frame' if ok else 'OUT OF FRAME'}",
            flush=True,
        )
    print(f"{len(args.checkpoints) - failed} of {len(args.checkpoints)} policies in frame for their whole episode")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
