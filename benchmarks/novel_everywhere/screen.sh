#!/usr/bin/env bash
# The screen of the study "novel and good on every task" (benchmarks/results/novel_everywhere/PROTOCOL.md): the first
# novel policy (k0) of each setting on each task, against the paper campaign's references, two replicates (population
# seeds 60000 and 60100: k0 seeds 61000 and 61100), 1M steps each, two at a time. Run from the repository root of a
# checkout pinned at one commit; re-running resumes (a finished population is found trained by npsco itself).
#
#   bash benchmarks/novel_everywhere/screen.sh [OUT]     # OUT defaults to runs/novel_everywhere/screen
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/novel_everywhere/screen}
REFS=$PWD/benchmarks/results/paper/sweep
export MUJOCO_GL=${MUJOCO_GL:-egl} OUT REFS
mkdir -p "$OUT/logs"
for seed in 60000 60100; do
  for task in Hopper-v5 Walker2d-v5 HalfCheetah-v5; do
    echo "$task|lagr|$seed|--method lagrangian"
    echo "$task|lagr-state|$seed|--method lagrangian --mset metric=state"
    echo "$task|rspo|$seed|--method rspo"
  done
done | xargs -P 2 -I{} bash -c '
  IFS="|" read -r task name seed settings <<<"{}"
  # $settings holds several words: split on purpose
  if .venv/bin/npsco population --env "$task" $settings --refs-from "$REFS/$task/ppo" --novel 1 --seed "$seed" \
      --r0-scale 1 --preset default --steps 1000000 --no-progress --out "$OUT/$task/$name-s$seed" \
      > "$OUT/logs/$task-$name-s$seed.log" 2>&1; then
    echo "$(date -u +%H:%M:%S) done $task $name $seed"
  else
    echo "$(date -u +%H:%M:%S) FAILED $task $name $seed (see $OUT/logs/$task-$name-s$seed.log)"
  fi'
