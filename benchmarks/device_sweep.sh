#!/usr/bin/env bash
# Resume a packed sweep (benchmarks/device_sweep.py pack) on a lent many-core machine for DEADLINE seconds, then stop
# it and write what it holds to $OUT/device.tgz (merge it back with `device_sweep.py merge`).
#
#   bash benchmarks/device_sweep.sh DEADLINE [WORKERS]      # in the repository root there, with .devrun/ and .whl/
#
# The sweep is unpacked at the campaign's own absolute path (its manifests name references by absolute path), so
# that path must be free there. Every policy still trains from its seed; one left unfinished at DEADLINE is dropped.
set -u
T0=$(date +%s)
DEADLINE=${1:?usage: device_sweep.sh DEADLINE [WORKERS]}
WORKERS=${2:-16}
OUT=${OUT:?set OUT to the folder whose files come back}
ROOT=$PWD/.devrun
SITE=$(mktemp -d)  # the wheels, installed for this run only
{ read -r CAMP; read -r SWEEP; read -r GRID; } < "$ROOT/campaign_dir.txt"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl || exit 3
fi
export PYTHONPATH=$SITE:$ROOT/src
# no rendering in training (MUJOCO_GL=egl, the report's default, needs libEGL); one thread per process
export MUJOCO_GL=disable OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
export PYTHONUNBUFFERED=1
rm -rf "$CAMP" && mkdir -p "$CAMP" || exit 4
tar xzf "$ROOT/sweep.tgz" -C "$CAMP" && mkdir -p "$CAMP/$(dirname "$GRID")" \
  && cp "$ROOT/$GRID" "$CAMP/$GRID" || exit 5
cd "$CAMP" || exit 6
python3 - <<'EOF' | tee "$OUT/versions.txt"
import platform, sys, numpy, torch, mujoco, gymnasium, numba
print(platform.machine(), "Python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__,
      "mujoco", mujoco.__version__, "gymnasium", gymnasium.__version__, "numba", numba.__version__)
EOF
setsid python3 -m npsco.cli sweep "$GRID" --workers "$WORKERS" --out "$SWEEP" > "$OUT/sweep.log" 2>&1 &
PG=$!
while [ $(( $(date +%s) - T0 )) -lt "$DEADLINE" ] && kill -0 "$PG" 2>/dev/null; do sleep 2; done
kill -TERM -- -"$PG" 2>/dev/null; sleep 4; kill -KILL -- -"$PG" 2>/dev/null
grep -aE "^\[.*(done|error) " "$OUT/sweep.log" | tail -30
tar czf "$OUT/device.tgz" --exclude=checkpoints "$SWEEP"
echo "elapsed $(( $(date +%s) - T0 ))s"
