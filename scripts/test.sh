#!/usr/bin/env bash
# Set up, check the code (ruff lint and format, mypy: any finding fails), then run the test suite on both cores
# (extra arguments go to pytest, e.g. -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
.venv/bin/mypy
.venv/bin/python -m pytest -n 2 "$@"
