"""Learning benchmark (issue 3): an IPD population on Hopper-v5 next to its PPO references.

The references are the PPO policies of the MuJoCo benchmark (`benchmarks/ppo_mujoco.py`, default preset, 1M steps,
seeds 0-2), borrowed with `--ref-checkpoints`; the novel policies are IPD at the task's default threshold multiple
(`--r0-scale` to choose another), t_S = 20, same PPO settings and budget. Then `npsco evaluate` measures every policy:
deterministic return, novelty against the references on its own visited states, and novelty relative to the mean
PPO-PPO distance. The settings in the results are read from the run (its config.json and the references'
checkpoints), not assumed. The population resumes if interrupted; `--summarize` only rewrites the results from what
has finished so far, keeping the sections written by hand (from the first `## ` heading on).

    python benchmarks/hopper_ipd.py --novel 3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npsco.cli import main as npsco

REFS = [f"runs/bench/ppo_mujoco/Hopper-v5-seed{s}" for s in (0, 1, 2)]
RESULTS = Path("benchmarks/results/hopper_ipd")


def settings(run: str) -> str:
    """The settings of a population run as they are recorded in it: the references' budgets, and the novel policies'
    method, budget, t_S, rule and thresholds."""
    from npsco.io import read_json
    from npsco.policy import load_policy

    config, manifest = read_json(Path(run) / "config.json"), read_json(Path(run) / "manifest.json")
    refs = [m for m in manifest["members"] if m["role"] == "reference"]
    ref_steps = sorted(
        {load_policy(Path(run) / m["path"] / "policy.safetensors").metadata["config"]["total_timesteps"] for m in refs}
    )
    from npsco.tasks import default_t_start

    ppo, method = config["ppo"], config["method"]
    t_start = method["t_start"] if method.get("t_start") is not None else default_t_start(ppo["env_id"])
    thresholds = sorted({m["threshold"] for m in manifest["members"] if m.get("threshold") is not None})
    scales = ", ".join(f"{x:g}" for x in config.get("r0_scales") or [1.0])
    return (
        f"References: {', '.join(m['path'] for m in refs)} ({', '.join(f'{s:,}' for s in ref_steps)} steps). "
        f"Novel policies: {method['method'].upper()}, {ppo['total_timesteps']:,} steps, t_S = {t_start}, "
        f"{method['ipd_rule']} rule, r0 = {scales} x the references' mean pairwise distance "
        f"({manifest['r0_default']:.4f}): " + ", ".join(f"{t:.4f}" for t in thresholds) + "."
    )


def summarize(run: str, name: str, results: Path = RESULTS) -> None:
    from npsco.evaluation.evaluate import evaluate_runs, write_evaluation
    from npsco.io import atomic_write_text, read_json
    from npsco.report.provenance import population_command

    doc = evaluate_runs([run], episodes=10, seed=0, reuse=True, write=True)[0]
    lines = [
        "# IPD on Hopper-v5 next to its PPO references",
        "",
        f"Commands: `{population_command(run, read_json(Path(run) / 'config.json'))}`, then "
        f"`npsco evaluate {run} --episodes 10` (both run by `python benchmarks/hopper_ipd.py` with the same `--name`).",
        settings(run),
        "",
        "| policy | role | return (10 det. episodes) | novelty vs PPO refs | relative novelty | state novelty "
        "| success |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in doc["policies"]:
        rel = "" if r["relative_novelty"] is None else f"{r['relative_novelty']:.2f}"
        lines.append(
            f"| {r['name']} | {r['role']} | {r['return_mean']:.0f} +- {r['return_std']:.0f} | "
            f"{r['novelty']:.4f} | {rel} | {r['state_novelty']:.3f} | {r['success']} |"
        )
    lines += [
        "",
        f"Mean PPO-PPO distance (same episodes): {doc['ppo_mean_distance']:.4f}.",
        f"Pending (not yet trained when this was written): {doc['pending'] or 'none'}.",
        "",
    ]
    path = results / f"{name}.md"
    if path.exists():  # keep what was written by hand after the generated part
        old = path.read_text(encoding="utf-8")
        at = old.find("\n## ")
        if at >= 0:
            lines.append(old[at + 1 :].rstrip("\n"))
    atomic_write_text(path, "\n".join(lines).rstrip("\n") + "\n")
    write_evaluation(doc, results / name)
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--novel", type=int, default=3)
    p.add_argument(
        "--r0-scale",
        type=float,
        default=None,
        help="threshold as a multiple of the default r0 (default: the task's default multiple)",
    )
    p.add_argument(
        "--name", default="hopper_ipd", help="run runs/bench/NAME, results benchmarks/results/hopper_ipd/NAME.*"
    )
    p.add_argument("--summarize", action="store_true", help="only write the results of what has finished")
    args = p.parse_args(argv)
    run = f"runs/bench/{args.name}"
    if not args.summarize:
        scale = [] if args.r0_scale is None else ["--r0-scale", str(args.r0_scale)]
        code = npsco(
            [
                "population",
                "--env",
                "Hopper-v5",
                "--method",
                "ipd",
                "--ref-checkpoints",
                *REFS,
                "--novel",
                str(args.novel),
                *scale,
                "--out",
                run,
                "--no-progress",
            ]
        )
        if code:
            sys.exit(code)
    summarize(run, args.name)


if __name__ == "__main__":
    main()
