"""Throughput benchmark (issue 6): npsco PPO against Stable-Baselines3 PPO at identical settings, and the cost of IPD's
reference policies, on Hopper-v5, on this machine, in one run.

    python benchmarks/throughput.py                      # 100k steps per PPO run, minibatch 64 and 256, IPD M=0..20
    python benchmarks/throughput.py --skip-ppo --out benchmarks/results/throughput/throughput_ipd   # only IPD's cost
    python benchmarks/throughput.py --steps 20000 --ipd-steps 10240 --repeats 1   # a quick look

Every configuration runs in a fresh subprocess (`--worker`), one after the other, alternating npsco and SB3 (and the
IPD sizes) within each repeat, so that the background load of this shared machine falls on all of them alike; 3
repeats by default, SB3 first in every other one. A speed ratio is the median of the repeats' ratios, reported with
their min and max: one run is not a measurement on a machine whose speed drifts. For each
run it records: steps/s (wall clock of the training call only: env and model construction excluded), the process's
CPU seconds (user + sys; less sensitive to other processes than wall time), the rollout/update split (npsco), the
peak resident memory of the subprocess (`ru_maxrss` of the rusage that `os.wait4` returns for that one child,
whole process: Python, torch, MuJoCo, buffers), and the
1-minute load average before and after. `--baseline-src DIR` also runs the npsco configurations with `DIR` (another
checkout's `src/`, e.g. a `git worktree` of an older commit) first on PYTHONPATH: before/after in the same run.

Settings, the same on both sides: Hopper-v5, 8 environments stepped in one process (SB3: `make_vec_env(n_envs=8)`
= DummyVecEnv; npsco: its default `auto` backend, Gymnasium's envs stepped by `LeanSyncVectorEnv` and the direct
step, `num_envs=8, num_steps=256`), 2048 steps per update, 10 epochs,
minibatch 64 / 256, 64x64 tanh actor and critic, observation and reward normalisation (SB3: VecNormalize, clip 10),
lr 3e-4 constant, gamma 0.99, lambda 0.95, clip 0.2, no value clipping, max grad norm 0.5, no entropy bonus, no
evaluation, no logging, `torch.set_num_threads(1)` in both (npsco's default; SB3 would otherwise take 2 threads,
which is slower here).

IPD runs use M random-weight reference policies of Hopper's shapes (64x64 tanh actors, seeds 100+j, identity
observation normaliser) and r0 = 1e-9, so the constraint never ends an episode: every configuration sees the same
episodes as plain PPO and the difference is the cost of evaluating the references (and tracking the running novelty).
M = 0 is plain PPO. IPD's cost is measured in pairs (`worker_paired`): one process per M and repeat holds a PPO trainer
and an IPD trainer with M references and trains them one iteration each in turn, so that this shared machine's
drifting speed (10% and more over minutes) cancels out; several processes per M, because the slow-down also varies from
process to process (by several points: where each process's memory lands in the caches). Inside those runs, the time
spent in IPD's per-step hook is the per-step cost of the references as the rollout pays it. It is also measured in
isolation: `NoveltyTracker.update` (which calls `ReferenceSet.distances`) on 8 observations in a hot loop. Peak memory
comes from one short separate run per M (`--memory-steps`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ENV_ID = "Hopper-v5"
NUM_ENVS, NUM_STEPS = 8, 256
BATCH = NUM_ENVS * NUM_STEPS


# ------------------------------------------------------------------------------------------------------- workers
def _npsco_config(spec: dict):
    from npsco.ppo.config import PPOConfig

    return PPOConfig(
        env_id=ENV_ID,
        seed=spec["seed"],
        total_timesteps=spec["steps"],
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        num_minibatches=BATCH // spec["minibatch"],
        update_epochs=10,
        learning_rate=3e-4,
        anneal_lr=False,
        gamma=0.99,
        gae_lambda=0.95,
        clip_coef=0.2,
        clip_vloss=False,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
        norm_obs=True,
        scale_reward=True,
        eval_every=0,
        checkpoint_every=0,
        torch_threads=1,
        env_backend=spec.get("backend") or "auto",
    )


def _random_references(m: int):
    """M reference policies with random weights and Hopper's spaces (what IPD evaluates per step)."""
    import gymnasium as gym
    import torch

    from npsco.novelty.references import ReferenceSet
    from npsco.policy import space_metadata
    from npsco.ppo.agent import ActorCritic

    env = gym.make(ENV_ID)
    obs_space, act_space = env.observation_space, env.action_space
    env.close()
    policies = []
    for j in range(m):
        torch.manual_seed(100 + j)
        agent = ActorCritic(obs_space.shape[0], act_space.shape[0], (64, 64), (64, 64))
        with torch.no_grad():  # random weights of a trained-policy scale (the 0.01-gain output layer is near zero)
            agent.actor_mean[-1].weight.normal_(0.0, 0.3)
        meta = {
            "env_id": ENV_ID,
            "observation_space": space_metadata(obs_space),
            "action_space": space_metadata(act_space),
            "method": "random",
            "seed": 100 + j,
        }
        policies.append(agent.to_policy(act_space, meta))
    return ReferenceSet(policies, [f"random{j}" for j in range(m)])


def worker_npsco(spec: dict) -> dict:
    from npsco.ppo.trainer import Trainer

    cfg = _npsco_config(spec)
    method = None
    if spec.get("refs"):
        from npsco.methods import make_method
        from npsco.methods.base import MethodContext
        from npsco.methods.settings import MethodConfig

        method = make_method(
            MethodConfig.of("ipd", r0=1e-9), MethodContext(ENV_ID, _random_references(spec["refs"]), 1e-9)
        )
    trainer = Trainer(cfg, method, run_dir=None, tensorboard=False)
    t0, c0 = time.perf_counter(), time.process_time()
    result = trainer.train(progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = result.metrics
    out = {
        "steps": cfg.num_iterations * cfg.batch_size,
        "wall_s": wall,
        "cpu_s": cpu,
        "rollout_s": sum(r["charts/rollout_seconds"] for r in rows),
        "update_s": sum(r["charts/update_seconds"] for r in rows),
    }
    if spec.get("refs"):
        out["ipd_terminated"] = sum(r.get("ipd/terminated", 0.0) for r in rows)
    return out


def worker_sb3(spec: dict) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(spec.get("threads", 1))
    venv = VecNormalize(
        make_vec_env(ENV_ID, n_envs=NUM_ENVS, seed=spec["seed"], vec_env_cls=DummyVecEnv),
        norm_obs=True,
        norm_reward=True,
        clip_obs=10.0,
        clip_reward=10.0,
        gamma=0.99,
    )
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=NUM_STEPS,
        batch_size=spec["minibatch"],
        n_epochs=10,
        learning_rate=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_range_vf=None,
        ent_coef=0.0,
        vf_coef=0.5,
        max_grad_norm=0.5,
        normalize_advantage=True,
        seed=spec["seed"],
        device="cpu",
        verbose=0,
        policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
    )
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=spec["steps"], progress_bar=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    venv.close()
    return {"steps": int(model.num_timesteps), "wall_s": wall, "cpu_s": cpu}


def worker_refcost(spec: dict) -> dict:
    """CPU seconds per call of NoveltyTracker.update (8 observations) for each M: the best of 7 repeats of 2000 calls,
    the sizes interleaved within each repeat (so that a slow spell of the machine does not fall on one size only)."""
    import timeit

    import numpy as np

    from npsco.novelty.references import NoveltyTracker

    rng = np.random.default_rng(0)
    obs = rng.standard_normal((NUM_ENVS, 11)).astype(np.float32)
    action = rng.uniform(-1, 1, (NUM_ENVS, 3)).astype(np.float32)
    trackers = {m: NoveltyTracker(_random_references(m), NUM_ENVS) for m in spec["refs"]}
    best = {m: math.inf for m in trackers}
    n = 2000
    for _ in range(7):
        for m, tracker in trackers.items():
            best[m] = min(
                best[m], timeit.timeit(partial(tracker.update, obs, action), number=n, timer=time.process_time) / n
            )
    return {"seconds_per_call": {str(m): t for m, t in best.items()}}


def worker_paired(spec: dict) -> dict:
    """IPD's cost, measured in pairs: one trainer per M in `spec["refs"]` (the benchmark passes [0, M]) in ONE process,
    trained one iteration each in turn (the order rotating every round), so that the speed of this shared machine,
    which drifts by 10% and more over minutes, falls on every trainer alike within each round. An iteration = rollout
    + advantages + update + the method's per-iteration statistics (what `Trainer.train` does per iteration, less
    logging, evaluation and checkpoints, which the benchmark configuration turns off anyway). Per M: wall and CPU
    seconds of each round, the rollout's share, and the time spent in the method's per-step hook (perf_counter around
    `on_step`: the references' forward pass, the running novelty and the IPD rule), i.e. the per-step cost of the
    references as the rollout pays it, cold caches included."""
    from npsco.methods import make_method
    from npsco.methods.base import MethodContext
    from npsco.methods.settings import MethodConfig
    from npsco.ppo.trainer import Trainer

    def timed(fn, acc):  # fn, plus its seconds and calls added to acc
        def call(*a):
            t0 = time.perf_counter()
            out = fn(*a)
            acc[0] += time.perf_counter() - t0
            acc[1] += 1
            return out

        return call

    trainers, hook = {}, {}
    for m in spec["refs"]:
        method = (
            make_method(MethodConfig.of("ipd", r0=1e-9), MethodContext(ENV_ID, _random_references(m), 1e-9))
            if m
            else None
        )
        t = trainers[m] = Trainer(_npsco_config(spec), method, run_dir=None, tensorboard=False)
        hook[m] = [0.0, 0]
        if m:
            t.hooks.on_step = timed(t.hooks.on_step, hook[m])
    rounds = spec["steps"] // BATCH
    per = {m: {"wall_s": [], "cpu_s": [], "rollout_s": [], "episodes": []} for m in trainers}
    order = list(trainers)
    for t in trainers.values():  # one untimed warm-up iteration each (first-call allocations, imports)
        buf = t.collect_rollout()
        t.hooks.update(t.learner, t.compute_advantages(buf))
        t.hooks.iteration_metrics(buf.summary)
    for acc in hook.values():
        acc[:] = [0.0, 0]
    for r in range(rounds):
        for m in order[r % len(order) :] + order[: r % len(order)]:
            t = trainers[m]
            t0, c0 = time.perf_counter(), time.process_time()
            buf = t.collect_rollout()
            batch = t.compute_advantages(buf)
            t1 = time.perf_counter()
            t.hooks.update(t.learner, batch)
            t.hooks.iteration_metrics(buf.summary)
            per[m]["wall_s"].append(time.perf_counter() - t0)
            per[m]["cpu_s"].append(time.process_time() - c0)
            per[m]["rollout_s"].append(t1 - t0)
            per[m]["episodes"].append([buf.summary.episodes, round(sum(buf.summary.returns), 6)])
            per[m]["ipd_terminated"] = per[m].get("ipd_terminated", 0) + buf.summary.forced_ends
    for m, t in trainers.items():
        t.envs.close()
        per[m]["hook_s"], per[m]["hook_calls"] = hook[m]
    return {"rounds": rounds, "steps_per_round": BATCH, "per_m": {str(m): v for m, v in per.items()}}


WORKERS = {"npsco": worker_npsco, "sb3": worker_sb3, "refcost": worker_refcost, "paired": worker_paired}


# -------------------------------------------------------------------------------------------------------- parent
def run_worker(spec: dict, pythonpath: str | None = None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            text=True,
        )
        stdout = proc.stdout.read()
        # wait4 reaps this child and returns ITS rusage: ru_maxrss is its peak resident set (KiB on Linux)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"worker {spec} failed:\n{err.read()[-4000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update(
        spec=spec,
        load_before=load_before,
        load_after=os.getloadavg()[0],
        process_wall_s=time.perf_counter() - t0,
        peak_rss_kib=usage.ru_maxrss,
        process_cpu_s=usage.ru_utime + usage.ru_stime,
    )
    if "wall_s" in result:
        result["steps_per_s"] = result["steps"] / result["wall_s"]
        result["steps_per_cpu_s"] = result["steps"] / result["cpu_s"]
    return result


def command_line(argv: list[str]) -> str:
    """The command as typed, without the --note texts (they are in the Notes section)."""
    import shlex

    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--note":
            skip = True
        else:
            kept.append(a)
    return "python " + shlex.join(kept)


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for mod in ("numpy", "torch", "gymnasium", "mujoco", "stable_baselines3", "envpool"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            versions[mod] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def repeat_ratios(ours: list[dict], theirs: list[dict], key: str) -> list[float]:
    """ours / theirs of `key`, one ratio per repeat that ran both (runs carry their repeat in `spec["repeat"]`; runs
    of an older results file without it pair up in order)."""

    def by_repeat(rs):
        return {r["spec"].get("repeat", i): r for i, r in enumerate(rs)}

    a, b = by_repeat(ours), by_repeat(theirs)
    return [a[k][key] / b[k][key] for k in sorted(a.keys() & b.keys())]


def summarize(runs: list[dict], args) -> dict:
    def sel(**kw):  # the PPO comparison's runs (IPD's M = 0 runs are plain PPO too, but belong to the IPD table)
        return [r for r in runs if not r["spec"].get("ipd") and all(r["spec"].get(k) == v for k, v in kw.items())]

    s: dict = {"ppo": {}, "ipd": {}}
    for mb in args.minibatch:
        row = {}
        kws = {
            "npsco": dict(kind="npsco", minibatch=mb, refs=0, src="current", backend=None),
            "npsco_envpool": dict(kind="npsco", minibatch=mb, refs=0, src="current", backend="envpool"),
            "npsco_baseline": dict(kind="npsco", minibatch=mb, refs=0, src="baseline"),
            "sb3": dict(kind="sb3", minibatch=mb),
        }
        for label, kw in kws.items():
            rs = sel(**kw)
            if rs:
                row[label] = {
                    "steps_per_s": median([r["steps_per_s"] for r in rs]),
                    "steps_per_cpu_s": median([r["steps_per_cpu_s"] for r in rs]),
                    "peak_rss_mib": max(r["peak_rss_kib"] for r in rs) / 1024,
                    "runs": len(rs),
                }
                if label != "sb3":
                    row[label]["rollout_s_per_2048"] = median([r["rollout_s"] / r["steps"] * BATCH for r in rs])
                    row[label]["update_s_per_2048"] = median([r["update_s"] / r["steps"] * BATCH for r in rs])
        for name, label in (("npsco", "npsco"), ("envpool", "npsco_envpool")):
            if label in row and "sb3" in row:  # the ratio of each repeat (its npsco and SB3 runs ran side by side)
                for suffix, key in (("", "steps_per_s"), ("_cpu", "steps_per_cpu_s")):
                    ratios = repeat_ratios(sel(**kws[label]), sel(**kws["sb3"]), key)
                    row[f"ratio_{name}_over_sb3{suffix}"] = median(ratios)
                    row[f"ratio_{name}_over_sb3{suffix}_min"] = min(ratios, default=float("nan"))
                    row[f"ratio_{name}_over_sb3{suffix}_max"] = max(ratios, default=float("nan"))
                row[f"ratio_{name}_over_sb3_repeats"] = len(ratios)
        if "npsco" in row and "npsco_baseline" in row:
            row["speedup_over_baseline"] = row["npsco"]["steps_per_s"] / row["npsco_baseline"]["steps_per_s"]
            row["speedup_over_baseline_cpu"] = (
                row["npsco"]["steps_per_cpu_s"] / row["npsco_baseline"]["steps_per_cpu_s"]
            )
        s["ppo"][str(mb)] = row
    ipd_runs = [r for r in runs if r["spec"]["kind"] == "npsco" and r["spec"].get("ipd")]
    base = None
    for m in args.refs:
        rs = [r for r in ipd_runs if r["spec"]["refs"] == m]
        if not rs:
            continue
        row = {
            "steps_per_s": median([r["steps_per_s"] for r in rs]),
            "steps_per_cpu_s": median([r["steps_per_cpu_s"] for r in rs]),
            "rollout_s_per_2048": median([r["rollout_s"] / r["steps"] * BATCH for r in rs]),
            "peak_rss_mib": max(r["peak_rss_kib"] for r in rs) / 1024,
            "runs": len(rs),
        }
        if m == 0:
            base = row
        elif base is not None:
            row["slowdown_vs_ppo"] = base["steps_per_s"] / row["steps_per_s"] - 1
            row["slowdown_vs_ppo_cpu"] = base["steps_per_cpu_s"] / row["steps_per_cpu_s"] - 1
            # extra rollout time per vector step (8 env steps) over plain PPO, in microseconds
            row["extra_us_per_vector_step"] = (row["rollout_s_per_2048"] - base["rollout_s_per_2048"]) / NUM_STEPS * 1e6
        s["ipd"][str(m)] = row
    paired = [r for r in runs if r["spec"]["kind"] == "paired"]
    if paired:
        s["ipd_paired"] = summarize_paired(paired)
    cost = [r for r in runs if r["spec"]["kind"] == "refcost"]
    if cost:
        per = cost[-1]["seconds_per_call"]
        s["reference_cost_us_per_vector_step"] = {m: v * 1e6 for m, v in per.items()}
        if "1" in per and "20" in per:
            s["reference_cost_growth_M1_to_M20"] = per["20"] / per["1"]
    return s


def summarize_paired(runs: list[dict]) -> dict:
    """Per M, over the paired processes that ran it against PPO (M = 0): the slow-down of each process (total time over
    its rounds, wall and CPU), their median, min and max, and the hook's cost per vector step (median); the growth of
    that cost from M=1 to M=20."""
    out: dict = {"per_m": {}}
    for m in sorted({int(k) for r in runs for k in r["per_m"]} - {0}):
        rows = []
        for r in runs:
            if str(m) not in r["per_m"]:
                continue
            base, v = r["per_m"]["0"], r["per_m"][str(m)]
            rows.append(
                {
                    "rounds": r["rounds"],
                    "slowdown": sum(v["wall_s"]) / sum(base["wall_s"]) - 1,
                    "hook_share": v["hook_s"] / sum(base["wall_s"]),
                    "same_episodes": v["episodes"] == base["episodes"],
                    "slowdown_cpu": sum(v["cpu_s"]) / sum(base["cpu_s"]) - 1,
                    "ppo_steps_per_s": r["rounds"] * BATCH / sum(base["wall_s"]),
                    "steps_per_s": r["rounds"] * BATCH / sum(v["wall_s"]),
                    "hook_us": v["hook_s"] / v["hook_calls"] * 1e6,
                    "extra_rollout_us": (sum(v["rollout_s"]) - sum(base["rollout_s"]))
                    / (r["rounds"] * NUM_STEPS)
                    * 1e6,
                    "ipd_terminated": v["ipd_terminated"],
                }
            )
        slow = [x["slowdown"] for x in rows]
        out["per_m"][str(m)] = {
            "processes": len(rows),
            "rounds": sum(x["rounds"] for x in rows),
            "slowdown_median": median(slow),
            "slowdown_min": min(slow),
            "slowdown_max": max(slow),
            "slowdown_cpu_median": median([x["slowdown_cpu"] for x in rows]),
            "hook_share_median": median([x["hook_share"] for x in rows]),
            "same_episodes": all(x["same_episodes"] for x in rows),
            "ppo_steps_per_s": median([x["ppo_steps_per_s"] for x in rows]),
            "steps_per_s": median([x["steps_per_s"] for x in rows]),
            "hook_us_per_vector_step": median([x["hook_us"] for x in rows]),
            "extra_rollout_us_per_vector_step": median([x["extra_rollout_us"] for x in rows]),
            "each": rows,
        }
    if "1" in out["per_m"] and "20" in out["per_m"]:
        out["hook_cost_growth_M1_to_M20"] = (
            out["per_m"]["20"]["hook_us_per_vector_step"] / out["per_m"]["1"]["hook_us_per_vector_step"]
        )
    return out


def ratio_cell(row: dict, name: str, suffix: str, bold: bool = False) -> str:
    """`median [min, max] (n)` of a ratio over the repeats, e.g. `**2.69x** [2.60, 2.75] (3)`."""
    med = f"{row[f'ratio_{name}_over_sb3{suffix}']:.2f}x"
    lo, hi = row.get(f"ratio_{name}_over_sb3{suffix}_min"), row.get(f"ratio_{name}_over_sb3{suffix}_max")
    n = row.get(f"ratio_{name}_over_sb3_repeats", 1)
    spread = f" [{lo:.2f}, {hi:.2f}] ({n})" if lo is not None and hi is not None else ""
    return (f"**{med}**" if bold else med) + spread


def markdown(data: dict) -> str:
    m, s = data["machine"], data["summary"]
    loads = [r["load_before"] for r in data["runs"]] + [r["load_after"] for r in data["runs"]]
    lines = [
        "# Throughput: npsco PPO vs Stable-Baselines3, and IPD's reference cost",
        "",
        f"Command: `{data['command']}`  ",
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
        + "  ",
        f"Date: {data['date']}; total {data['total_minutes']:.1f} min. 1-minute load average during the runs: "
        f"{min(loads):.1f} to {max(loads):.1f} "
        + (
            "(at most the benchmark's own process on a core: an otherwise idle machine)."
            if max(loads) <= 1.5
            else "(the machine is shared; all configurations ran alternately in the same session, "
            "so they saw the same load on average)."
        ),
        "",
        "Settings (both): Hopper-v5, 8 envs in one process (SB3 DummyVecEnv; npsco its default `auto` backend: "
        "Gymnasium's envs stepped by LeanSyncVectorEnv and the direct step), 256 steps per env "
        "= 2048 per update, 10 epochs, 64x64 tanh actor and critic, obs + reward normalisation, lr 3e-4 constant, no "
        "value clipping, no evaluation, 1 torch thread. Steps/s = steps / wall time of the training call; steps per "
        "CPU-s = steps / (user + sys CPU time of the process): with other processes on the cores the second is the "
        "steadier comparison. Peak memory = `ru_maxrss` of each configuration's own subprocess.",
        "",
    ]
    ppo_lines = [
        "## npsco PPO vs SB3 PPO",
        "",
        "Steps/s: medians over the repeats. Ratio: the median of the repeats' ratios (each repeat ran npsco and SB3 "
        "one after the other, the order alternating), [smallest, largest], and the number of repeats.",
        "",
        "| minibatch | npsco steps/s | SB3 steps/s | ratio | ratio (CPU time) | npsco rollout / update s per 2048 | "
        "peak RSS npsco / SB3 (MiB) |"
        + (
            " npsco before: steps/s | speed-up | speed-up (CPU time) |"
            if any("npsco_baseline" in r for r in s["ppo"].values())
            else ""
        ),
        "|---|---|---|---|---|---|---|"
        + ("---|---|---|" if any("npsco_baseline" in r for r in s["ppo"].values()) else ""),
    ]
    for mb, r in s["ppo"].items():
        if "npsco" not in r or "sb3" not in r:
            continue
        n, b = r["npsco"], r["sb3"]
        line = (
            f"| {mb} | {n['steps_per_s']:.0f} | {b['steps_per_s']:.0f} | {ratio_cell(r, 'npsco', '', True)} | "
            f"{ratio_cell(r, 'npsco', '_cpu')} | {n['rollout_s_per_2048']:.2f} / {n['update_s_per_2048']:.2f} | "
            f"{n['peak_rss_mib']:.0f} / {b['peak_rss_mib']:.0f} |"
        )
        if "npsco_baseline" in r:
            line += (
                f" {r['npsco_baseline']['steps_per_s']:.0f} | {r['speedup_over_baseline']:.2f}x | "
                f"{r['speedup_over_baseline_cpu']:.2f}x |"
            )
        ppo_lines.append(line)
    if len(ppo_lines) > 6:  # some minibatch size has both sides
        lines += ppo_lines
    pool = [(mb, r) for mb, r in s["ppo"].items() if "ratio_envpool_over_sb3" in r]
    if pool:
        lines += [
            "",
            "npsco with its optional envpool backend (`env_backend=envpool`: the same MuJoCo Hopper-v5 "
            "stepped in C++, same-step autoreset; every other setting as above) against the same SB3 runs:",
            "",
            "| minibatch | npsco + envpool steps/s | SB3 steps/s | ratio | ratio (CPU time) | rollout / update s per "
            "2048 |",
            "|---|---|---|---|---|---|",
        ]
        for mb, r in pool:
            e = r["npsco_envpool"]
            lines.append(
                f"| {mb} | {e['steps_per_s']:.0f} | {r['sb3']['steps_per_s']:.0f} | "
                f"{ratio_cell(r, 'envpool', '', True)} | {ratio_cell(r, 'envpool', '_cpu')} | "
                f"{e['rollout_s_per_2048']:.2f} / {e['update_s_per_2048']:.2f} |"
            )
    if s.get("ipd_paired"):
        pr = s["ipd_paired"]
        cost = s.get("reference_cost_us_per_vector_step", {})
        memory = {m: r["peak_rss_mib"] for m, r in s["ipd"].items()}
        lines += [
            "",
            "## IPD with M reference policies (r0 so small that no episode is cut)",
            "",
            "Paired measurement: one process per M and repeat, holding a PPO trainer and an IPD trainer with M "
            "references, trained one iteration (2048 steps) each in turn, the order alternating, so that this "
            "machine's drifting speed falls on both alike. Both trainers step the same episodes (same seeds, no "
            "episode cut: checked per iteration"
            + (
                ", and the same in every process"
                if all(r["same_episodes"] for r in pr["per_m"].values())
                else "; **not the same in some process**"
            )
            + "). "
            "Slower than PPO: the IPD trainer's total time over the PPO trainer's, per process; median over "
            "processes [smallest, largest]. It is noisy: the same work (env steps, the update) runs several "
            "percent faster or slower in one trainer instance than in another, either way. Hook: time inside "
            "IPD's per-step hook during the rollout (the M references' forward pass at the 8 states, the "
            "distances, the running novelty, the IPD rule), per vector step of 8 envs, a steady measurement; "
            "its share: the hook's total time over the PPO trainer's total time (the direct cost). Isolated: "
            "`NoveltyTracker.update` in a hot loop (best of 7x2000 calls). Peak memory: one short separate run "
            "per M.",
            "",
            "| M | processes x rounds | PPO / IPD steps/s | slower than PPO: median [min, max] | hook us per "
            "vector step | hook time / PPO time | isolated us | peak RSS (MiB) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        if "0" in memory:
            lines.append(f"| 0 (PPO) | | | | | | | {memory['0']:.0f} |")
        for m, r in pr["per_m"].items():
            mem = f"{memory[m]:.0f}" if m in memory else ""
            c = f"{cost[m]:.0f}" if m in cost else ""
            lines.append(
                f"| {m} | {r['processes']} x {r['rounds'] // max(r['processes'], 1)} | "
                f"{r['ppo_steps_per_s']:.0f} / {r['steps_per_s']:.0f} | **{100 * r['slowdown_median']:+.1f}%** "
                f"[{100 * r['slowdown_min']:+.1f}%, {100 * r['slowdown_max']:+.1f}%] | "
                f"{r['hook_us_per_vector_step']:.0f} | {100 * r['hook_share_median']:.1f}% | {c} | {mem} |"
            )
        if "hook_cost_growth_M1_to_M20" in pr:
            lines += [
                "",
                f"The hook's per-step cost grows **{pr['hook_cost_growth_M1_to_M20']:.2f}x** from M=1 to "
                f"M=20 in the rollout"
                + (
                    f"; the isolated call {s['reference_cost_growth_M1_to_M20']:.2f}x."
                    if "reference_cost_growth_M1_to_M20" in s
                    else "."
                ),
            ]
    elif s["ipd"]:
        lines += [
            "",
            "## IPD with M reference policies (r0 so small that no episode is cut)",
            "",
            "| M | steps/s | slower than PPO (wall) | slower (CPU time) | extra rollout us per vector step | "
            "isolated reference cost us per vector step | peak RSS (MiB) |",
            "|---|---|---|---|---|---|---|",
        ]
        cost = s.get("reference_cost_us_per_vector_step", {})
        for m, r in s["ipd"].items():
            slow = f"{100 * r['slowdown_vs_ppo']:+.1f}%" if "slowdown_vs_ppo" in r else "(PPO)"
            slow_cpu = f"{100 * r['slowdown_vs_ppo_cpu']:+.1f}%" if "slowdown_vs_ppo_cpu" in r else ""
            extra = f"{r['extra_us_per_vector_step']:.0f}" if "extra_us_per_vector_step" in r else ""
            c = f"{cost[m]:.0f}" if m in cost else ""
            lines.append(
                f"| {m} | {r['steps_per_s']:.0f} | {slow} | {slow_cpu} | {extra} | {c} | {r['peak_rss_mib']:.0f} |"
            )
        if "reference_cost_growth_M1_to_M20" in s:
            timer = next((r.get("timer", "CPU time") for r in data["runs"] if r["spec"]["kind"] == "refcost"), "")
            lines += [
                "",
                f"Isolated per-step reference cost grows {s['reference_cost_growth_M1_to_M20']:.2f}x from "
                f"M=1 to M=20 (`NoveltyTracker.update` on 8 observations, {timer}, best of 5x2000 calls).",
            ]
    if data.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in data["notes"]]
    lines += ["", "Every run (`runs` in throughput.json) keeps its load before/after, wall and CPU seconds."]
    return "\n".join(lines) + "\n"


def ppo_plan(args, steps: int, baseline_steps: int) -> list[tuple[dict, str | None]]:
    """The PPO comparison's runs: per repeat and minibatch size, npsco (and envpool, baseline) and SB3 one after the
    other, SB3 first in every other repeat, so that a drift of this machine's speed does not favour one side."""
    plan: list[tuple[dict, str | None]] = []
    for rep in range(0 if args.skip_ppo else args.repeats):
        for mb in args.minibatch:
            group = [(dict(kind="npsco", minibatch=mb, steps=steps, seed=args.seed, refs=0, src="current"), None)]
            if args.envpool:
                group.append(
                    (
                        dict(
                            kind="npsco",
                            minibatch=mb,
                            steps=steps,
                            seed=args.seed,
                            refs=0,
                            src="current",
                            backend="envpool",
                        ),
                        None,
                    )
                )
            if not args.skip_sb3:
                group.append(
                    (dict(kind="sb3", minibatch=mb, steps=steps, seed=args.seed, threads=args.sb3_threads), None)
                )
            if args.baseline_src:
                group.append(
                    (
                        dict(kind="npsco", minibatch=mb, steps=baseline_steps, seed=args.seed, refs=0, src="baseline"),
                        str(Path(args.baseline_src).resolve()),
                    )
                )
            plan += [({**spec, "repeat": rep}, pp) for spec, pp in (group if rep % 2 == 0 else group[::-1])]
    return plan


def write_results(out: Path, data: dict) -> None:
    """OUT.json and OUT.md, each written atomically: an interrupted run leaves the previous complete files."""
    from npsco.io import atomic_write_text

    atomic_write_text(out.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(data))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=100_000, help="steps per npsco / SB3 PPO run (rounded up to 2048s)")
    p.add_argument("--minibatch", type=int, nargs="+", default=[64, 256])
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="npsco/SB3 repeats per minibatch size, the order "
        "alternating (the ratios are reported as median, min and max over them)",
    )
    p.add_argument(
        "--ipd-steps", type=int, default=24_576, help="steps of each trainer in a paired IPD process (0: skip IPD)"
    )
    p.add_argument("--ipd-repeats", type=int, default=6, help="paired processes per M")
    p.add_argument("--memory-steps", type=int, default=10_240, help="steps of each separate (memory) IPD run")
    p.add_argument("--refs", type=int, nargs="+", default=[0, 1, 5, 10, 20])
    p.add_argument("--skip-sb3", action="store_true")
    p.add_argument("--envpool", action="store_true", help="also run npsco PPO with env_backend=envpool")
    p.add_argument("--skip-ppo", action="store_true", help="only the IPD part")
    p.add_argument("--sb3-threads", type=int, default=1)
    p.add_argument("--baseline-src", default=None, help="also run npsco PPO from this src/ dir (before/after)")
    p.add_argument("--baseline-steps", type=int, default=None, help="steps of the baseline runs (default: --steps)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="benchmarks/results/throughput/throughput", help="writes OUT.json and OUT.md")
    p.add_argument("--note", action="append", default=[], help="a line for the Notes section (repeatable)")
    p.add_argument(
        "--render", default=None, metavar="JSON", help="only rewrite the .md (and summary) of a results file"
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.render is not None:
        path = Path(args.render)
        data = json.loads(path.read_text())
        data["summary"] = summarize(data["runs"], args)
        write_results(path, data)
        return

    if args.worker is not None:
        out = WORKERS[json.loads(args.worker)["kind"]](json.loads(args.worker))
        print(json.dumps(out), flush=True)
        return

    steps = math.ceil(args.steps / BATCH) * BATCH
    ipd_steps = math.ceil(args.ipd_steps / BATCH) * BATCH
    baseline_steps = math.ceil((args.baseline_steps or args.steps) / BATCH) * BATCH
    plan: list[tuple[dict, str | None]] = []
    if ipd_steps:  # first: the quick part
        plan.append((dict(kind="refcost", refs=[m for m in args.refs if m > 0]), None))
        for _ in range(args.ipd_repeats):  # one paired process per M and repeat: PPO and IPD with M references
            for m in args.refs:
                if m > 0:
                    plan.append((dict(kind="paired", minibatch=64, steps=ipd_steps, seed=args.seed, refs=[0, m]), None))
        for m in args.refs:  # one short process per M: its peak memory
            plan.append(
                (
                    dict(
                        kind="npsco",
                        minibatch=64,
                        steps=args.memory_steps,
                        seed=args.seed,
                        refs=m,
                        ipd=True,
                        src="current",
                    ),
                    None,
                )
            )
    plan += ppo_plan(args, steps, baseline_steps)

    start = time.time()
    runs = []
    out = Path(args.out)
    data = {
        "command": command_line(sys.argv),
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(start)),
        "notes": args.note,
    }
    for i, (spec, pythonpath) in enumerate(plan, 1):
        r = run_worker(spec, pythonpath)
        runs.append(r)
        brief = {
            k: round(v, 1) if isinstance(v, float) else v
            for k, v in r.items()
            if k in ("steps_per_s", "steps_per_cpu_s", "peak_rss_kib", "load_before", "load_after")
        }
        print(f"[{i}/{len(plan)}] {spec} -> {brief}", flush=True)
        data.update(runs=runs, summary=summarize(runs, args), total_minutes=(time.time() - start) / 60)
        write_results(out, data)
    print(json.dumps(data["summary"], indent=1))


if __name__ == "__main__":
    main()
