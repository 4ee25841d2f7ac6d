"""The work of a population run as jobs for `npsco.parallel`'s scheduler: train one member (`train_member_job`), or
compute the default threshold from the trained references (`threshold_job`).

A job sees the population as the parent process saw it when the job was made (`PopulationSnapshot`): it reads the run
directory and writes the member's own run directory (or `threshold.json`), and returns its result; the parent process
alone writes the manifest (`npsco.population.Population.finished`). The same jobs run in worker processes and, for a
population trained one policy after another, in the parent process itself (`npsco.parallel.InlineExecutor`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from npsco.compat import current_ppo_settings
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.filecheck import THRESHOLD, read_checked
from npsco.io import atomic_write_json, inside, read_json, remove_inside
from npsco.layout import CONFIG_FILE, METRICS_FILE, POLICY_FILE, THRESHOLD_FILE
from npsco.logger import Tracking, read_metrics
from npsco.manifest import Candidate, Chain, Member, check_borrowed, is_borrowed, layout_path
from npsco.methods import METHODS, make_method
from npsco.methods.base import Method, MethodContext
from npsco.novelty.metrics import mean_pairwise_distance
from npsco.novelty.references import ReferenceSet
from npsco.novelty.states import StateDistance
from npsco.novelty.threshold import Threshold, default_threshold, visited_states
from npsco.paths import check_tree
from npsco.policy import Policy, load_policy
from npsco.population_config import PopulationConfig
from npsco.ppo.config import PPOConfig
from npsco.ppo.state import state_path
from npsco.ppo.trainer import Trainer
from npsco.seeds import DISTANCE_EPISODES, FINAL_EVALUATION
from npsco.selection import meets_criteria
from npsco.task_ids import trust_task

PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch.utils.tensorboard",
    "numpy",
    "gymnasium",
    "npsco.population",
    "npsco.ppo.trainer",
    *METHODS.modules(),
    "npsco.episodes",
    "npsco.novelty.threshold",
)
"""The modules these jobs run, which a local process pool's forkserver imports once (`npsco.parallel.make_executor`'s
`preload`), so that a fresh worker does not import them again (torch, `torch._dynamo`, imported by the first Adam,
and numba, by the novelty methods, are slow to import); the method modules are the registry's."""


def chains_of(config: PopulationConfig) -> list[Chain]:
    """The novel chains of a population: one per threshold multiple, or the method alone (plain PPO seeds, an
    absolute `--r0`, or the multiple 1 alone)."""
    m = config.method
    if config.r0_scales is None:
        raise ValueError("chains_of needs a validated configuration (validate() fills in r0_scales)")
    if m.method == "ppo" or m.r0 is not None or config.r0_scales == (1.0,):
        return [Chain(m.method)]
    return [Chain(m.method, s) for s in config.r0_scales]


def prior_members(members: list[Member], member: Member) -> list[Member]:
    """What a novel member must differ from: the references, and the policies before it in its chain."""
    before = member.index if member.index is not None else 0  # a reference's prior members: the references
    return [
        m
        for m in members
        if m.role == "reference" or (m.chain == member.chain and m.index is not None and m.index < before)
    ]


def threshold_of(config: PopulationConfig, r0_default: float | None, member: Member) -> float:
    """A novel member's threshold: the absolute `--r0`, else its chain's multiple of the default r0."""
    if config.method.r0 is not None:
        return float(config.method.r0)
    if r0_default is None:
        raise ValueError("the default threshold r0 is not computed yet")
    return r0_default * (member.chain.multiple if member.chain is not None else 1.0)


def unreached_thresholds(thresholds: dict[str, float], distances: np.ndarray, absolute: bool) -> str | None:
    """A warning when a chain's threshold (chain name -> r0) is above every distance between two references
    (`distances`, their pairwise matrix): no reference is that far from another, so a novel policy is held to a
    distance that the references themselves never reach; None when every threshold is reached. `absolute`: the
    thresholds come from --r0 (else from --r0-scale)."""
    off_diagonal = distances[~np.eye(len(distances), dtype=bool)]
    largest = float(off_diagonal.max())
    above = {name: r0 for name, r0 in thresholds.items() if r0 > largest}
    if not above:
        return None
    shown = ", ".join(f"{r0:.4g}" + (f" ({name})" if len(thresholds) > 1 else "") for name, r0 in above.items())
    flag = "--r0" if absolute else "--r0-scale"
    return (
        f"warning: r0 = {shown} is above the largest distance between two references ({largest:.4g}): no reference "
        "pair reaches it, so the novel policies' episodes may be cut short or penalised from their first steps; "
        f"consider a smaller {flag}"
    )


class PopulationMembers:
    """What a population (`npsco.population.Population`) and a job's snapshot of it share: its members, found by
    name, and their policies."""

    out: Path
    members: list[Member]

    def member(self, name: str) -> Member:
        """The member called `name` (a KeyError if there is none)."""
        found = next((m for m in self.members if m.name == name), None)
        if found is None:
            raise KeyError(f"{self.out}: no member {name!r}")
        return found

    def policy(self, member: Member) -> Policy:
        """The member's policy (a borrowed reference's checkpoint is checked first: `check_borrowed`)."""
        check_borrowed(member, member.checkpoint_in(self.out))
        return load_policy(member.checkpoint_in(self.out))


@dataclass
class PopulationSnapshot(PopulationMembers):
    """A population as a job sees it: the parent's members and default r0 when the job was made (copies). It has no
    way to write the manifest."""

    out: Path
    config: PopulationConfig
    members: list[Member]
    r0_default: float | None
    action_r0: float | None = None
    """`references_action_r0`, once computed (a population passes it on to its next snapshot)."""

    @classmethod
    def from_records(
        cls, out: str | Path, config: PopulationConfig, members: list[dict[str, Any]], r0_default: float | None
    ) -> PopulationSnapshot:
        return cls(Path(out), config, [Member.from_dict(m) for m in members], r0_default)

    def method_for(self, member: Member) -> Method:
        """The novelty method a novel member trains with (recording its references and threshold in `member`)."""
        config, env_id = self.config.method, self.config.ppo.env_id
        if config.method == "ppo":  # more PPO seeds: no references, no threshold
            return make_method(config, MethodContext(env_id))
        prior = prior_members(self.members, member)
        member.references = [m.name for m in prior]
        member.threshold = threshold_of(self.config, self.r0_default, member)
        policies = [self.policy(m) for m in prior]
        threshold = self.threshold_file()
        cls = METHODS[config.method]
        states = self.state_distance(threshold, member.references, policies) if cls.uses_states(config) else None
        context = MethodContext(
            env_id=env_id,
            references=ReferenceSet(policies, member.references),
            r0=member.threshold,
            r0_profile=self.threshold_profile(threshold) if cls.uses_profile(config) else None,
            states=states,
            reference_returns=tuple(
                m.final_eval["return_mean"] for m in self.members if m.role == "reference" and m.final_eval
            ),
            state_r0=None if states is None else self.state_threshold(states, member),
        )
        return make_method(config, context)

    def state_threshold(self, states: StateDistance, member: Member) -> float:
        """The state-distance threshold of `member`, whose avoided policies' embeddings are `states`: the references'
        mean pairwise state distance, times the multiple of r0_default that its r0 is (1 with an absolute r0)."""
        refs = [i for i, name in enumerate(member.references) if self.member(name).role == "reference"]
        default = float(mean_pairwise_distance(states.subset(refs).pairwise()))
        assert member.threshold is not None  # set by method_for before this
        scale = member.threshold / self.r0_default if self.r0_default and self.config.method.r0 is None else 1.0
        return default * scale

    def threshold_file(self) -> dict[str, Any] | None:
        """The run's `threshold.json` (None with an absolute r0, or before it is computed). Refuses a default
        threshold that was computed in another metric than the run's (a run started before npsco computed it in the
        method's metric)."""
        path, method = self.out / THRESHOLD_FILE, self.config.method
        if method.r0 is not None or not path.exists():  # an absolute r0: no default threshold
            return None
        threshold = read_checked(path, THRESHOLD)
        if threshold.get("metric", "deterministic") != method.metric:
            raise NpscoError(
                f"{path}: the default threshold was computed with the {threshold.get('metric', 'deterministic')} "
                f"metric, this run uses {method.metric}; delete threshold.json (and the novel policies) to recompute it"
            )
        return threshold

    def state_distance(
        self, threshold: dict[str, Any] | None, names: list[str], policies: list[Policy]
    ) -> StateDistance:
        """The `state` metric's embedding with the mean embedding of each policy in `names` (the references' from
        threshold.json, the others from their deterministic episodes, as the threshold measures them)."""
        episodes, steps = self.config.distance_episodes, self.config.ppo.max_episode_steps
        if threshold is not None and "state" in threshold:
            fitted, known = StateDistance.from_dict(threshold["state"]), list(threshold["names"])
        else:  # an absolute r0: the embedding of the references' states, as the default threshold would fit it
            refs = [i for i, n in enumerate(names) if self.member(n).role == "reference"]
            fitted = StateDistance.fit([visited_states(policies[i], episodes, DISTANCE_EPISODES, steps) for i in refs])
            known = [names[i] for i in refs]
        embeddings = [
            fitted.embeddings[known.index(n)]
            if n in known
            else fitted.mean_embedding(visited_states(p, episodes, DISTANCE_EPISODES, steps))
            for n, p in zip(names, policies, strict=True)
        ]
        return StateDistance(fitted.mean, fitted.std, np.array(embeddings), fitted.bandwidth, fitted.seed)

    def threshold_profile(self, threshold: dict[str, Any] | None) -> np.ndarray | None:
        """The references' threshold profile from `threshold.json` (None with an absolute r0); refuses a file without
        one."""
        if threshold is None:
            return None
        path = self.out / THRESHOLD_FILE
        if not threshold.get("profile"):
            raise NpscoError(
                f"{path} holds no threshold profile (written by an older npsco, or r0 is 0); r0_profile=reference "
                "needs one: delete threshold.json (and the novel policies) to recompute it"
            )
        return np.asarray(threshold["profile"], np.float64)

    def train(
        self, member: Member, progress: bool = False, candidate: int = 0, tracking: Tracking | None = None
    ) -> Member:
        """Train `member` with its seed, then evaluate it (deterministic episodes seeded `FINAL_EVALUATION`); returns
        it done. An interrupted earlier attempt continues from its saved training state (`npsco.ppo.state`), or
        restarts from scratch without one (its folder deleted first). KeyboardInterrupt on Ctrl-C or SIGTERM.
        `candidate` c > 0: the member is its slot's candidate c, in that candidate's folder. With `tracking`, the
        metrics also go to W&B, as a run named after the member (`RUN/ipd/k0`, `RUN/ipd/k0#c1`)."""
        if is_borrowed(member) or member.path != layout_path(member, candidate):
            raise NpscoError(f"{self.out}: {member.name} is not a policy of this run to train (path {member.path!r})")
        # its folder where the layout puts it, inside the run, with no symbolic link on the way or below it (checked
        # again here, in the worker, before anything there is read: npsco.paths)
        run_dir = check_tree(inside(self.out, layout_path(member, candidate)), known=True)
        method = None if member.role == "reference" else self.method_for(member)
        cfg = dataclasses.replace(self.config.ppo, seed=member.seed)
        finished = finished_policy(run_dir, cfg, self.config, member, candidate)
        if finished is not None:  # trained to its end before: a kill in its final evaluation, or a lost manifest entry
            return self.finish(member, finished, run_dir, cfg, None)
        resume = state_path(run_dir).exists()
        if not resume:  # an attempt that saved no state: restart it from scratch, same seed
            remove_inside(self.out, run_dir)
        if not resume:  # the policy's folder says how it was trained, as an `npsco train` run's does
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_json(run_dir / CONFIG_FILE, member_record(cfg, self.config, member, candidate))
        if tracking is not None and tracking.name is None:
            suffix = f"#c{candidate}" if candidate else ""
            tracking = dataclasses.replace(tracking, name=f"{self.out}/{member.name}{suffix}")
        t0 = time.perf_counter()  # a duration: a monotonic clock, not the (adjustable) wall clock
        trainer = Trainer(
            cfg,
            method,
            run_dir,
            resume=resume,
            metadata={
                "population": {
                    "name": member.name,
                    "role": member.role,
                    "chain": None if member.chain is None else member.chain.name,
                    "index": member.index,
                }
            },
            tracking=tracking,
        )
        result = trainer.train(progress=progress)
        if result.interrupted:
            raise KeyboardInterrupt
        member.eval_curve = [[e["global_step"], e["eval/return_mean"]] for e in result.eval_curve]
        return self.finish(member, result.policy, run_dir, cfg, t0)

    def finish(self, member: Member, policy: Policy, run_dir: Path, cfg: PPOConfig, t0: float | None) -> Member:
        """`member` done: its final evaluation (`FINAL_EVALUATION`); `t0` the training's start (None: a policy trained
        by an earlier attempt, whose curve is read back from its metrics and whose wall time is unknown)."""
        if t0 is None:
            member.eval_curve = [
                [r["global_step"], r["eval/return_mean"]]
                for r in read_metrics(run_dir / METRICS_FILE)
                if "eval/return_mean" in r
            ]
        final = run_episodes(
            policy, self.config.final_episodes, seed=FINAL_EVALUATION, max_episode_steps=cfg.max_episode_steps
        )
        member.final_eval = final.summary()
        member.wall_seconds = None if t0 is None else round(time.perf_counter() - t0, 3)
        member.status = "done"
        return member

    def train_candidate(
        self, member: Member, index: int, progress: bool = False, tracking: Tracking | None = None
    ) -> Candidate:
        """Train candidate `index` of the slot `member` (its own seed and folder, `Candidate.of_slot`), evaluate it,
        and measure it against the criteria: its distance to the nearest policy it had to avoid, on the states of
        `check_episodes` episodes seeded as its final evaluation's (`FINAL_EVALUATION`; by default the very episodes
        of its final evaluation), as `criteria` says."""
        candidate = Candidate.of_slot(member, index)
        trained = self.train(
            dataclasses.replace(member, seed=candidate.seed, path=candidate.path), progress, index, tracking
        )
        policy = load_policy(trained.checkpoint_in(self.out))
        episodes = run_episodes(
            policy,
            self.config.check_episodes,
            seed=FINAL_EVALUATION,
            max_episode_steps=self.config.ppo.max_episode_steps,
            record_states=True,
        )
        states = np.concatenate(episodes.states)
        prior = prior_members(self.members, member)
        policies, names = [self.policy(m) for m in prior], [m.name for m in prior]
        assert trained.final_eval is not None and trained.threshold is not None  # trained novel members have both
        metric, least = self.criteria(trained.threshold)
        if metric == "state":
            measure = self.state_distance(self.threshold_file(), names, policies)
            nearest = float(measure.distances(measure.mean_embedding(states)).min())
        else:  # between the actions' distributions, on the candidate's states
            std = policy.action_std if metric == "wasserstein2" else None
            everyone = ReferenceSet(policies, names, exact=True)
            per_state = everyone.distances(states, policy.mean_action(states), std, metric)
            nearest = float(per_state.mean(axis=0).min())
        return dataclasses.replace(
            candidate,
            status="done",
            final_eval=trained.final_eval,
            eval_curve=trained.eval_curve,
            wall_seconds=trained.wall_seconds,
            nearest=nearest,
            meets=meets_criteria(trained.final_eval["return_mean"], self.reference_median(), nearest, least),
        )

    def criteria(self, threshold: float) -> tuple[str, float]:
        """How a candidate trained at `threshold` is judged for the criteria: (the metric of its distance to the
        nearest policy it avoids, the least that distance must be). The paper's distance between mean actions
        (`deterministic`), at `threshold`; for a run whose threshold is in another metric (`wasserstein2`, `state`),
        the same multiple of the references' mean pairwise *mean-action* distance (`action_r0`), so that a kept
        candidate is judged as `npsco evaluate` judges its distance. A threshold given as a number in another metric
        has no mean-action counterpart: judged in its own metric."""
        method = self.config.method
        if method.metric == "deterministic":
            return "deterministic", threshold
        if method.r0 is not None or self.r0_default is None:
            return method.metric, threshold
        return "deterministic", threshold / self.r0_default * self.references_action_r0()

    def references_action_r0(self) -> float:
        """The references' mean pairwise distance between mean actions, measured as the default threshold is (and
        as `npsco evaluate` measures it for a run whose threshold is in another metric); computed once."""
        if self.action_r0 is None:
            refs = [m for m in self.members if m.role == "reference"]
            self.action_r0 = default_threshold(
                [self.policy(m) for m in refs],
                episodes=self.config.distance_episodes,
                seed=DISTANCE_EPISODES,
                max_episode_steps=self.config.ppo.max_episode_steps,
            ).r0
        return self.action_r0

    def reference_median(self) -> float:
        """The median final return of the references (the criteria's yardstick)."""
        returns = [m.final_eval["return_mean"] for m in self.members if m.role == "reference" and m.final_eval]
        return float(np.median(returns))

    def reference_threshold(self) -> Threshold:
        """The trained references' pairwise distances and their mean, the default r0, in the method's metric."""
        refs = [m for m in self.members if m.role == "reference"]
        method = self.config.method
        return default_threshold(
            [self.policy(m) for m in refs],
            [m.name for m in refs],
            episodes=self.config.distance_episodes,
            seed=DISTANCE_EPISODES,
            max_episode_steps=self.config.ppo.max_episode_steps,
            metric=method.metric,
            discount=method.novelty_discount,
        )

    def compute_threshold(self) -> float:
        """The default r0 from the trained references (the mean pairwise distance); writes `threshold.json`."""
        th = self.reference_threshold()
        atomic_write_json(self.out / THRESHOLD_FILE, th.to_dict())
        return th.r0


def finished_policy(
    run_dir: Path, cfg: PPOConfig, config: PopulationConfig, member: Member, candidate: int
) -> Policy | None:
    """The policy an earlier attempt trained to its end in `run_dir` (its `policy.safetensors`, with a metrics file,
    for this task and seed, its whole budget, recorded as this member in its `config.json`), else None. Such a policy
    is taken as it is: training it again would delete a finished policy (a kill during its final evaluation, or a
    manifest that lost its entry, left its member not `done`)."""
    path, record = run_dir / POLICY_FILE, run_dir / CONFIG_FILE
    if not (path.is_file() and record.is_file() and (run_dir / METRICS_FILE).is_file()):
        return None
    try:
        policy = load_policy(path)
        recorded = read_json(record)
        if isinstance(recorded, dict) and "ppo" in recorded:  # an earlier npsco's record, as this one writes it
            recorded = {**recorded, "ppo": current_ppo_settings(recorded["ppo"])}
    except (NpscoError, OSError, ValueError):
        return None  # not a whole policy of this run: trained again
    meta = policy.metadata
    same = (
        meta.get("env_id") == cfg.env_id
        and meta.get("seed") == cfg.seed
        and (meta.get("training") or {}).get("global_step") == cfg.policy_steps
        and recorded == json.loads(json.dumps(member_record(cfg, config, member, candidate)))
    )
    return policy if same else None


def member_record(cfg: PPOConfig, config: PopulationConfig, member: Member, candidate: int = 0) -> dict[str, Any]:
    """What a population policy's `config.json` holds: as an `npsco train` run's (`command`, `ppo`: its settings, its
    own seed), then its method's settings (null for a reference) and its place in the population (`candidate`: which
    candidate of its slot it is, 0 without `--candidates`)."""
    return {
        "command": "population",
        "ppo": cfg.to_dict(),
        "method": None if member.role == "reference" else config.method.to_dict(),
        "member": {
            "name": member.name,
            "role": member.role,
            "chain": None if member.chain is None else member.chain.name,
            "index": member.index,
            "threshold": member.threshold,
            "references": list(member.references),
            "candidate": candidate,
        },
    }


def train_member_job(
    out: str,
    config: PopulationConfig,
    members: list[dict[str, Any]],
    r0_default: float | None,
    name: str,
    progress: bool = False,
    tracking: Tracking | None = None,
) -> dict[str, Any]:
    """Job: train the member `name` of the population at `out` and evaluate it; returns its manifest record."""
    trust_task(config.ppo.env_id)  # the run's own task, which its references' checkpoints name too (npsco.task_ids)
    snapshot = PopulationSnapshot.from_records(out, config, members, r0_default)
    return snapshot.train(snapshot.member(name), progress, tracking=tracking).to_dict()


def train_candidate_job(
    out: str,
    config: PopulationConfig,
    members: list[dict[str, Any]],
    r0_default: float | None,
    name: str,
    index: int,
    progress: bool = False,
    tracking: Tracking | None = None,
) -> dict[str, Any]:
    """Job: train candidate `index` of the member `name` and measure it; returns its manifest record."""
    trust_task(config.ppo.env_id)
    snapshot = PopulationSnapshot.from_records(out, config, members, r0_default)
    return dataclasses.asdict(snapshot.train_candidate(snapshot.member(name), index, progress, tracking))


def threshold_job(out: str, config: PopulationConfig, members: list[dict[str, Any]]) -> float:
    """Job: compute the default threshold from the trained references (writes `threshold.json`); returns r0."""
    trust_task(config.ppo.env_id)
    return PopulationSnapshot.from_records(out, config, members, None).compute_threshold()
