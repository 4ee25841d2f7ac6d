#!/usr/bin/env bash
# The screen of the study "good and different on every task" (benchmarks/results/good_and_different/PROTOCOL.md):
# the first novel policy (k0) of each named setting on each task, against the paper campaign's references, two
# replicates (population seeds 85000 and 85100: k0 seeds 86000 and 86100), 1M steps each, two at a time. Run from the
# repository root of a checkout pinned at one commit; re-running resumes.
#
#   bash benchmarks/good_and_different/screen.sh OUT SETTING...     # e.g. runs/gd/screen lagr-m20 lagr-m30
set -euo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/good_and_different/settings.sh
OUT=$1; shift
REFS=$PWD/benchmarks/results/paper/sweep
for s in "$@"; do settings_args "$s" >/dev/null; done   # refuse an unknown setting before anything runs
export MUJOCO_GL=${MUJOCO_GL:-egl} OUT REFS
mkdir -p "$OUT/logs"
for seed in 85000 85100; do
  for task in Hopper-v5 Walker2d-v5 HalfCheetah-v5; do
    for s in "$@"; do echo "$task|$s|$seed|$(settings_args "$s")"; done
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
