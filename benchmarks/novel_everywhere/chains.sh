#!/usr/bin/env bash
# Chains of 5 novel policies of one setting of the study "novel and good on every task"
# (benchmarks/results/novel_everywhere/PROTOCOL.md), one per task, the three side by side (the two cores shared). Run
# from the repository root of a checkout pinned at one commit; re-running resumes (npsco population resumes its run).
#
#   bash benchmarks/novel_everywhere/chains.sh SETTING SEED REFS OUT [CANDIDATES]
#
# SETTING: lagr, lagr-state or rspo (as in the protocol); SEED: the population seed (62000: development, 70000:
# confirmation); REFS: the folder holding TASK/ppo reference populations (the paper campaign's sweep, or the
# confirmation's); OUT: where the population runs go (OUT/TASK/SETTING-sSEED); CANDIDATES: per slot (default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."
SETTING=$1 SEED=$2 REFS=$(cd "$3" && pwd) OUT=$4 CANDIDATES=${5:-1}
case $SETTING in
  lagr) ARGS="--method lagrangian" ;;
  lagr-state) ARGS="--method lagrangian --mset metric=state" ;;
  rspo) ARGS="--method rspo" ;;
  *) echo "unknown setting $SETTING (lagr, lagr-state, rspo)" >&2; exit 2 ;;
esac
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
