"""The `npsco` command: one subcommand per job. Errors the user can fix print one line and exit 2 (`--debug` for a
traceback); Ctrl-C exits 130 after saving what was in training."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from npsco.errors import NpscoError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(fn):
        COMMANDS[name] = fn
        return fn
    return register


def _env_name(env_id: str) -> str:
    return env_id.split("/")[-1]


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2))


# ------------------------------------------------------------------------------------------------------------- train
@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from npsco.algos.ppo import train
    from npsco.config import apply_overrides, preset
    from npsco.io import atomic_write_json, read_json

    cfg = preset(args.env, args.preset)
    cfg = apply_overrides(cfg, [f"seed={args.seed}"] + ([f"total_timesteps={args.steps}"] if args.steps else []) + args.set)
    cfg.validate()
    from npsco.envs.make import check_env_id

    check_env_id(cfg.env_id)
    out = Path(args.out or f"runs/train/{_env_name(cfg.env_id)}-seed{cfg.seed}")
    config = {"command": "train", "preset": args.preset, "ppo": cfg.to_dict()}
    if (out / "config.json").exists() and not args.force:
        if read_json(out / "config.json") != config:
            raise NpscoError(f"{out} holds a run with a different configuration; choose another --out or pass --force")
        if (out / "policy.safetensors").exists():
            print(f"{out}: already trained with this configuration (policy.safetensors); --force retrains")
            return 0
    atomic_write_json(out / "config.json", config)
    print(f"training PPO on {cfg.env_id} (preset {args.preset}, seed {cfg.seed}, {cfg.total_timesteps} steps) -> {out}")
    result = train(cfg, run_dir=out, progress=not args.no_progress, tensorboard=not args.no_tensorboard)
    if result.interrupted:
        print(f"interrupted: the policy in training is saved at {out / 'checkpoints' / 'interrupted.safetensors'}")
        return 130
    if result.eval_curve:
        last = result.eval_curve[-1]
        print(f"final deterministic evaluation: {last['eval/return_mean']:.2f} +- {last['eval/return_std']:.2f} "
              f"({cfg.eval_episodes} episodes)")
    print(f"policy: {out / 'policy.safetensors'}   metrics: {out / 'metrics.jsonl'}   tensorboard: {out / 'tensorboard'}")
    return 0


# ---------------------------------------------------------------------------------------------------------- evaluate
@command("evaluate")
def cmd_evaluate(args: argparse.Namespace) -> int:
    from npsco.evaluation import run_episodes
    from npsco.io import atomic_write_json
    from npsco.policy import load_policy, resolve_checkpoint

    path = resolve_checkpoint(args.checkpoint)
    policy = load_policy(path)
    episodes = args.episodes or (100 if policy.metadata["env_id"].startswith("npsco/") else 10)
    res = run_episodes(policy, episodes, seed=args.seed, max_episode_steps=policy.metadata["config"].get("max_episode_steps"))
    summary = {"checkpoint": str(path), "env_id": policy.metadata["env_id"], "deterministic": True, **res.summary(),
               "returns": [float(r) for r in res.returns]}
    out = Path(args.out) if args.out else path.with_suffix(".eval.json")
    atomic_write_json(out, summary)
    line = f"{policy.metadata['env_id']}: return {summary['return_mean']:.2f} +- {summary['return_std']:.2f} over {episodes} deterministic episodes"
    if "goals" in summary:
        line += "; goals " + ", ".join(f"{k} {v}" for k, v in summary["goals"].items() if v)
    print(line)
    print(f"written: {out}")
    return 0


# -------------------------------------------------------------------------------------------------------- population
def population_config(args: argparse.Namespace):
    """Build a PopulationConfig from the command line (shared by `population` and later `sweep`)."""
    from npsco.config import MethodConfig, apply_overrides, preset
    from npsco.envs.make import check_env_id
    from npsco.population import PopulationConfig

    check_env_id(args.env)
    ppo = preset(args.env, args.preset)
    ppo = apply_overrides(ppo, ([f"total_timesteps={args.steps}"] if args.steps else []) + args.set)
    method = MethodConfig(method=args.method)
    flags = [f"r0={args.r0}"] if args.r0 is not None else []
    flags += [f"t_start={args.t_start}"] if args.t_start is not None else []
    flags += [f"ipd_rule={args.ipd_rule}"] if args.ipd_rule else []
    method = apply_overrides(method, flags + args.mset)
    return PopulationConfig(ppo=ppo, method=method, refs=args.refs, novel=args.novel,
                            r0_scales=tuple(args.r0_scale), refs_from=args.refs_from,
                            ref_checkpoints=tuple(args.ref_checkpoints))


@command("population")
def cmd_population(args: argparse.Namespace) -> int:
    from npsco.population import Population, summary_lines

    config = population_config(args)
    out = Path(args.out or f"runs/population/{_env_name(config.ppo.env_id)}-{config.method.method}")
    pop = Population(out, config, progress=not args.no_progress)
    print(f"population in {out}: {config.refs if not config.refs_from else 'borrowed'} PPO references, "
          f"{config.novel} novel {config.method.method} policies per chain")
    members = pop.run()
    print("\n".join(summary_lines(members)))
    print(f"manifest: {out / 'manifest.json'}")
    return 0


# --------------------------------------------------------------------------------------------------------- threshold
@command("threshold")
def cmd_threshold(args: argparse.Namespace) -> int:
    from npsco.io import atomic_write_json
    from npsco.novelty.threshold import default_threshold
    from npsco.policy import load_policy

    paths, names = [], []
    for item in args.policies:
        p = Path(item)
        if (p / "manifest.json").exists():
            from npsco.population import load_manifest

            for m in load_manifest(p)["members"]:
                if m["role"] == "reference" and m["status"] == "done":
                    paths.append(p / m["path"] / "policy.safetensors")
                    names.append(m["name"])
        else:
            paths.append(p)
            names.append(p.stem if p.suffix else p.name)
    policies = [load_policy(p) for p in paths]
    th = default_threshold(policies, names, episodes=args.episodes, seed=args.seed)
    print(f"r0 = {th.r0:.6f}  (mean pairwise distance of {len(policies)} policies)")
    width = max(len(n) for n in names)
    for n, row in zip(names, th.matrix):
        print(f"{n:>{width}s} " + " ".join(f"{v:7.4f}" for v in row))
    if args.out:
        atomic_write_json(args.out, th.to_dict())
        print(f"written: {args.out}")
    return 0


# ------------------------------------------------------------------------------------------------------------ parser
def build_parser() -> argparse.ArgumentParser:
    from npsco import __version__
    from npsco.config import MAZE_ID, PRESETS

    p = argparse.ArgumentParser(prog="npsco", description="Novel policy seeking with constrained optimization (IPD on PPO).")
    p.add_argument("--version", action="version", version=f"npsco {__version__}")
    p.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    t = sub.add_parser("train", help="train one PPO policy", description="Train one PPO policy and save it.")
    t.add_argument("--env", default=MAZE_ID, help=f"Gymnasium env id (default {MAZE_ID})")
    t.add_argument("--preset", default="default", choices=PRESETS, help="hyper-parameter preset (default: default)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--steps", type=float, default=None, help="total environment steps (default: the preset's)")
    t.add_argument("--out", default=None, help="run directory (default runs/train/ENV-seedS)")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a PPO setting, e.g. --set learning_rate=1e-3 (see docs/configuration.md)")
    t.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--no-tensorboard", action="store_true", help="no TensorBoard event files")

    e = sub.add_parser("evaluate", help="evaluate a checkpoint", description="Deterministic evaluation of a checkpoint.")
    e.add_argument("checkpoint", help="a policy .safetensors file or a run directory holding policy.safetensors")
    e.add_argument("--episodes", type=int, default=None, help="episodes (default 100 on the maze, 10 otherwise)")
    e.add_argument("--seed", type=int, default=0, help="episode i runs on an env seeded seed + i")
    e.add_argument("--out", default=None, help="JSON output (default: next to the checkpoint, .eval.json)")
    from npsco.config import METHODS

    pp = sub.add_parser("population", help="train R PPO references then K novel policies",
                        description="The paper's workflow: R PPO references (seeds 0..R-1), the threshold r0, then K "
                                    "novel policies one after another. Re-running the same command resumes.")
    pp.add_argument("--env", default=MAZE_ID, help=f"Gymnasium env id (default {MAZE_ID})")
    pp.add_argument("--method", default="ipd", choices=METHODS, help="method of the novel policies (default ipd)")
    pp.add_argument("--refs", type=int, default=5, help="number of PPO references R (default 5; paper 10)")
    pp.add_argument("--novel", type=int, default=5, help="number of novel policies K per chain (default 5; paper 10)")
    pp.add_argument("--out", default=None, help="run directory (default runs/population/ENV-METHOD)")
    pp.add_argument("--refs-from", default=None, metavar="RUN", help="reuse the references of an earlier run")
    pp.add_argument("--ref-checkpoints", nargs="+", default=[], metavar="CKPT",
                    help="use these checkpoints (or npsco train run directories) as the references")
    pp.add_argument("--r0", type=float, default=None, help="absolute novelty threshold (default: the references' "
                                                           "mean pairwise distance x --r0-scale)")
    pp.add_argument("--r0-scale", type=float, nargs="+", default=[1.0], metavar="S",
                    help="threshold(s) as multiples of the default; several values train one chain each (Fig. 4)")
    pp.add_argument("--t-start", type=int, default=None, help="t_S: the constraint applies after this many steps "
                                                              "(default 20 on MuJoCo, 3 on the maze)")
    pp.add_argument("--ipd-rule", choices=("instant", "cumulative"), default=None,
                    help="IPD termination rule: instant (paper, default) or cumulative (authors' code)")
    pp.add_argument("--preset", default="default", choices=PRESETS)
    pp.add_argument("--steps", type=float, default=None, help="steps per policy (default: the preset's)")
    pp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a PPO setting")
    pp.add_argument("--mset", action="append", default=[], metavar="KEY=VALUE",
                    help="override a method setting (see docs/methods/), e.g. --mset wsr_weight=5")
    pp.add_argument("--no-progress", action="store_true", help="no progress bars")

    th = sub.add_parser("threshold", help="the default r0 of a set of policies",
                        description="r0 = mean pairwise distance between policies, each measured on its own visited "
                                    "states (deterministic episodes).")
    th.add_argument("policies", nargs="+", help="checkpoints, or population run directories (their references)")
    th.add_argument("--episodes", type=int, default=10, help="deterministic episodes per policy (default 10)")
    th.add_argument("--seed", type=int, default=0)
    th.add_argument("--out", default=None, help="write the matrix and r0 as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "steps", None) is not None:
        args.steps = int(args.steps)
    try:
        return COMMANDS[args.command](args)
    except NpscoError as e:
        if args.debug:
            raise
        print(f"npsco {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"npsco {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
