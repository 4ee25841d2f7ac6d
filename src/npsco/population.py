"""The paper's workflow: R PPO reference policies (seeds S..S+R-1, S = the PPO `seed` setting, 0 by default), the
threshold r0, then K novel policies trained one after another (seeds S+1000+k), the k-th against the R references and
the k-1 novel policies before it.

Everything lands in one run directory, described by `manifest.json` (written atomically after every change):

    RUN/config.json            the population's configuration (a re-run must match it)
    RUN/manifest.json          every policy: role, method, seed, threshold, status, checkpoint, final evaluation
    RUN/threshold.json         the references' pairwise distance matrix and the default r0
    RUN/refs/ref{i}/           one `npsco train` run directory per reference (policy.safetensors, metrics.jsonl, ...)
    RUN/novel/{chain}/k{k}/    one per novel policy; a chain is a method and threshold, e.g. `ipd` or `ipd-r0x2`

Running the same command again resumes: finished policies are never trained again; a policy whose training was
interrupted restarts from scratch with the same seed, so the result is the one an uninterrupted run gives.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from npsco.algos import make_method
from npsco.algos.trainer import Trainer
from npsco.config import MethodConfig, PPOConfig, default_r0_scale, method_reads, task_family
from npsco.errors import NpscoError
from npsco.io import atomic_write_json, file_sha256, read_json
from npsco.policy import Policy, load_policy

NOVEL_SEED_OFFSET = 1000
"""The k-th novel policy of every chain trains with seed S + NOVEL_SEED_OFFSET + k, S the population's base seed
(the PPO `seed` setting); the same seeds across methods."""


@dataclass
class PopulationConfig:
    """A population run: the task's PPO settings, the references, and the novel chains."""

    ppo: PPOConfig
    """PPO settings shared by every policy of the population (references and novel ones)."""
    method: MethodConfig
    """Method of the novel policies and its knobs."""
    refs: int = 5
    """Number of PPO reference policies R (seeds S..S+R-1, S = `ppo.seed`: `--set seed=S` gives an independent replicate)."""
    novel: int = 5
    """Number of novel policies K per chain."""
    r0_scales: tuple[float, ...] | None = None
    """Thresholds as multiples of the default r0 (the references' mean pairwise distance), one chain each; ignored
    when `method.r0` is set. None: the task's default multiple, `npsco.config.default_r0_scale` (0.5 on every task);
    `validate` fills it in, so config.json records the multiples used."""
    refs_from: str | None = None
    """Reuse the references of this earlier population run directory instead of training them."""
    ref_checkpoints: tuple[str, ...] = ()
    """Use these policy checkpoints (files, or `npsco train` run directories) as the references instead of training
    them; e.g. PPO policies trained with `npsco train` or by a benchmark."""
    threshold_episodes: int | None = None
    """Deterministic episodes per reference for the threshold (None: 50 on the maze, 5 on MuJoCo)."""
    eval_episodes: int | None = None
    """Deterministic episodes of each policy's final evaluation (None: 100 on the maze, 10 otherwise)."""

    def to_dict(self) -> dict[str, Any]:
        return {"ppo": self.ppo.to_dict(), "method": self.method.to_dict(), "refs": self.refs, "novel": self.novel,
                "r0_scales": None if self.r0_scales is None else list(self.r0_scales), "refs_from": self.refs_from,
                "ref_checkpoints": list(self.ref_checkpoints),
                "threshold_episodes": self.threshold_episodes, "eval_episodes": self.eval_episodes}

    def validate(self) -> "PopulationConfig":
        self.ppo.validate()
        if self.r0_scales is None:  # an absolute --r0 needs no multiple
            self.r0_scales = (1.0,) if self.method.r0 is not None else (default_r0_scale(self.ppo.env_id),)
        self.r0_scales = tuple(float(s) for s in self.r0_scales)
        self.method.validate()
        if self.refs < 0 or self.novel < 0:
            raise NpscoError("--refs and --novel must be >= 0")
        if self.refs_from and self.ref_checkpoints:
            raise NpscoError("--refs-from and --ref-checkpoints are alternatives; give one")
        borrowed = bool(self.refs_from or self.ref_checkpoints)
        if self.method.method != "ppo" and self.novel > 0 and self.method.r0 is None and self.refs < 2 and not borrowed:
            raise NpscoError("the default threshold needs at least 2 references (--refs >= 2), or give --r0")
        if self.method.method != "ppo" and self.novel > 0 and self.refs == 0 and not borrowed:
            raise NpscoError("novel policies need references: --refs >= 1, --refs-from RUN or --ref-checkpoints")
        if not self.r0_scales or not all(0 < s < float("inf") for s in self.r0_scales):
            raise NpscoError(f"--r0-scale values must be finite and > 0, got {list(self.r0_scales)}")
        if self.method.r0 is not None and self.method.r0_profile == "reference":
            raise NpscoError("r0_profile=reference scales the references' own threshold profile: it cannot be combined "
                             "with an absolute --r0 (use --r0-scale)")
        if self.method.r0 is not None and tuple(self.r0_scales) != (1.0,):
            raise NpscoError("--r0 (an absolute threshold) and --r0-scale (multiples of the default) are "
                             "alternatives; give one")
        return self

    @property
    def final_episodes(self) -> int:
        return self.eval_episodes or (100 if task_family(self.ppo.env_id) == "maze" else 10)

    @property
    def distance_episodes(self) -> int:
        from npsco.novelty.threshold import default_distance_episodes

        return self.threshold_episodes or default_distance_episodes(self.ppo.env_id)


@dataclass
class Member:
    """One policy of the population, as recorded in the manifest."""

    name: str
    role: str  # "reference" | "novel"
    method: str
    seed: int
    path: str  # run directory, relative to the population directory (or absolute for borrowed references)
    chain: str | None = None
    index: int | None = None
    threshold: float | None = None
    references: list[str] = field(default_factory=list)
    status: str = "pending"  # pending | training | done
    final_eval: dict[str, Any] | None = None
    eval_curve: list[list[float]] = field(default_factory=list)
    wall_seconds: float | None = None
    sha256: str | None = None  # borrowed references: the checkpoint's hash when borrowed, checked at every load

    @property
    def checkpoint(self) -> str:
        return str(Path(self.path) / "policy.safetensors")


def check_borrowed(member: dict[str, Any] | Member, checkpoint: str | Path) -> None:
    """Refuse a borrowed reference whose checkpoint is gone or is no longer the file the run borrowed (its SHA-256
    differs): evaluation and resume would silently use another policy."""
    from npsco.io import file_sha256

    expected = member.sha256 if isinstance(member, Member) else member.get("sha256")
    name = member.name if isinstance(member, Member) else member.get("name")
    if expected is None:
        return
    if not Path(checkpoint).exists():
        raise NpscoError(f"borrowed reference {name}: {checkpoint} is gone")
    if file_sha256(checkpoint) != expected:
        raise NpscoError(f"borrowed reference {name}: {checkpoint} changed since this run borrowed it (another "
                         f"SHA-256); restore it, or train this population again in another --out")


class Population:
    """A population run directory: its config, manifest and the training of its members."""

    def __init__(self, out: str | Path, config: PopulationConfig, progress: bool = True,
                 log: Callable[[str], None] = print):
        self.out, self.config, self.progress, self.log = Path(out), config.validate(), progress, log
        self.manifest_path = self.out / "manifest.json"
        self.members: list[Member] = []
        self.r0_default: float | None = None

    # ------------------------------------------------------------------------------------------------- manifest
    def save_manifest(self) -> None:
        atomic_write_json(self.manifest_path, {
            "format": "npsco-population", "format_version": 1, "env_id": self.config.ppo.env_id,
            "method": self.config.method.method, "r0_default": self.r0_default,
            "members": [dataclasses.asdict(m) for m in self.members],
        })

    def open(self) -> None:
        """Create the run directory, or check that an existing one has the same configuration and load it."""
        config = self.config.to_dict()
        if (self.out / "config.json").exists():
            stored = read_json(self.out / "config.json")
            differences = configuration_differences(stored, config)
            # the one difference allowed: a larger --novel (the run grows, nothing done is retrained)
            grows = (bool(differences) and isinstance(stored.get("novel"), int) and config["novel"] > stored["novel"]
                     and same_configuration({**stored, "novel": config["novel"]}, config))
            if differences and not grows:
                old_default = stored.get("r0_scales") == [1.0] and config["r0_scales"] != [1.0]
                hint = (" (an earlier npsco's default threshold multiple was 1: add --r0-scale 1 to resume a run made "
                        "with it)" if old_default else "")
                method = config["method"]
                if (stored.get("method") or {}).get("tnb_rule") == "safe" != method["tnb_rule"] and method_reads(
                        method["method"], "tnb_rule"):
                    hint += (" (an earlier npsco's default tnb_rule was safe: add --mset tnb_rule=safe to resume a run "
                             "made with it)")
                raise NpscoError(f"{self.out} holds a population with a different configuration: "
                                 + "; ".join(differences[:6]) + ("; ..." if len(differences) > 6 else "")
                                 + f"{hint}. Give the same settings to resume it, or use another --out (or delete it "
                                   "to start over)")
            data = read_json(self.manifest_path) if self.manifest_path.exists() else {"members": []}
            self.members = [Member(**m) for m in data.get("members", [])]
            self.r0_default = data.get("r0_default")
            if self.members and self._novel_names() != [m.name for m in self._novel_members()]:
                # a larger --novel, or a manifest that a kill left behind config.json: the members the plan has
                self._grow(sum(m.role == "novel" for m in self.members) // max(1, len(self.chains())))
            if grows:
                # the manifest with the new members first: a kill before config.json is written leaves them pending
                self.save_manifest()
                atomic_write_json(self.out / "config.json", config)
        else:
            if self.out.exists() and any(self.out.iterdir()):
                raise NpscoError(f"{self.out} exists and is not a population run directory; choose another --out")
            self.members = self._plan()  # before writing anything: a refused plan leaves no run directory behind
            atomic_write_json(self.out / "config.json", config)
        if not self.members:
            self.members = self._plan()
        self.save_manifest()

    def _plan(self) -> list[Member]:
        cfg = self.config
        members: list[Member] = []
        if cfg.refs_from:
            members += self._borrowed_references(Path(cfg.refs_from))
        elif cfg.ref_checkpoints:
            members += self._checkpoint_references(cfg.ref_checkpoints)
        else:
            members += [Member(name=f"ref{i}", role="reference", method="ppo", seed=cfg.ppo.seed + i, path=f"refs/ref{i}")
                        for i in range(cfg.refs)]
        return members + self._novel_members()

    def _novel_members(self) -> list[Member]:
        seed0 = self.config.ppo.seed + NOVEL_SEED_OFFSET
        return [Member(name=f"{chain}/k{k}", role="novel", method=self.config.method.method, seed=seed0 + k,
                       path=f"novel/{chain}/k{k}", chain=chain, index=k)
                for chain in self.chains() for k in range(self.config.novel)]

    def _novel_names(self) -> list[str]:
        return [m.name for m in self.members if m.role == "novel"]

    def _grow(self, old_novel: int) -> None:
        """The same run with a larger --novel: keep every member, add the new novel policies at the end of each chain."""
        known = {m.name: m for m in self.members}
        refs = [m for m in self.members if m.role == "reference"]
        self.members = refs + [known.get(m.name, m) for m in self._novel_members()]
        self.log(f"{self.out}: {old_novel} -> {self.config.novel} novel policies per chain "
                 f"({sum(m.name not in known for m in self.members)} to train)")

    def _borrowed_references(self, other: Path) -> list[Member]:
        path = other / "manifest.json"
        if not path.exists():
            raise NpscoError(f"--refs-from {other}: no population manifest there")
        data = read_json(path)
        if data.get("env_id") != self.config.ppo.env_id:
            raise NpscoError(f"--refs-from {other}: its references were trained on {data.get('env_id')}, "
                             f"not {self.config.ppo.env_id}")
        refs = [Member(**m) for m in data["members"] if m["role"] == "reference"]
        if not refs or any(m.status != "done" for m in refs):
            raise NpscoError(f"--refs-from {other}: its references are not all trained")
        for m in refs:
            m.path = str((other / m.path).resolve())
            check_borrowed(m, m.checkpoint)
            m.sha256 = file_sha256(m.checkpoint)
        return refs

    def _checkpoint_references(self, paths: Sequence[str]) -> list[Member]:
        """References from checkpoints: evaluated now like trained references, their eval curves read from the
        metrics.jsonl beside them when there is one."""
        from npsco.evaluation import run_episodes
        from npsco.logger import read_metrics
        from npsco.policy import resolve_checkpoint

        members = []
        for i, p in enumerate(paths):
            ckpt = resolve_checkpoint(p).resolve()
            if ckpt.name != "policy.safetensors":
                raise NpscoError(f"--ref-checkpoints {p}: expected a run directory or a file named policy.safetensors")
            policy = load_policy(ckpt)
            if policy.metadata["env_id"] != self.config.ppo.env_id:
                raise NpscoError(f"--ref-checkpoints {p}: trained on {policy.metadata['env_id']}, "
                                 f"not {self.config.ppo.env_id}")
            metrics = ckpt.parent / "metrics.jsonl"
            curve = [[r["global_step"], r["eval/return_mean"]] for r in read_metrics(metrics)
                     if r.get("eval/return_mean") is not None] if metrics.exists() else []
            final = run_episodes(policy, self.config.final_episodes, seed=10_000,
                                 max_episode_steps=self.config.ppo.max_episode_steps)
            members.append(Member(name=f"ref{i}", role="reference", method=policy.metadata.get("method", "ppo"),
                                  seed=int(policy.metadata.get("seed", i)), path=str(ckpt.parent), status="done",
                                  final_eval=final.summary(), eval_curve=curve, sha256=file_sha256(ckpt)))
        return members

    def chains(self) -> list[str]:
        m = self.config.method
        if m.method == "ppo" or m.r0 is not None or self.config.r0_scales == (1.0,):
            return [m.method]
        return [f"{m.method}-r0x{s:g}" for s in self.config.r0_scales]

    def chain_scale(self, chain: str) -> float:
        return float(chain.split("-r0x")[1]) if "-r0x" in chain else 1.0

    def policy(self, member: Member) -> Policy:
        check_borrowed(member, self.out / member.checkpoint)
        return load_policy(self.out / member.checkpoint)

    # ------------------------------------------------------------------------------------------------- training
    def run(self, executor=None) -> list[Member]:
        """Train every member not yet done, in order, then return the members.

        With an `executor` (see `npsco.parallel`), independent members train at the same time: see `run_parallel`."""
        if executor is not None:
            return self.run_parallel(executor)
        self.open()
        refs = [m for m in self.members if m.role == "reference"]
        todo = [m for m in self.members if m.status != "done"]
        if not todo:
            self.log(f"{self.out}: every policy is already trained")
            return self.members
        total = len(self.members)
        for m in refs:
            if m.status != "done":
                self._train(m, method=None, position=self.members.index(m) + 1, total=total)
        novel = [m for m in self.members if m.role == "novel"]
        if novel and self.config.method.method != "ppo":
            self._ensure_threshold(refs)
        for m in novel:
            if m.status != "done":
                self._train(m, method=self._method_for(m), position=self.members.index(m) + 1, total=total)
        return self.members

    def _ensure_threshold(self, refs: list[Member]) -> None:
        if self.config.method.r0 is not None or self.r0_default is not None:
            return
        from npsco.novelty.threshold import default_threshold

        self.log(f"computing the default threshold from {len(refs)} references ...")
        method = self.config.method
        th = default_threshold([self.policy(m) for m in refs], [m.name for m in refs],
                               episodes=self.config.distance_episodes, seed=0,
                               max_episode_steps=self.config.ppo.max_episode_steps, metric=method.metric,
                               discount=method.novelty_discount)
        atomic_write_json(self.out / "threshold.json", th.to_dict())
        self.r0_default = th.r0
        self.save_manifest()
        metric = "" if method.metric == "deterministic" else f", {method.metric} metric"
        self.log(f"r0 (mean pairwise distance of the references{metric}) = {th.r0:.4f}")

    def threshold_for(self, member: Member) -> float:
        if self.config.method.r0 is not None:
            return float(self.config.method.r0)
        return self.r0_default * self.chain_scale(member.chain)

    def _method_for(self, member: Member):
        from npsco.novelty.references import ReferenceSet

        if self.config.method.method == "ppo":  # more PPO seeds: no references, no threshold
            return make_method(self.config.method, ReferenceSet([]), None, self.config.ppo.env_id)
        prior = [m for m in self.members
                 if m.role == "reference" or (m.chain == member.chain and m.index is not None and m.index < member.index)]
        member.references = [m.name for m in prior]
        member.threshold = self.threshold_for(member)
        refs = ReferenceSet([self.policy(m) for m in prior], member.references)
        profile = None
        if self.config.method.r0_profile == "reference":
            profile = np.asarray(read_json(self.out / "threshold.json")["profile"])
        return make_method(self.config.method, refs, member.threshold, self.config.ppo.env_id, profile)

    def _train(self, member: Member, method, position: int, total: int) -> None:
        from npsco.evaluation import run_episodes

        run_dir = self.out / member.path
        if run_dir.exists():  # an interrupted earlier attempt: restart it from scratch, same seed
            shutil.rmtree(run_dir)
        member.status = "training"
        self.save_manifest()
        if member.role == "reference":
            what = "reference PPO"
        elif member.threshold is None:
            what = f"novel {member.method} (another seed, no novelty constraint)"
        else:
            what = f"novel {member.method} (vs {len(member.references)} policies, r0={member.threshold:.4g})"
        self.log(f"[{position}/{total}] {member.name}: {what}, seed {member.seed}")
        cfg = dataclasses.replace(self.config.ppo, seed=member.seed)
        t0 = time.perf_counter()  # a duration: a monotonic clock, not the (adjustable) wall clock
        trainer = Trainer(cfg, method, run_dir, metadata={"population": {"name": member.name, "role": member.role,
                                                                          "chain": member.chain, "index": member.index}})
        result = trainer.train(progress=self.progress)
        if result.interrupted:
            raise KeyboardInterrupt
        final = run_episodes(result.policy, self.config.final_episodes, seed=10_000,
                             max_episode_steps=cfg.max_episode_steps)
        member.final_eval = final.summary()
        member.eval_curve = [[e["global_step"], e["eval/return_mean"]] for e in result.eval_curve]
        member.wall_seconds = round(time.perf_counter() - t0, 1)
        member.status = "done"
        self.save_manifest()
        line = f"    return {final.returns.mean():.2f} +- {final.returns.std():.2f}"
        if final.goals is not None:
            line += "  goals: " + ", ".join(f"{k} {v}" for k, v in member.final_eval["goals"].items() if v)
        self.log(line)

    # ------------------------------------------------------------------------------------------- parallel training
    # The parent process plans, starts jobs and writes the manifest; workers train one member each and return its
    # record (`train_member_job`), or compute the default threshold (`threshold_job`). The order is `run`'s: the R
    # references together, then the threshold, then the chains side by side, each chain one policy after another.
    def run_parallel(self, executor, view=None) -> list[Member]:
        """Like `run`, with the independent members training at the same time on `executor`."""
        from npsco.parallel import LogView, Scheduler

        self.open()
        if all(m.status == "done" for m in self.members):
            self.log(f"{self.out}: every policy is already trained")
            return self.members
        Scheduler(executor).run(self, view or LogView(self.log))
        return self.members

    def ready(self, busy: set[str]):
        """The jobs that can start now (the `npsco.parallel.Source` protocol); `busy` holds the keys already running."""
        from npsco.parallel import Job

        out = str(self.out.resolve())
        members = [dataclasses.asdict(m) for m in self.members]
        steps = self.config.ppo.num_iterations * self.config.ppo.batch_size

        def train(m: Member) -> Job:
            return Job(key=f"{out}:{m.name}", fn=train_member_job, args=(out, self.config, members, self.r0_default, m.name),
                       label=m.name, steps=steps, group=out)

        refs = [m for m in self.members if m.role == "reference"]
        jobs = [train(m) for m in refs if m.status != "done"]
        novel = [m for m in self.members if m.role == "novel"]
        if jobs or not novel:
            return [j for j in jobs if j.key not in busy]
        if self.config.method.method != "ppo" and self.config.method.r0 is None and self.r0_default is None:
            job = Job(key=f"{out}:threshold", fn=threshold_job, args=(out, self.config, members), label="threshold",
                      group=out)
            return [] if job.key in busy else [job]
        for chain in self.chains():
            nxt = next((m for m in novel if m.chain == chain and m.status != "done"), None)
            if nxt is not None:
                jobs.append(train(nxt))
        return [j for j in jobs if j.key not in busy]

    def started(self, job) -> None:
        member = self._member(job.label)
        if member is not None:
            member.status = "training"
            self.save_manifest()

    def finished(self, job, result) -> str:
        """Record a worker's result in the manifest; returns a short description of it."""
        if job.label == "threshold":
            self.r0_default = float(result)
            self.save_manifest()
            return f"r0 = {self.r0_default:.4f}"
        member = Member(**result)
        self.members[self.members.index(self._member(member.name))] = member
        self.save_manifest()
        ev = member.final_eval or {}
        return f"return {ev.get('return_mean', float('nan')):.2f} +- {ev.get('return_std', float('nan')):.2f}"

    def _member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)


def _worker_population(out: str, config: PopulationConfig, members: list[dict], r0_default: float | None) -> Population:
    """The population as the parent sees it, in a worker process that must not write the manifest."""
    pop = Population(out, config, progress=False, log=lambda line: None)
    pop.members = [Member(**m) for m in members]
    pop.r0_default = r0_default
    pop.save_manifest = lambda: None  # the parent process is the manifest's only writer
    return pop


def train_member_job(out: str, config: PopulationConfig, members: list[dict], r0_default: float | None,
                     name: str) -> dict[str, Any]:
    """Worker job: train the member `name` of the population at `out` (from scratch, with its seed) and evaluate it;
    returns its manifest record."""
    pop = _worker_population(out, config, members, r0_default)
    member = pop._member(name)
    method = None if member.role == "reference" else pop._method_for(member)
    pop._train(member, method, position=pop.members.index(member) + 1, total=len(pop.members))
    return dataclasses.asdict(member)


def threshold_job(out: str, config: PopulationConfig, members: list[dict]) -> float:
    """Worker job: compute the default threshold from the trained references (writes `threshold.json`); returns r0."""
    pop = _worker_population(out, config, members, None)
    pop._ensure_threshold([m for m in pop.members if m.role == "reference"])
    return pop.r0_default



def same_configuration(stored: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether a run directory's `config.json` (`stored`) describes the configuration `current`.

    A setting missing from `stored` (one that npsco gained after the run started) matches when `current` has that
    setting's default value, so upgrading npsco does not stop a run from resuming; any other difference does.
    """
    return not configuration_differences(stored, current)


def configuration_differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The settings in which `stored` and `current` differ (see `same_configuration`), e.g.
    `"r0_scales: [1.0] in the run, [0.5] now"`."""
    method = str((current.get("method") or {}).get("method", "ipd"))
    defaults = _without_unread_knobs(PopulationConfig(ppo=PPOConfig(), method=MethodConfig()).to_dict(), method)
    stored, current = _without_unread_knobs(stored, method), _without_unread_knobs(current, method)
    out: list[str] = []

    def short(value: Any) -> str:  # a value as the message shows it: a long one (a whole settings table) by its size
        text = repr(value)
        if len(text) <= 40:
            return text
        return f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else "..."

    def walk(old: dict, new: dict, default: dict, prefix: str) -> None:
        for key in sorted(set(old) - set(new)):
            out.append(f"{prefix}{key}: {short(old[key])} in the run, not a setting now")
        for key, value in new.items():
            if key not in old:
                if key not in default or default[key] != value:
                    out.append(f"{prefix}{key}: not recorded in the run, {short(value)} now")
            elif isinstance(value, dict) and isinstance(old[key], dict):
                walk(old[key], value, default.get(key) if isinstance(default.get(key), dict) else {}, f"{prefix}{key}.")
            elif old[key] != value:
                out.append(f"{prefix}{key}: {short(old[key])} in the run, {short(value)} now")

    walk(stored, current, defaults, "")
    return out


def _without_unread_knobs(config: dict[str, Any], method: str) -> dict[str, Any]:
    """`config` without the method settings that `method` never reads (`npsco.config.method_reads`): another method's
    knob, or a change of its default, does not stop a run from resuming."""
    settings = config.get("method")
    if not isinstance(settings, dict):
        return config
    return {**config, "method": {k: v for k, v in settings.items() if method_reads(method, k)}}


def load_manifest(run: str | Path) -> dict[str, Any]:
    """The manifest of a population run directory, with a clear error if there is none."""
    path = Path(run) / "manifest.json"
    if not path.exists():
        raise NpscoError(f"{run}: not a population run directory (no manifest.json)")
    return read_json(path)


def summary_lines(members: Sequence[Member]) -> list[str]:
    """One line per trained policy: name, return and (maze) the goals it reaches."""
    lines = []
    for m in members:
        if m.final_eval is None:
            lines.append(f"{m.name:>16s}  {m.status}")
            continue
        line = f"{m.name:>16s}  return {m.final_eval['return_mean']:8.2f} +- {m.final_eval['return_std']:.2f}"
        goals = m.final_eval.get("goals")
        if goals:
            n = sum(goals.values())
            line += "   " + ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in goals.items() if v)
        lines.append(line)
    return lines
