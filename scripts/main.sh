#!/usr/bin/env bash
# Set up, then run the default experiment on the Four Reward Maze and print where its results are.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
.venv/bin/npsco train --env npsco/FourRewardMaze-v0 --out runs/main/ppo-seed0 "$@"
.venv/bin/npsco evaluate runs/main/ppo-seed0
