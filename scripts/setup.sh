#!/usr/bin/env bash
# Create .venv (if missing) and install npsco with its test tools. Idempotent; needs only python3 >= 3.11.
# torch is pinned exactly: torch==2.13.0 resolves to a CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
# the releases npsco's fast environment step was checked against bit for bit (npsco.envs.direct_step.TESTED_GYMNASIUM)
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]" "gymnasium[mujoco]==1.4.0" "mujoco==4.0.0"
