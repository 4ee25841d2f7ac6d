"""Do the committed runs evaluate bit for bit as their manifests say? Each policy's final evaluation (the manifest's
`final_eval`: its deterministic episodes with seeds 10000.., as `npsco population` ran them after training) is run
again from the committed checkpoints with npsco's own evaluation, and the returns compared exactly.

    python benchmarks/novel_everywhere/check_manifests.py RUN... --out results.md

Each RUN is a population run directory (or a folder of them); its evaluation/ cache is neither read nor kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from npsco.evaluation.evaluate import evaluate_run
from npsco.io import atomic_write_text
from npsco.seeds import FINAL_EVALUATION

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import population_runs  # noqa: E402  (the study's own helper, beside this script)


def check(run: Path) -> list[tuple[str, float, float]]:
    """(policy, manifest's final return, the return evaluated again) for every trained policy of `run`."""
    manifest = json.loads((run / "manifest.json").read_text())
    done = [m for m in manifest["members"] if m.get("final_eval")]
    episodes = {m["final_eval"]["episodes"] for m in done}
    if len(episodes) != 1:
        raise SystemExit(f"{run}: final evaluations of different lengths {sorted(episodes)}")
    doc = evaluate_run(run, episodes.pop(), FINAL_EVALUATION, log=lambda line: None)  # (writes no evaluation/)
    again = {p["name"]: p["return_mean"] for p in doc["policies"]}
    return [(m["name"], m["final_eval"]["return_mean"], again[m["name"]]) for m in done]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    lines = [
        "# The committed runs, evaluated again",
        "",
        f"Made by `python benchmarks/novel_everywhere/check_manifests.py {' '.join(args.runs)} --out {args.out}`.",
        "",
        "| run | policies | equal to the manifest, bit for bit | largest difference |",
        "|---|---|---|---|",
    ]
    total = equal = 0
    for run in population_runs(args.runs):
        rows = check(run)
        same = sum(a == b for _, a, b in rows)
        worst = max(abs(a - b) for _, a, b in rows)
        total, equal = total + len(rows), equal + same
        lines.append(f"| {run} | {len(rows)} | {same} | {worst:.3g} |")
    lines += ["", f"**{equal} of {total}** policies' final returns equal their manifests' exactly.", ""]
    atomic_write_text(args.out, "\n".join(lines))
    print(f"{equal} of {total} equal: {args.out}")
    return 0 if equal == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
