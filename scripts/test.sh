#!/usr/bin/env bash
# Set up, then run the test suite on both cores (extra arguments go to pytest, e.g. -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
.venv/bin/python -m pytest -n 2 "$@"
