"""Learning benchmark (issue 3): an IPD population on Hopper-v5 next to its PPO references.

The references are the PPO policies of the MuJoCo benchmark (`benchmarks/ppo_mujoco.py`, default preset, 1M steps,
seeds 0-2), borrowed with `--ref-checkpoints`; the novel policies are IPD at the default threshold (r0 = mean PPO-PPO
distance), t_S = 20, same PPO settings and budget. Then `npsco evaluate` measures every policy: deterministic return,
novelty against the references on its own visited states, and novelty relative to the mean PPO-PPO distance.
The population resumes if interrupted; `--summarize` only rewrites the results from what has finished so far.

    python benchmarks/hopper_ipd.py --novel 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npsco.cli import main as npsco

REFS = [f"runs/bench/ppo_mujoco/Hopper-v5-seed{s}" for s in (0, 1, 2)]
RESULTS = Path("benchmarks/results")


def summarize(run: str, name: str) -> None:
    from npsco.evaluation import evaluate_runs
    from npsco.io import atomic_write_text, read_json

    doc = evaluate_runs([run], episodes=10, seed=0, reuse=True, write=True)[0]
    manifest = read_json(Path(run) / "manifest.json")
    r0 = next((m["threshold"] for m in manifest["members"] if m.get("threshold")), float("nan"))
    lines = [
        "# IPD on Hopper-v5 next to its PPO references",
        "",
        f"Command: `python {' '.join(sys.argv)}` (population in `{run}`, then `npsco evaluate {run} --episodes 10`).",
        f"References: {', '.join(REFS)} (npsco PPO, default preset, 1M steps). Novel policies: IPD, default preset, "
        f"1M steps, t_S = 20, instant rule, r0 = {r0:.4f} "
        f"(the references' mean pairwise distance is {manifest['r0_default']:.4f}).",
        "",
        "| policy | role | return (10 det. episodes) | novelty vs PPO refs | relative novelty | state novelty | success |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["policies"]:
        rel = "" if r["relative_novelty"] is None else f"{r['relative_novelty']:.2f}"
        lines.append(f"| {r['name']} | {r['role']} | {r['return_mean']:.0f} +- {r['return_std']:.0f} | "
                     f"{r['novelty']:.4f} | {rel} | {r['state_novelty']:.3f} | {r['success']} |")
    lines += ["", f"Mean PPO-PPO distance (same episodes): {doc['ppo_mean_distance']:.4f}.",
              f"Pending (not yet trained when this was written): {doc['pending'] or 'none'}."]
    atomic_write_text(RESULTS / f"{name}.md", "\n".join(lines) + "\n")
    from npsco.evaluation import write_evaluation

    write_evaluation(doc, RESULTS / name)
    print("\n".join(lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--novel", type=int, default=3)
    p.add_argument("--r0-scale", type=float, default=1.0, help="threshold as a multiple of the default r0")
    p.add_argument("--name", default="hopper_ipd", help="run runs/bench/NAME, results benchmarks/results/NAME.*")
    p.add_argument("--summarize", action="store_true", help="only write the results of what has finished")
    args = p.parse_args()
    run = f"runs/bench/{args.name}"
    if not args.summarize:
        code = npsco(["population", "--env", "Hopper-v5", "--method", "ipd", "--ref-checkpoints", *REFS,
                      "--novel", str(args.novel), "--r0-scale", str(args.r0_scale), "--out", run, "--no-progress"])
        if code:
            sys.exit(code)
    summarize(run, args.name)


if __name__ == "__main__":
    main()
