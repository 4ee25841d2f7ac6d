#!/usr/bin/env bash
# Resume a packed sweep (benchmarks/device_sweep.py pack) on a lent many-core machine until DEADLINE seconds after
# this script starts, then stop it and write what it holds to $OUT/device.tgz (merge it with `device_sweep.py merge`).
#
#   bash benchmarks/device_sweep.sh DEADLINE [WORKERS]      # in the repository root there, with .devrun/ and .whl/
#
# The sweep is unpacked at the campaign's own absolute path (its manifests name references by absolute path): what
# stands at that path there is replaced. Every policy trains from its seed; one unfinished at DEADLINE is dropped.
set -u -o pipefail
T0=$(date +%s)
DEADLINE=${1:?usage: device_sweep.sh DEADLINE [WORKERS]}
WORKERS=${2:-$(getconf _NPROCESSORS_ONLN)}
OUT=${OUT:?set OUT to the folder whose files come back}
case "$DEADLINE$WORKERS" in *[!0-9]*) echo "DEADLINE and WORKERS are whole numbers" >&2; exit 2 ;; esac
ROOT=$PWD/.devrun
SITE=$(mktemp -d)  # the wheels, installed for this run only
{ read -r CAMP; read -r SWEEP; read -r GRID; } < "$ROOT/campaign_dir.txt" || exit 2
case "$CAMP" in /?*) ;; *) echo "campaign path $CAMP is not absolute" >&2; exit 2 ;; esac
case "$PWD/" in "$CAMP"/*) echo "campaign path $CAMP holds this checkout" >&2; exit 2 ;; esac
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl || exit 3
fi
export PYTHONPATH=$SITE:$ROOT/src
# no rendering in training (MUJOCO_GL=egl, the report's default, needs libEGL); one thread per process
export MUJOCO_GL=disable OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
export PYTHONUNBUFFERED=1
rm -rf "$CAMP" && mkdir -p "$CAMP/$(dirname "$GRID")" || exit 4
tar xzf "$ROOT/sweep.tgz" -C "$CAMP" && cp "$ROOT/$GRID" "$CAMP/$GRID" || exit 5
cd "$CAMP" || exit 6
python3 - <<'PY' | tee "$OUT/versions.txt" || exit 7
import platform, sys, numpy, torch, mujoco, gymnasium, numba
print(platform.machine(), "Python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__,
      "mujoco", mujoco.__version__, "gymnasium", gymnasium.__version__, "numba", numba.__version__)
PY
LEFT=$(( DEADLINE - ($(date +%s) - T0) ))
if [ "$LEFT" -lt 60 ]; then echo "only ${LEFT}s left of DEADLINE: not started" >&2; exit 8; fi
echo "training for ${LEFT}s with $WORKERS workers"
setsid python3 -m npsco.cli sweep "$GRID" --workers "$WORKERS" --out "$SWEEP" > "$OUT/sweep.log" 2>&1 &
PG=$!  # setsid in a script does not fork: this is the process group of the sweep and its workers
while [ $(( $(date +%s) - T0 )) -lt "$DEADLINE" ] && kill -0 "$PG" 2>/dev/null; do sleep 2; done
kill -TERM -- -"$PG" 2>/dev/null; sleep 4; kill -KILL -- -"$PG" 2>/dev/null
grep -aE "^\[.*(done|error) " "$OUT/sweep.log" | tail -30
tar czf "$OUT/device.tgz.part" --exclude=checkpoints --exclude=tensorboard --exclude=evaluation "$SWEEP" \
  && mv "$OUT/device.tgz.part" "$OUT/device.tgz" || exit 9
echo "elapsed $(( $(date +%s) - T0 ))s"
