"""Training configuration: one flat PPO dataclass (a docstring per field) and the presets per task.

Every method (PPO, IPD, WSR, TNB, CTNB, CPO) trains with the same `PPOConfig` for a task, as the paper does
("the same hyper-parameter settings per environment"); method knobs live in `MethodConfig`.

Longer than ~400 lines on purpose: every setting is here once, with the docstring that docs/configuration.md and
`--help` are generated from; splitting PPO and method settings apart would split that one table.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from npsco.algos.registry import METHODS as _REGISTRY
from npsco.errors import NpscoError
from npsco.tasks import MAZE_ID

MUJOCO_TASKS = ("Hopper", "Walker2d", "HalfCheetah")
PRESETS = ("default", "paper")
ENV_BACKENDS = ("auto", "sync", "async", "envpool")  # `envpool`: MuJoCo only, optional package (docs/environments.md)


@dataclass
class PPOConfig:
    """PPO hyper-parameters and run settings (CleanRL naming)."""

    env_id: str = MAZE_ID
    """Gymnasium id of the task (`npsco/FourRewardMaze-v0`, `Hopper-v5`, `Walker2d-v5`, `HalfCheetah-v5`, `-v4` too)."""
    seed: int = 0
    """Seed of torch, numpy and the environments; the same seed reproduces the same run on the same machine (the trainer
    draws from its own generators, whatever else in the process draws from torch's or numpy's global ones)."""
    total_timesteps: int = 1_000_000
    """Environment steps to train for (summed over the vectorised environments)."""
    num_envs: int = 1
    """Number of environments stepped in parallel (one vector env)."""
    num_steps: int = 2048
    """Steps per environment per rollout; a rollout (batch) holds `num_envs * num_steps` transitions."""
    env_backend: str = "auto"
    """Vector-env backend: `auto` (numpy twin for the maze, `sync` otherwise), `sync`, `async`, `envpool` (MuJoCo
    only)."""
    max_episode_steps: int | None = None
    """Override of the task's episode length (the maze default is 100, MuJoCo 1000); None keeps the task's own."""
    learning_rate: float = 3e-4
    """Adam learning rate (start value when annealed)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the run."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """Lambda of generalised advantage estimation."""
    num_minibatches: int = 32
    """Minibatches per epoch (minibatch size = batch size / num_minibatches)."""
    update_epochs: int = 10
    """Passes over the batch per update."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_coef: float = 0.2
    """PPO surrogate clipping coefficient."""
    clip_vloss: bool = True
    """Clip the value loss around the old values, as CleanRL and the PPO paper's code do."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clipping threshold."""
    target_kl: float | None = None
    """Stop the epochs of an update early when the approximate KL exceeds this (None: never)."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the actor's tanh MLP (the mean); log-std is a state-independent parameter."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of each critic's tanh MLP."""
    init_log_std: float = 0.0
    """Initial value of the actor's log standard deviation."""
    norm_obs: bool = True
    """Normalise observations with running mean/std statistics kept inside the policy (saved with it)."""
    obs_clip: float = 10.0
    """Clip normalised observations to [-obs_clip, obs_clip]."""
    scale_reward: bool = True
    """Divide rewards by the running std of the discounted return (training only; reported returns are raw)."""
    reward_clip: float = 10.0
    """Clip scaled rewards to [-reward_clip, reward_clip]."""
    eval_every: int = 25
    """Deterministic evaluation every this many iterations (and at the end); 0 disables periodic evaluation."""
    eval_episodes: int = 10
    """Episodes per periodic evaluation."""
    torch_threads: int = 1
    """torch.set_num_threads; 1 is fastest for these small networks on a few cores."""
    update_backend: str = "numpy"
    """PPO's update: `numpy` (forward and backward passes written out; the same computation, several times less CPU
    time for these small networks) or `torch` (autograd and torch.optim.Adam, the reference `numpy` is tested against).
    `numpy` runs the torch update, with a warning, for an agent or optimiser it does not handle, or a `Trainer`
    subclass that overrides `critic_loss`."""
    checkpoint_every: int = 50
    """Save the policy in training every this many iterations to checkpoints/last.safetensors (0: never; the final
    and the Ctrl-C policies are saved regardless): a policy to use or evaluate, not a state to resume training from
    (no critics, no optimiser)."""

    @property
    def batch_size(self) -> int:
        """Transitions per rollout."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch."""
        return self.batch_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        """Rollout + update iterations in the run."""
        return self.total_timesteps // self.batch_size

    def validate(self) -> PPOConfig:
        """Refuse inconsistent settings with a clear message; returns self."""
        checks = [
            (self.total_timesteps > 0, "total_timesteps must be > 0"),
            (self.num_envs > 0 and self.num_steps > 0, "num_envs and num_steps must be > 0"),
            (
                self.total_timesteps >= self.batch_size,
                f"total_timesteps ({self.total_timesteps}) is less than one batch, "
                f"num_envs*num_steps ({self.batch_size}): give at least {self.batch_size} steps, "
                "or fewer envs or steps per rollout",
            ),
            (
                self.num_minibatches > 0 and self.batch_size % self.num_minibatches == 0,
                f"num_minibatches ({self.num_minibatches}) must divide the batch size "
                f"num_envs*num_steps ({self.batch_size})",
            ),
            (self.update_epochs > 0, "update_epochs must be > 0"),
            (
                0.0 < self.gamma <= 1.0 and 0.0 <= self.gae_lambda <= 1.0,
                "gamma must be in (0, 1], gae_lambda in [0, 1]",
            ),
            (self.learning_rate > 0, "learning_rate must be > 0"),
            (self.clip_coef > 0, "clip_coef must be > 0"),
            (
                self.env_backend in ENV_BACKENDS,
                f"env_backend must be auto, sync, async or envpool, not {self.env_backend!r}",
            ),
            (self.eval_episodes > 0, "eval_episodes must be > 0"),
            (self.torch_threads > 0, "torch_threads must be > 0"),
            (
                self.update_backend in ("numpy", "torch"),
                f"update_backend must be numpy or torch, not {self.update_backend!r}",
            ),
            (self.max_episode_steps is None or self.max_episode_steps > 0, "max_episode_steps must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid configuration: {message}")
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOConfig:
        """Inverse of `to_dict`; unknown keys are refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise NpscoError(f"unknown PPO config field(s): {', '.join(unknown)}")
        kwargs: dict[str, Any] = {k: tuple(v) if k in ("actor_hidden", "critic_hidden") else v for k, v in data.items()}
        return cls(**kwargs)


def task_family(env_id: str) -> str:
    """`maze`, `Hopper`, `Walker2d`, `HalfCheetah` or `other` for an env id."""
    if env_id == MAZE_ID:
        return "maze"
    name = env_id.split("/")[-1].split("-")[0]
    return name if name in MUJOCO_TASKS else "other"


# The paper's Appendix C: actor 32 -> hid, hid = 10 / 64 / 256; 1M / 1.6M / 3M steps. gamma/lambda of the authors' code.
_PAPER_MUJOCO = {
    "Hopper": dict(actor_hidden=(32, 10), total_timesteps=1_000_000),
    "Walker2d": dict(actor_hidden=(32, 64), total_timesteps=1_600_000),
    "HalfCheetah": dict(actor_hidden=(32, 256), total_timesteps=3_000_000),
}

_MAZE_DEFAULT = dict(
    total_timesteps=150_000,
    num_envs=16,
    num_steps=64,
    num_minibatches=4,
    update_epochs=10,
    learning_rate=1e-3,
    gamma=0.99,
    ent_coef=0.0,
    eval_every=10,
    eval_episodes=50,
    checkpoint_every=0,
)


def preset(env_id: str, name: str = "default") -> PPOConfig:
    """The PPO configuration for a task.

    `default` is strong and CleanRL-like (MuJoCo: 64x64 tanh MLPs, 1 env x 2048 steps, minibatch 64, 10 epochs, 1M
    steps). `paper` follows the paper's Appendix C (actor 32 -> 10 / 64 / 256 for Hopper / Walker2d / HalfCheetah,
    1M / 1.6M / 3M steps) with the authors' gamma 0.995 and lambda 0.97. The maze has its own small budget in both.
    """
    if name not in PRESETS:
        raise NpscoError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    family = task_family(env_id)
    overrides: dict[str, Any] = {"env_id": env_id}
    if family == "maze":
        overrides.update(_MAZE_DEFAULT)
    elif name == "paper" and family in _PAPER_MUJOCO:
        overrides.update(_PAPER_MUJOCO[family], gamma=0.995, gae_lambda=0.97)
    return PPOConfig(**overrides)


def field_docs(cls: type = PPOConfig) -> dict[str, str]:
    """The docstring of each dataclass field (the string literal under it), read from the source."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = re.sub(r"\s+", " ", nxt.value.value).strip()
    return docs


def apply_overrides(cfg: Any, assignments: list[str]) -> Any:
    """Apply `key=value` strings to a config dataclass (types follow the field's default), with clear errors."""
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    updates: dict[str, Any] = {}
    for item in assignments:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise NpscoError(f"--set expects key=value, got {item!r}")
        if key not in fields:
            raise NpscoError(f"unknown setting {key!r}; known: {', '.join(sorted(fields))}")
        updates[key] = _parse_value(key, raw.strip(), str(fields[key].type))
    return dataclasses.replace(cfg, **updates)


def _parse_value(key: str, raw: str, annotation: str) -> Any:
    """Convert `raw` to the type named by the field's annotation (`int`, `float | None`, `tuple[int, ...]`, ...)."""
    try:
        if raw.lower() == "none":
            if "None" not in annotation:
                raise ValueError(raw)
            return None
        if annotation.startswith("bool"):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if annotation.startswith("tuple"):
            return tuple(int(x) for x in raw.strip("()[]").split(",") if x.strip())
        if annotation.startswith("int"):
            value = float(raw)
            if not value.is_integer():
                raise ValueError(raw)
            return int(value)
        if annotation.startswith("float"):
            return float(raw)
        return raw
    except ValueError:
        raise NpscoError(f"bad value for {key}: {raw!r} (expected {annotation})") from None


__all__ = ["PPOConfig", "preset", "task_family", "field_docs", "apply_overrides", "MAZE_ID", "PRESETS"]


METHODS: tuple[str, ...] = tuple(_REGISTRY)
"""The method names, plain PPO first, from the registry `npsco.algos.METHODS`."""


METRICS = ("deterministic", "wasserstein2")
"""The per-state distances between policies (`npsco.novelty.metrics`)."""
IPD_ONLY = ("r0_warmup", "r0_profile")
"""MethodConfig fields that only IPD reads, besides the `ipd_*` ones."""


def method_reads(method: str, key: str) -> bool:
    """Whether `method` reads the MethodConfig field `key`: a field named after a method (`ipd_*`, `wsr_*`, `tnb_*`,
    `ctnb_*`, `cpo_*`) belongs to that method alone (`tnb_*` to CTNB too), as do the `IPD_ONLY` fields; the others
    to every novelty method."""
    if key in IPD_ONLY:
        return method == "ipd"
    owner = key.split("_")[0]
    if owner not in METHODS[1:]:
        return True
    return method == owner or (owner == "tnb" and method == "ctnb")


TNB_RULES = ("authors", "paper_eq5", "safe")
"""TNB/CTNB's bisector rules (`npsco.algos.constrained.bisector`); `tnb_rule` also accepts `paper`, the name of
`paper_eq5` in runs made before the rule was renamed."""


@dataclass
class MethodConfig:
    """Settings of the novelty-seeking methods (PPO ignores them). Each method reads only its own fields."""

    method: str = "ipd"
    """Method of the novel policies: `ipd`, `wsr`, `tnb`, `ctnb`, `cpo` (or `ppo`: more seeds, no novelty)."""
    r0: float | None = None
    """Novelty threshold, absolute. None: `r0_scale` x the default (mean pairwise distance of the PPO references)."""
    r0_scale: float = 1.0
    """Kept so that older run directories still resume; must stay 1. Thresholds as multiples of the default are the
    population's `--r0-scale` (one chain per multiple)."""
    t_start: int | None = None
    """The constraint applies after this many steps of an episode (paper: t_S = 20). None: the task's default
    (20 on MuJoCo, 3 on the maze, whose episodes are shorter than 20 steps)."""
    metric: str = "deterministic"
    """Per-state distance: `deterministic` (||mu - mu_j||, paper App. C) or `wasserstein2` (paper Sec. 3.1)."""
    novelty_action: str = "mean"
    """Which action of the new policy is compared with the references': `mean` (its deterministic action, clipped, as
    the paper's App. C) or `sample` (the action actually executed, noise included)."""
    ipd_rule: str = "instant"
    """IPD termination rule: `instant` (paper Alg. 1: end the episode at the first step t > t_S where the running
    novelty < r0) or `cumulative` (authors' code: sum (u_t - r0) over t > t_S, end when the sum <= -ipd_slack)."""
    ipd_slack: float = 0.1
    """Slack of the `cumulative` IPD rule."""
    novelty_discount: float = 1.0
    """The running novelty's memory: u_t = min_j sum_k g^(t-k) d_j(s_k) / sum_k g^(t-k) with g = novelty_discount.
    1: the mean since the episode's first step (paper Alg. 1); below 1 the distant past is forgotten (0.98: a horizon
    of ~50 steps), e.g. a take-off in which all policies act alike. Used by IPD, WSR, TNB and CTNB."""
    r0_warmup: float = 0.0
    """IPD only: the threshold rises linearly from 0 at the first iteration to r0 at this fraction of the training
    budget, then stays at r0 (0: the full r0 from the start, as the paper)."""
    r0_profile: str = "constant"
    """IPD only: `constant` (r0 at every step, as the paper) or `reference`: at episode step t the threshold is
    r0 x rho(t), where rho(t) is the references' own mean pairwise *running* distance at step t of their deterministic
    episodes divided by its whole-episode value (threshold.json, `profile`), so that the references, compared with
    each other, meet it on average at every step."""
    wsr_weight: float | None = None
    """WSR weight of the shaped novelty reward. None: the task's default (10 on the maze as the paper, 0.5 on MuJoCo
    as the authors' README)."""
    wsr_shape: str = "linear"
    """WSR shape of the novelty reward: `linear` (u), `exp` (exp(u)), `neg_exp` (-exp(-u)) (paper Sec. 3.2)."""
    tnb_rule: str = "authors"
    """TNB/CTNB combination of the task gradient f and the novelty gradient g (`npsco.algos.constrained.bisector`),
    in the same direction for an acute angle (their bisector); for an obtuse one: `authors` (the authors' code: f made
    orthogonal to g, neutral for novelty), `paper_eq5` (Eq. 5 as printed, a step against novelty; `paper` in older
    runs) or `safe` (the default until 2026-11-26: f made orthogonal to g, then bisected with g)."""
    ctnb_slack: float = 0.0
    """CTNB: an iteration's constraint counts as violated (bisector step; else a plain PPO step) when the mean of
    (u_t - r0) over the batch's steps with t > t_S is < -ctnb_slack."""
    cpo_max_kl: float = 0.01
    """CPO trust region: the bound delta on the batch's mean KL(pi_old || pi_new)."""
    cpo_damping: float = 0.1
    """CPO: damping added to the Fisher-vector products, (F + damping I) v."""
    cpo_cg_iters: int = 10
    """CPO: conjugate-gradient iterations for F^-1 g and F^-1 b."""
    cpo_backtrack_iters: int = 10
    """CPO: line-search trials; trial i scales the step by cpo_backtrack_coef ** i."""
    cpo_backtrack_coef: float = 0.8
    """CPO: line-search shrink factor."""
    cpo_cost_limit: float = 0.0
    """CPO: limit d of the constraint J_C <= d, with J_C the batch's mean per-step cost r0 - min_j d_j(s_t); 0 means
    "mean novelty >= r0"."""

    def validate(self) -> MethodConfig:
        checks = [
            (self.method in METHODS, f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}"),
            (
                self.r0 is None or (isinstance(self.r0, (int, float)) and self.r0 > 0 and self.r0 < float("inf")),
                f"r0 must be a positive number, got {self.r0!r}",
            ),
            (
                self.r0_scale == 1.0,
                f"r0_scale is not a method setting (got {self.r0_scale}): give the multiple of the "
                f"default threshold with --r0-scale (npsco population) or r0_scales (sweep grids)",
            ),
            (self.t_start is None or self.t_start >= 0, "t_start must be >= 0"),
            (self.metric in METRICS, f"unknown metric {self.metric!r}; choose one of {', '.join(METRICS)}"),
            (self.novelty_action in ("mean", "sample"), "novelty_action must be mean or sample"),
            (self.ipd_rule in ("instant", "cumulative"), "ipd_rule must be instant or cumulative"),
            (self.ipd_slack >= 0, "ipd_slack must be >= 0"),
            (0 < self.novelty_discount <= 1, "novelty_discount must be in (0, 1]"),
            (0 <= self.r0_warmup <= 1, "r0_warmup must be in [0, 1] (a fraction of the training budget)"),
            (self.r0_profile in ("constant", "reference"), "r0_profile must be constant or reference"),
            (
                self.method == "ipd" or (self.r0_warmup == 0 and self.r0_profile == "constant"),
                f"r0_warmup and r0_profile are IPD settings; method {self.method} uses a constant r0",
            ),
            (self.wsr_shape in ("linear", "exp", "neg_exp"), "wsr_shape must be linear, exp or neg_exp"),
            (self.tnb_rule in (*TNB_RULES, "paper"), f"tnb_rule must be one of {', '.join(TNB_RULES)}"),
            (self.ctnb_slack >= 0, "ctnb_slack must be >= 0"),
            (self.cpo_max_kl > 0, "cpo_max_kl must be > 0"),
            (self.cpo_damping > 0, "cpo_damping must be > 0 (the Fisher matrix can be singular)"),
            (self.cpo_cg_iters > 0, "cpo_cg_iters must be > 0"),
            (self.cpo_backtrack_iters > 0, "cpo_backtrack_iters must be > 0"),
            (0 < self.cpo_backtrack_coef < 1, "cpo_backtrack_coef must be in (0, 1)"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid method configuration: {message}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_t_start(env_id: str) -> int:
    """The task's default t_S: 20 as the paper on MuJoCo; 3 on the maze (its episodes end in < 20 steps)."""
    return 3 if task_family(env_id) == "maze" else 20


def default_r0_scale(env_id: str) -> float:
    """The task's default threshold as a multiple of r0_default (the references' mean pairwise distance), used when
    none is given: 0.5 on every task, the multiple with which IPD did best on Hopper and the maze (the measurements:
    docs/methods/ipd.md, "The threshold"; benchmarks/results/hopper_ipd_half.md, maze_fig2_starts.md). The same on
    every task today; `env_id` keeps a per-task default possible (the maze's was 1 until 2026-11-26)."""
    return 0.5


def default_wsr_weight(env_id: str) -> float:
    """10 on the maze (paper Fig. 2), 0.5 elsewhere (authors' README for MuJoCo)."""
    return 10.0 if task_family(env_id) == "maze" else 0.5
