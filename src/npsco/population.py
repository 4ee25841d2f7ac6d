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

One process writes a run directory at a time: it holds the folder's lock (`npsco.locks`) from `open` to `close`. The
manifest read back is checked against the plan of this configuration: every member where the layout puts it, with
the plan's seed (`npsco.manifest.check_layout`, `Population._check_plan`), so that no path or seed in a file decides
where npsco writes or deletes.

The configuration is `npsco.population_config.PopulationConfig`; the jobs are in `npsco.population_jobs`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from npsco.compat import old_default_hints
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.filecheck import POPULATION_CONFIG, read_checked
from npsco.io import atomic_write_json, check_folder_path, file_sha256, remove_stale_temps, run_entries
from npsco.layout import CONFIG_FILE, MANIFEST_FILE, METRICS_FILE, POLICY_FILE, novel_path, reference_path
from npsco.limits import (
    MAX_CHAINS,
    MAX_EPISODES,
    MAX_METRICS_BYTES,
    MAX_POLICIES,
    MAX_RUN_POLICIES,
    check_at_most,
    check_ppo_sizes,
)
from npsco.locks import FolderLock
from npsco.logger import Tracking, read_metrics, require_wandb
from npsco.manifest import (
    MANIFEST_FORMAT,
    Candidate,
    Chain,
    Member,
    check_borrowed,
    layout_path,
    load_manifest,
    read_members,
)
from npsco.parallel import Executor, InlineExecutor, Job, LogView, Scheduler, View, make_executor
from npsco.paths import recorded, recorded_run, resolved, run_folder
from npsco.policy import load_policy, resolve_checkpoint
from npsco.population_config import PopulationConfig, configuration_differences, same_configuration
from npsco.population_jobs import (
    PRELOAD,
    PopulationMembers,
    PopulationSnapshot,
    chains_of,
    prior_members,
    threshold_job,
    threshold_of,
    train_candidate_job,
    train_member_job,
    unreached_thresholds,
)
from npsco.ppo.state import read_state, state_path
from npsco.seeds import FINAL_EVALUATION, candidate_seed, novel_seed, reference_seed
from npsco.selection import Trained, choose
from npsco.tasks import task_name


def default_population_dir(config: PopulationConfig) -> Path:
    """`runs/population/TASK-METHOD`."""
    return Path(f"runs/population/{task_name(config.ppo.env_id)}-{config.method.method}")


def train_population(
    config: PopulationConfig,
    out: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    workers: int = 1,
    tracking: Tracking | None = None,
) -> list[Member]:
    """`npsco population`: train (or resume) the population of `config` in `out` (default `default_population_dir`),
    one policy after another (or `workers` at a time on a local process pool), and log a line per policy at the
    end. With `tracking`, every policy's metrics also go to W&B."""
    out = Path(out) if out else default_population_dir(config)
    pop = Population(out, config, progress=progress, log=log, tracking=tracking)
    refs = "borrowed" if config.refs_from or config.ref_checkpoints else config.refs
    policies = "policy" if config.novel == 1 else "policies"
    log(
        f"population in {out}: {refs} PPO references, {config.novel} novel {config.method.method} {policies} per "
        f"chain, {config.ppo.budget()} steps each"
    )
    if workers == 1:
        members = pop.run()
    else:
        with make_executor("local", workers, preload=PRELOAD) as executor:
            members = pop.run(executor)
    log("\n".join(summary_lines(members)))
    log(f"manifest: {out / MANIFEST_FILE}")
    return members


class Population(PopulationMembers):
    """A population run directory: its config, manifest and the training of its members.

    It is the manifest's only writer. Training goes through `npsco.parallel.Scheduler`, to which a population is a
    source of jobs (`ready`, `started`, `finished`): the R references, then the threshold, then the chains side by
    side, each chain one policy after another. Without an executor the jobs run in this process one at a time
    (`InlineExecutor`), in the manifest's order."""

    def __init__(
        self,
        out: str | Path,
        config: PopulationConfig,
        progress: bool = True,
        log: Callable[[str], None] = print,
        tracking: Tracking | None = None,
    ):
        """`tracking`: every policy's metrics also go to W&B, as one group (the run directory unless it names one)."""
        self.out, self.config, self.progress, self.log = Path(out), config.validate(), progress, log
        self.tracking = tracking
        if tracking is not None:
            require_wandb()
            self.tracking = dataclasses.replace(tracking, group=tracking.group or str(self.out))
        self.reach_checked = False  # whether the thresholds were compared with the references' distances
        check_sizes(self.config)
        check_folder_path(self.out)
        self.manifest_path = self.out / MANIFEST_FILE
        self.members: list[Member] = []
        self.r0_default: float | None = None
        self.action_r0: float | None = None
        """The references' mean-action r0 of a run whose threshold is in another metric, once measured."""
        self.jobs_show_progress = False  # training jobs draw progress bars: set by `run` (one job at a time only)
        self._lock = FolderLock(self.out)

    # ------------------------------------------------------------------------------------------------- manifest
    def save_manifest(self) -> None:
        atomic_write_json(
            self.manifest_path,
            {
                "format": MANIFEST_FORMAT,
                "format_version": 1,
                "env_id": self.config.ppo.env_id,
                "method": self.config.method.method,
                "r0_default": self.r0_default,
                "members": [m.to_dict() for m in self.members],
            },
        )

    def open(self) -> None:
        """Create the run directory, or check that an existing one has the same configuration and load it; from then
        on hold its lock until `close`. Everything is checked before anything is written: a refused configuration or
        plan leaves no run directory behind, and an existing one as it was."""
        new = self._check_folder()
        plan = self._plan() if new else None  # before writing anything: a refused plan leaves no run directory behind
        self._lock.acquire()  # fails at once, naming the holder, if another process writes this run
        try:
            remove_stale_temps(self.out)  # what a killed write left (no other writer: we hold the lock)
            if self._check_folder():  # again, under the lock: another process may have written it meanwhile
                self.members = plan if plan is not None else self._plan()
                if self.config.refs_from or self.config.ref_checkpoints:  # R: as many as it borrows
                    borrowed = sum(m.role == "reference" for m in self.members)
                    self.config = dataclasses.replace(self.config, refs=borrowed)
                atomic_write_json(self.out / CONFIG_FILE, self.config_record())
            else:
                self._resume()
            if not self.members:
                self.members = self._plan()
            self.save_manifest()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the run directory's lock (the end of the process does too)."""
        self._lock.release()

    def config_record(self) -> dict[str, Any]:
        """What config.json records: the configuration, its `refs_from` relative to this run when that run lies beside
        it (a sweep's: `npsco.paths.recorded`), so that the two move together."""
        record = self.config.to_dict()
        if record.get("refs_from"):
            record["refs_from"] = recorded(record["refs_from"], self.out)
        return record

    def _check_folder(self) -> bool:
        """True when `out` holds no run yet; refuses a folder that is not a population run directory, or a run of
        another configuration (reads only). The folder is checked first: no symbolic link below it (`npsco.paths`)."""
        run_folder(self.out)
        if (self.out / CONFIG_FILE).exists():
            self._grows()
            return False
        if self.out.exists() and run_entries(self.out):
            raise NpscoError(f"{self.out} exists and is not a population run directory; choose another --out")
        return True

    def _grows(self) -> bool:
        """Whether the run's config.json is this configuration with a smaller --novel (the run grows; nothing done is
        retrained); refuses any other difference."""
        config = self.config.to_dict()
        stored = read_checked(self.out / CONFIG_FILE, POPULATION_CONFIG)
        if stored.get("refs_from"):  # recorded relative to this run, or absolute (`config_record`)
            stored = {**stored, "refs_from": str(recorded_run(stored["refs_from"], self.out))}
        if stored.get("command") == "train":
            raise NpscoError(
                f"{self.out} holds an `npsco train` run (one policy), not a population: give another --out (a "
                f"population can borrow that policy: --ref-checkpoints {self.out / POLICY_FILE})"
            )
        differences = configuration_differences(stored, config)
        grows = (
            bool(differences)
            and isinstance(stored.get("novel"), int)
            and config["novel"] > stored["novel"]
            and same_configuration({**stored, "novel": config["novel"]}, config)
        )
        if differences and not grows:
            hint = old_default_hints(stored, config)
            raise NpscoError(
                f"{self.out} holds a population with a different configuration: "
                + "; ".join(differences[:6])
                + ("; ..." if len(differences) > 6 else "")
                + f"{hint}. Give the same settings to resume it, or use another --out (or delete it to start over)"
            )
        return grows

    def _resume(self) -> None:
        """Load an existing run of this configuration (a larger --novel grows it)."""
        grows = self._grows()
        data = load_manifest(self.out) if self.manifest_path.exists() else {"members": [], "r0_default": None}
        self.members = read_members(data)
        self.r0_default = data.get("r0_default")
        self._check_plan()
        if self.members and self._novel_names() != [m.name for m in self._novel_members()]:
            # a larger --novel, or a manifest that a kill left behind config.json: the members the plan has
            self._grow(sum(m.role == "novel" for m in self.members) // max(1, len(self.chains())))
        if grows:
            # the manifest with the new members first: a kill before config.json is written leaves them pending
            self.save_manifest()
            atomic_write_json(self.out / CONFIG_FILE, self.config_record())

    def _check_plan(self) -> None:
        """Refuse a manifest whose members are not those this configuration plans: each where the layout puts it
        (`npsco.manifest.check_layout`, done by `load_manifest`), with the plan's seed; references are borrowed only
        when the configuration borrows them. A novel policy the plan does not have may only be one not yet trained
        (left by a kill while the run grew; it is dropped)."""
        cfg = self.config
        borrowing = bool(cfg.refs_from or cfg.ref_checkpoints)
        own = [] if borrowing else self._own_references()
        planned = {m.name: m for m in own + self._novel_members()}
        for m in self.members:
            if m.role == "reference" and borrowing:
                if m.status != "done":
                    problem = "a borrowed reference is never trained here, but it is not done"
                else:
                    continue
            elif m.name not in planned:
                if m.role == "novel" and m.status != "done":
                    continue
                problem = "this run's configuration plans no such policy"
            else:
                p = planned[m.name]
                # a slot of --candidates C may hold the candidate it kept: candidate c's folder and seed
                places = [(layout_path(p, c), candidate_seed(p.seed, c)) for c in range(cfg.candidates)]
                seeds_ok = all(c.seed == candidate_seed(p.seed, c.index) for c in m.candidates)
                if (m.role, m.chain, m.index) == (p.role, p.chain, p.index) and (m.path, m.seed) in places and seeds_ok:
                    continue
                problem = (
                    f"recorded with path {m.path!r} and seed {m.seed} (or candidates of other seeds), where this "
                    f"run's plan has {p.path!r} and seed {p.seed}"
                )
            raise NpscoError(
                f"{self.manifest_path}: member {m.name!r}: {problem}; the manifest was edited or damaged: restore it, "
                "or train the population again in another --out"
            )

    def _plan(self) -> list[Member]:
        cfg = self.config
        members: list[Member] = []
        if cfg.refs_from:
            members += self._borrowed_references(Path(cfg.refs_from))
        elif cfg.ref_checkpoints:
            members += self._checkpoint_references(cfg.ref_checkpoints)
        else:
            members += self._own_references()
        return members + self._novel_members()

    def _own_references(self) -> list[Member]:
        """The R PPO references this run trains itself (seeds S..S+R-1)."""
        seed = self.config.ppo.seed
        return [
            Member(name=f"ref{i}", role="reference", method="ppo", seed=reference_seed(seed, i), path=reference_path(i))
            for i in range(self.config.refs)
        ]

    def _novel_members(self) -> list[Member]:
        seed = self.config.ppo.seed
        return [
            Member(
                name=f"{chain.name}/k{k}",
                role="novel",
                method=self.config.method.method,
                seed=novel_seed(seed, k),
                path=novel_path(chain.name, k),
                chain=chain,
                index=k,
            )
            for chain in self.chains()
            for k in range(self.config.novel)
        ]

    def _novel_names(self) -> list[str]:
        return [m.name for m in self.members if m.role == "novel"]

    def _grow(self, old_novel: int) -> None:
        """The same run with a larger --novel: keep every member, add the new novel policies at the end of each
        chain."""
        known = {m.name: m for m in self.members}
        refs = [m for m in self.members if m.role == "reference"]
        self.members = refs + [known.get(m.name, m) for m in self._novel_members()]
        self.log(
            f"{self.out}: {old_novel} -> {self.config.novel} novel policies per chain "
            f"({sum(m.name not in known for m in self.members)} to train)"
        )

    def _borrowed_references(self, other: Path) -> list[Member]:
        path = other / MANIFEST_FILE
        if not path.exists():
            raise NpscoError(f"--refs-from {other}: no population manifest there")
        data = load_manifest(other)
        if data.get("env_id") != self.config.ppo.env_id:
            raise NpscoError(
                f"--refs-from {other}: its references were trained on {data.get('env_id')}, "
                f"not {self.config.ppo.env_id}"
            )
        refs = [m for m in read_members(data) if m.role == "reference"]
        if not refs or any(m.status != "done" for m in refs):
            raise NpscoError(f"--refs-from {other}: its references are not all trained")
        for m in refs:
            m.path = recorded(resolved(m.path, other), self.out)  # relative beside this run, else absolute
            check_borrowed(m, m.checkpoint_in(self.out))
            m.sha256 = file_sha256(m.checkpoint_in(self.out))
        return refs

    def _checkpoint_references(self, paths: Sequence[str]) -> list[Member]:
        """References from checkpoints: evaluated now like trained references, their eval curves read from the
        metrics.jsonl beside them when there is one."""
        members = []
        for i, p in enumerate(paths):
            ckpt = resolve_checkpoint(p).resolve()
            if ckpt.name != POLICY_FILE:
                raise NpscoError(f"--ref-checkpoints {p}: expected a run directory or a file named {POLICY_FILE}")
            policy = load_policy(ckpt)
            if policy.metadata["env_id"] != self.config.ppo.env_id:
                raise NpscoError(
                    f"--ref-checkpoints {p}: trained on {policy.metadata['env_id']}, not {self.config.ppo.env_id}"
                )
            seed = policy.metadata.get("seed", i)
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise NpscoError(f"--ref-checkpoints {p}: its metadata's seed must be a whole number, got {seed!r}")
            metrics = ckpt.parent / METRICS_FILE
            # the eval curve beside it, when it is a plain file of a sane size (a FIFO would block, /dev/zero not end)
            readable = metrics.is_file() and metrics.stat().st_size <= MAX_METRICS_BYTES
            curve = (
                [
                    [r["global_step"], r["eval/return_mean"]]
                    for r in read_metrics(metrics)
                    if r.get("eval/return_mean") is not None
                ]
                if readable
                else []
            )
            final = run_episodes(
                policy,
                self.config.final_episodes,
                seed=FINAL_EVALUATION,
                env_id=self.config.ppo.env_id,  # the run's task, never the checkpoint's (npsco.task_ids)
                max_episode_steps=self.config.ppo.max_episode_steps,
            )
            members.append(
                Member(
                    name=f"ref{i}",
                    role="reference",
                    method=str(policy.metadata.get("method", "ppo")),
                    seed=seed,
                    path=str(ckpt.parent),
                    status="done",
                    final_eval=final.summary(),
                    eval_curve=curve,
                    sha256=file_sha256(ckpt),
                )
            )
        return members

    def chains(self) -> list[Chain]:
        return chains_of(self.config)

    def threshold_for(self, member: Member) -> float:
        return threshold_of(self.config, self.r0_default, member)

    # ------------------------------------------------------------------------------------------------- training
    def run(self, executor: Executor | None = None, view: View | None = None) -> list[Member]:
        """Train every member not yet done, then return the members.

        With an `executor` (see `npsco.parallel`), independent members train at the same time; without one, in this
        process one after another. `view` sees the jobs start and end (default: the log of `PopulationLog` when
        one job runs at a time, of `npsco.parallel.LogView` otherwise)."""
        executor = executor or InlineExecutor()
        self.open()
        try:
            if all(m.status == "done" for m in self.members):
                self.log(f"{self.out}: every policy is already trained")
                return self.members
            one_at_a_time = executor.workers == 1
            self.jobs_show_progress = self.progress and one_at_a_time
            use = Scheduler(executor).run(self, view or (PopulationLog(self) if one_at_a_time else LogView(self.log)))
            if not one_at_a_time:
                self.log(f"{self.out}: {use.describe()}")
            return self.members
        finally:
            self.close()

    def chain_steps_left(self) -> dict[Chain, int]:
        """Per novel chain, the environment steps of its policies not yet trained (they train one after another)."""
        left = Counter(m.chain for m in self.members if m.role == "novel" and m.status != "done" and m.chain)
        return {chain: n * self.config.ppo.policy_steps for chain, n in left.items()}

    def ready(self, busy: set[str]) -> list[Job]:
        """The jobs that can start now (the `npsco.parallel.Source` protocol); `busy` holds the keys already running.
        Each job's `after` is the rest of its chain: all of the longest chain for a reference or the threshold."""
        self.check_reach()
        out = str(self.out.resolve())
        members = [m.to_dict() for m in self.members]
        steps = self.config.ppo.policy_steps
        chains_left = self.chain_steps_left()
        longest = max(chains_left.values(), default=0)

        def train(m: Member, after: int) -> Job:
            return Job(
                key=f"{out}:{m.name}",
                fn=train_member_job,
                label=m.name,
                steps=steps,
                group=out,
                args=(out, self.config, members, self.r0_default, m.name, self.jobs_show_progress, self.tracking),
                after=after,
            )

        refs = [m for m in self.members if m.role == "reference"]
        jobs = [train(m, longest) for m in refs if m.status != "done"]
        novel = [m for m in self.members if m.role == "novel"]
        if jobs or not novel:
            return [j for j in jobs if j.key not in busy]
        if self.config.method.method != "ppo" and self.config.method.r0 is None and self.r0_default is None:
            job = Job(
                key=f"{out}:threshold",
                fn=threshold_job,
                args=(out, self.config, members),
                label="threshold",
                group=out,
                after=longest,
            )
            return [] if job.key in busy else [job]
        spare: list[Job] = []  # candidates started only when a worker would otherwise wait
        for chain in self.chains():
            nxt = next((m for m in novel if m.chain == chain and m.status != "done"), None)
            if nxt is None:
                continue
            after = chains_left[chain] - steps  # the chain's later policies
            if self.config.candidates == 1:
                jobs.append(train(nxt, after))
                continue
            # a candidate counts as started when it is trained or running now: one that a killed run or a dead
            # worker left "training" is offered again
            known = {c.index: c for c in nxt.candidates}
            started = {i for i, c in known.items() if c.status == "done" or f"{out}:{nxt.name}#c{i}" in busy}
            waiting = [c for c in range(self.config.candidates) if c not in started]
            needed = all(known[i].status == "done" and not known[i].meets for i in started)  # the next is not spare
            for i, c in enumerate(waiting):
                job = Job(
                    key=f"{out}:{nxt.name}#c{c}",
                    fn=train_candidate_job,
                    label=f"{nxt.name}#c{c}",
                    steps=steps,
                    group=out,
                    args=(
                        out,
                        self.config,
                        members,
                        self.r0_default,
                        nxt.name,
                        c,
                        self.jobs_show_progress,
                        self.tracking,
                    ),
                    after=after if needed and i == 0 else 0,  # a spare candidate lies on no path: last
                    spare=not (needed and i == 0),
                )
                (jobs if needed and i == 0 else spare).append(job)
        return [j for j in jobs + spare if j.key not in busy]

    def check_reach(self) -> None:
        """Once the references are trained (and the default r0 computed), warn if a chain's threshold is above every
        distance between two references (`unreached_thresholds`): measured for the warning alone with an absolute
        --r0, read from threshold.json otherwise. Once per run, and only while novel policies are left to train."""
        refs = [m for m in self.members if m.role == "reference"]
        novel = [m for m in self.members if m.role == "novel"]
        absolute = self.config.method.r0 is not None
        if (
            self.reach_checked
            or self.config.method.method == "ppo"
            or len(refs) < 2
            or any(m.status != "done" for m in refs)
            or all(m.status == "done" for m in novel)
            or (not absolute and self.r0_default is None)
        ):
            return
        self.reach_checked = True
        snapshot = PopulationSnapshot(self.out, self.config, self.members, self.r0_default)
        threshold = snapshot.threshold_file()
        if threshold is None:  # an absolute r0: no threshold.json
            distances = snapshot.reference_threshold().matrix
        else:
            distances = np.asarray(threshold["distance_matrix"], np.float64)
        chains = {m.chain.name: self.threshold_for(m) for m in novel if m.chain is not None}
        warning = unreached_thresholds(chains, distances, absolute)
        if warning:
            self.log(warning)

    def started(self, job: Job) -> None:
        if job.label != "threshold":
            name, _, index = job.label.partition("#c")
            member = self.member(name)
            member.status = "training"
            if index:  # (a candidate offered again replaces its earlier record)
                fresh = dataclasses.replace(Candidate.of_slot(member, int(index)), status="training")
                others = [c for c in member.candidates if c.index != fresh.index]
                member.candidates = sorted([*others, fresh], key=lambda c: c.index)
            self.save_manifest()

    def finished(self, job: Job, result: Any) -> str:
        """Record a job's result in the manifest; returns a short description of it."""
        if job.label == "threshold":
            self.r0_default = float(result)
            self.save_manifest()
            return f"r0 = {self.r0_default:.4f}"
        if "#c" in job.label:
            return self._candidate_finished(self.member(job.label.partition("#c")[0]), Candidate(**result))
        member = Member.from_dict(result)
        self.members[self.members.index(self.member(member.name))] = member
        self.save_manifest()
        ev = member.final_eval or {}
        return f"return {ev.get('return_mean', float('nan')):.2f} +- {ev.get('return_std', float('nan')):.2f}"

    def _candidate_finished(self, member: Member, candidate: Candidate) -> str:
        """Record a trained candidate of `member`'s slot; keep one when the choice is made (`npsco.selection`)."""
        member.candidates = [c for c in member.candidates if c.index != candidate.index] + [candidate]
        member.candidates.sort(key=lambda c: c.index)
        assert candidate.final_eval is not None and candidate.nearest is not None  # a trained candidate's numbers
        what = (
            f"candidate {candidate.index}: return {candidate.final_eval['return_mean']:.2f}, nearest "
            f"{candidate.nearest:.4f} ({'meets' if candidate.meets else 'does not meet'} the criteria)"
        )
        if member.status == "done":  # a spare candidate that finished after the choice: recorded, dropped
            self.save_manifest()
            return what + "; the slot was already chosen: dropped"
        trained = [
            Trained(c.index, c.final_eval["return_mean"], c.nearest)
            for c in member.candidates
            if c.final_eval is not None and c.nearest is not None
        ]
        snapshot = PopulationSnapshot(self.out, self.config, self.members, self.r0_default, self.action_r0)
        least = snapshot.criteria(self.threshold_for(member))[1]  # as each candidate was judged
        self.action_r0 = snapshot.action_r0  # measured at most once per process
        kept = choose(trained, self.config.candidates, snapshot.reference_median(), least)
        if kept is not None:
            chosen = next(c for c in member.candidates if c.index == kept)
            for c in member.candidates:
                c.kept = c.index == kept
            member.seed, member.path, member.final_eval = chosen.seed, chosen.path, chosen.final_eval
            member.eval_curve, member.wall_seconds = chosen.eval_curve, chosen.wall_seconds
            member.references = [m.name for m in prior_members(self.members, member)]
            member.threshold = self.threshold_for(member)
            member.status = "done"
            what += f"; kept candidate {kept} of {len(trained)} trained"
        self.save_manifest()
        return what


def check_sizes(config: PopulationConfig) -> None:
    """Refuse a population whose counts are past npsco's limits (`npsco.limits`), before anything is planned."""
    check_at_most("--refs", config.refs, MAX_POLICIES)
    check_at_most("--novel", config.novel, MAX_POLICIES)
    check_at_most("threshold multiples (--r0-scale)", len(config.r0_scales or ()), MAX_CHAINS)
    episode_counts = ("eval_episodes", "threshold_episodes", "candidate_episodes")
    for name, episodes in ((name, getattr(config, name)) for name in episode_counts):
        if episodes is not None:
            check_at_most(name, episodes, MAX_EPISODES, least=1)
    if config.trainings > MAX_RUN_POLICIES:
        raise NpscoError(
            f"the population trains {config.trainings:,} policies, past npsco's limit of {MAX_RUN_POLICIES:,} "
            "(docs/reliability.md)"
        )
    check_ppo_sizes(config.ppo.to_dict())


class PopulationLog:
    """The view of a population trained one policy at a time (`npsco population`): what each policy is when it
    starts, its return and (maze) goals when done; the threshold as it is computed."""

    def __init__(self, pop: Population):
        self.pop = pop
        self.found_policy: set[str] = set()
        """The jobs whose folder held a policy trained to its end when they started (kept, or trained again)."""

    def event(self, kind: str, job: Job, detail: str = "") -> None:
        pop, log = self.pop, self.pop.log
        if kind in ("retry", "error"):
            log(f"{kind:>5s} {job.label}: {detail}")
        elif job.label == "threshold":
            if kind == "start":
                log(
                    f"computing the default threshold from {sum(m.role == 'reference' for m in pop.members)} "
                    f"references ..."
                )
            else:
                metric = pop.config.method.metric
                metric = "" if metric == "deterministic" else f", {metric} metric"
                log(f"r0 (mean pairwise distance of the references{metric}) = {pop.r0_default:.4f}")
        elif kind == "start":
            name, _, candidate = job.label.partition("#c")
            member = pop.member(name)
            seed, path = member.seed, member.path
            if candidate:
                cand = Candidate.of_slot(member, int(candidate))
                seed, path = cand.seed, cand.path
            if member.role == "reference":
                what = "reference PPO"
            elif pop.config.method.method == "ppo":
                what = f"novel {member.method} (another seed, no novelty constraint)"
            else:
                what = (
                    f"novel {member.method} (vs {len(prior_members(pop.members, member))} policies, "
                    f"r0={pop.threshold_for(member):.4g})"
                )
            which = f", candidate {candidate} of {pop.config.candidates}" if candidate else ""
            log(f"[{pop.members.index(member) + 1}/{len(pop.members)}] {member.name}: {what}{which}, seed {seed}")
            saved = state_path(pop.out / path)
            if saved.exists():
                log(f"    resuming from the training state saved at step {read_state(saved).global_step:,}")
            elif (pop.out / path / POLICY_FILE).exists():
                self.found_policy.add(job.label)
                log(
                    "    its folder holds a policy an earlier attempt trained to its end: kept if it is this policy "
                    "(task, seed, whole budget, settings), else trained again from step 0"
                )
            elif (pop.out / path).exists():
                log(
                    "    no training state was saved by the stopped attempt (it ran less than state_every seconds): "
                    "training again from step 0, same seed"
                )
        elif "#c" in job.label:
            log(f"    {detail}")
        else:
            member = pop.member(job.label)
            final = member.final_eval
            assert final is not None  # a trained member is evaluated
            if job.label in self.found_policy:  # what became of the policy its folder held (wall time: trained here)
                log(
                    "    it was this policy: kept, not trained again"
                    if member.wall_seconds is None
                    else "    it was not this policy: trained again from step 0"
                )
            line = f"    return {final['return_mean']:.2f} +- {final['return_std']:.2f}"
            if "goals" in final:
                line += "  goals: " + ", ".join(f"{k} {v}" for k, v in final["goals"].items() if v)
            log(line)

    def tick(self) -> None:
        pass


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
