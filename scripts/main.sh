#!/usr/bin/env bash
# Set up, then run the default experiment on the Four Reward Maze: 5 PPO references, 3 novel policies per method
# against them (IPD also at twice the default threshold, for Fig. 4), 100k steps each, trained two at a time, then
# the report (Table 1, Figs. 2-4, filmstrips). Minutes on 2 cores (each policy's time is `wall_seconds` in its
# population's manifest.json); re-running resumes. Extra arguments go to `npsco experiment` (e.g. --workers 4); see
# docs/report.md. Its last line says where the report is (runs/main/report/report.html and .md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
METHODS="ipd wsr tnb ctnb cpo"  # the novel-policy methods: add or remove one word here
# shellcheck disable=SC2086  # METHODS is a list of words
.venv/bin/npsco experiment --out runs/main --refs 5 --novel 3 --methods $METHODS --ablation 2 --steps 100000 \
  --workers 2 "$@"
