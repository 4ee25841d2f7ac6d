#!/usr/bin/env bash
# Chains of 5 novel policies of one setting of the study "good and different on every task"
# (benchmarks/results/good_and_different/PROTOCOL.md), one per task, the three side by side (the two cores shared). Run
# from the repository root of a checkout pinned at one commit; re-running resumes.
#
#   bash benchmarks/good_and_different/chains.sh SETTING SEED REFS OUT [CANDIDATES]
#
# SETTING: a name of settings.sh; SEED: the population seed (87000: development, 80000: confirmation); REFS: the
# folder holding TASK/ppo reference populations; OUT: where the runs go (OUT/TASK/SETTING-sSEED); CANDIDATES: per slot.
set -euo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/good_and_different/settings.sh
SETTING=$1 SEED=$2 REFS=$(cd "$3" && pwd) OUT=$4 CANDIDATES=${5:-1}
ARGS=$(settings_args "$SETTING")
CAND=""
if [ "$CANDIDATES" != 1 ]; then CAND="--candidates $CANDIDATES"; fi
export MUJOCO_GL=${MUJOCO_GL:-egl} OUT REFS ARGS SETTING SEED CAND
mkdir -p "$OUT/logs"
printf '%s\n' Hopper-v5 Walker2d-v5 HalfCheetah-v5 | xargs -P 3 -I{} bash -c '
  task={}
  # $ARGS and $CAND hold several words: split on purpose
  if .venv/bin/npsco population --env "$task" $ARGS $CAND --refs-from "$REFS/$task/ppo" --novel 5 --seed "$SEED" \
      --r0-scale 1 --preset default --steps 1000000 --no-progress --out "$OUT/$task/$SETTING-s$SEED" \
      > "$OUT/logs/$task-$SETTING-s$SEED.log" 2>&1; then
    echo "$(date -u +%H:%M:%S) done $task $SETTING $SEED"
  else
    echo "$(date -u +%H:%M:%S) FAILED $task $SETTING $SEED (see $OUT/logs/$task-$SETTING-s$SEED.log)"
  fi'
