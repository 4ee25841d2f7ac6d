"""PPO's settings: one flat dataclass (`PPOConfig`, a docstring per field, CleanRL naming) and the presets per task
(`preset`). Every method trains with the same `PPOConfig` for a task, as the paper does ("the same hyper-parameter
settings per environment"); a method's own settings are its own (`npsco.methods`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from npsco.compat import current_ppo_settings
from npsco.errors import NpscoError
from npsco.limits import check_network
from npsco.seeds import MAX_SEED
from npsco.tasks import ENV_BACKENDS, MAZE_ID, task_spec

PRESETS = ("default", "paper")


EVAL_POINTS = 10
"""The fewest periodic evaluations (points of the training curve) of a run of at least this many iterations."""


def eval_period(eval_every: int, iterations: int) -> int:
    """The iterations between two periodic evaluations of a run of `iterations`: `eval_every`, or fewer so that the
    run evaluates at least `EVAL_POINTS` times (`iterations // EVAL_POINTS`); a run of fewer iterations than that
    evaluates after every one (its curve has a point per iteration). 0: no periodic evaluation. A 1M-step MuJoCo run
    (488 iterations) keeps the default 25."""
    if eval_every <= 0:
        return 0
    return min(eval_every, max(1, iterations // EVAL_POINTS))


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
    """Vector-env backend: `auto` (numpy twin for the maze, otherwise `sync`'s transitions with a leaner step), `sync`,
    `async`, `envpool` (MuJoCo only)."""
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
    """Deterministic evaluation every this many iterations at most (and at the end): a run of fewer than
    `EVAL_POINTS` x `eval_every` iterations evaluates more often, so that its training curve has at least
    `EVAL_POINTS` points, or one per iteration when it has fewer (`eval_period`); 0 disables periodic evaluation."""
    eval_episodes: int = 10
    """Episodes per periodic evaluation."""
    torch_threads: int = 1
    """torch.set_num_threads; 1 is fastest for these small networks on a few cores."""
    state_every: float = 30.0
    """Save the resumable training state (networks, optimiser, normalisers, generators, environments, counters:
    `checkpoints/state.safetensors`) every this many seconds of wall time, between two iterations, and when
    stopped by Ctrl-C or SIGTERM; re-running the same command resumes from it, so a SIGKILL loses at most this
    many seconds and the iteration in progress. A save costs ~2-7 ms (0.01% of training at 30 s). 0: after every
    iteration."""
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
    def eval_period(self) -> int:
        """Iterations between two periodic evaluations (`eval_period`); 0: none."""
        return eval_period(self.eval_every, self.num_iterations)

    @property
    def num_iterations(self) -> int:
        """Rollout + update iterations in the run."""
        return self.total_timesteps // self.batch_size

    @property
    def policy_steps(self) -> int:
        """Environment steps one policy trains: whole iterations, so at most `total_timesteps`."""
        return self.num_iterations * self.batch_size

    def budget(self) -> str:
        """The steps it trains, as logs say it: `1,000,000`, or `4,096 (5,000 asked: 2 whole iterations of 2,048)`
        when `total_timesteps` is not a whole number of batches."""
        trained = self.policy_steps
        if trained == self.total_timesteps:
            return f"{trained:,}"
        return (
            f"{trained:,} ({self.total_timesteps:,} asked: {self.num_iterations:,} whole iterations of "
            f"{self.batch_size:,})"
        )

    def validate(self) -> PPOConfig:
        """Refuse inconsistent settings with a clear message; returns self."""
        checks = [
            (0 <= self.seed <= MAX_SEED, f"seed must be in [0, {MAX_SEED}] (a population adds offsets to it)"),
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
            (self.state_every >= 0, "state_every must be >= 0 (seconds; 0: after every iteration)"),
            (self.torch_threads > 0, "torch_threads must be > 0"),
            (self.max_episode_steps is None or self.max_episode_steps > 0, "max_episode_steps must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise NpscoError(f"invalid configuration: {message}")
        try:  # the networks' memory, before anything allocates them (the task's sizes: the trainer checks again)
            check_network("actor_hidden", self.actor_hidden)
            check_network("critic_hidden", self.critic_hidden)
        except NpscoError as e:
            raise NpscoError(f"invalid configuration: {e}") from None
        return self

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOConfig:
        """Inverse of `to_dict` (an earlier npsco's too: `npsco.compat.current_ppo_settings`); unknown keys are
        refused."""
        data = current_ppo_settings(data)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise NpscoError(f"unknown PPO config field(s): {', '.join(unknown)}")
        kwargs: dict[str, Any] = {k: tuple(v) if k in ("actor_hidden", "critic_hidden") else v for k, v in data.items()}
        return cls(**kwargs)


def preset(env_id: str, name: str = "default") -> PPOConfig:
    """The PPO configuration for a task.

    `default` is strong and CleanRL-like (MuJoCo: 64x64 tanh MLPs, 1 env x 2048 steps, minibatch 64, 10 epochs, 1M
    steps). `paper` follows the paper's Appendix C (actor 32 -> 10 / 64 / 256 for Hopper / Walker2d / HalfCheetah,
    1M / 1.6M / 3M steps) with the authors' gamma 0.995 and lambda 0.97. The maze has its own small budget in both
    (`npsco.tasks.TaskSpec`).
    """
    if name not in PRESETS:
        raise NpscoError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    spec = task_spec(env_id)
    return PPOConfig(env_id=env_id, **(spec.paper_preset if name == "paper" else spec.default_preset))


__all__ = ["PPOConfig", "preset", "PRESETS"]
