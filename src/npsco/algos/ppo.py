"""PPO for continuous actions, shared by every method: rollout -> advantages -> update.

The three phases are the three methods of `Trainer`: `collect_rollout`, `compute_advantages`, `update`. A novelty method
(IPD, WSR, TNB, CTNB, CPO) is a small `Method` subclass that hooks into them: it sees every step of the rollout (and may
end an episode, reshape the reward or add a reward stream with its own critic), and it may replace the update.
The maths (GAE, losses, reward scaling) are pure functions at the top of this file.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from npsco.config import PPOConfig
from npsco.envs.make import final_observations, make_vector_env
from npsco.errors import NpscoError
from npsco.logger import MetricsLogger
from npsco.policy import LOG_SQRT_2PI, ActorCritic, Policy, mlp_forward, space_metadata


# ----------------------------------------------------------------------------------------------------------- the maths
def compute_gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    terminated: np.ndarray,
    done: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over a (T, N) rollout, with correct episode ends.

    `next_values[t]` is V of the state reached by step t: the next state's value inside an episode, the value of the
    final observation when the episode was *truncated* (time limit), and ignored when it *terminated* (no bootstrap).
    `done = terminated | truncated` cuts the recursion at episode boundaries:

        delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}

    Returns (advantages, returns = advantages + values).
    """
    T = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    not_terminated = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - done.astype(np.float32)
    deltas = rewards + gamma * not_terminated * next_values - values
    last = np.zeros(rewards.shape[1:], dtype=np.float32)
    for t in reversed(range(T)):
        last = deltas[t] + gamma * gae_lambda * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


def policy_loss(
    new_logprob: torch.Tensor, old_logprob: torch.Tensor, advantages: torch.Tensor, clip_coef: float
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO's clipped surrogate, as a loss to minimise: mean(max(-A r, -A clip(r, 1-eps, 1+eps))), r = pi/pi_old.

    Also returns the approximate KL ((r - 1) - log r, Schulman's low-variance estimator) and the clip fraction.
    """
    log_ratio = new_logprob - old_logprob
    ratio = log_ratio.exp()
    loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()
    return loss, {"approx_kl": approx_kl, "clipfrac": clipfrac}


def value_loss(
    new_values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_coef: float, clip: bool
) -> torch.Tensor:
    """0.5 * mean squared error to the returns; with `clip`, the max of the plain and the clipped-around-old errors."""
    unclipped = (new_values - returns) ** 2
    if not clip:
        return 0.5 * unclipped.mean()
    clipped = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (clipped - returns) ** 2).mean()


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std (the minibatch normalisation of the PPO implementation details)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - Var(returns - values) / Var(returns); nan when the returns are constant."""
    var = np.var(returns)
    return float("nan") if var == 0 else float(1 - np.var(returns - values) / var)


class RewardScaler:
    """Divides rewards by the running std of each env's discounted return (Gymnasium's NormalizeReward), then clips."""

    def __init__(self, num_envs: int, gamma: float, clip: float, enabled: bool = True):
        self.enabled, self.gamma, self.clip = enabled, gamma, clip
        self.returns = np.zeros(num_envs, np.float64)
        self.mean, self.var, self.count = 0.0, 1.0, 1e-4

    def __call__(self, rewards: np.ndarray, done: np.ndarray) -> np.ndarray:
        if not self.enabled:
            return rewards.astype(np.float32)
        self.returns = self.returns * self.gamma + rewards
        n = self.returns.size
        bm, bv = (self.returns.mean(), self.returns.var()) if n > 1 else (float(self.returns[0]), 0.0)
        delta, total = bm - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + bv * n + delta**2 * self.count * n / total) / total
        self.count = total
        self.returns[done] = 0.0
        return np.clip(rewards / math.sqrt(self.var + 1e-8), -self.clip, self.clip).astype(np.float32)


# ------------------------------------------------------------------------------------------------ the method hooks
@dataclass
class StepInfo:
    """What a method sees after each vectorised step of the rollout (arrays over the N envs)."""

    obs: np.ndarray
    """Raw observations s_t at which the actions were taken, (N, obs_dim)."""
    mean_action: np.ndarray
    """The new policy's deterministic action at s_t, clipped to the action bounds, (N, A)."""
    action: np.ndarray
    """The action executed at s_t (the Gaussian sample, clipped to the action bounds), (N, A)."""
    reward: np.ndarray
    """Task reward of the step, (N,)."""
    terminated: np.ndarray
    truncated: np.ndarray
    episode_step: np.ndarray
    """Steps taken in the current episode including this one (1 at the first step), (N,)."""


@dataclass
class StepOutcome:
    """A method's answer to a step. Every field is optional."""

    train_reward: np.ndarray | None = None
    """Replaces the task reward for training only (WSR); the reported return stays the task reward."""
    streams: dict[str, np.ndarray] = field(default_factory=dict)
    """Rewards of extra streams (TNB's novelty, CPO's cost), each learnt by its own critic with its own GAE."""
    terminate: np.ndarray | None = None
    """Envs whose episode the method ends now, as a true termination (IPD's constraint)."""


class Method:
    """Plain PPO. Novelty methods subclass it and override the hooks they need."""

    name = "ppo"
    streams: tuple[str, ...] = ()
    """Extra reward streams; each gets a critic (`agent.add_critic`) and its own advantages in the batch."""

    def bind(self, trainer: "Trainer") -> None:
        """Called once when the trainer has built its envs and agent."""
        for s in self.streams:
            trainer.agent.add_critic(s)

    def on_step(self, step: StepInfo) -> StepOutcome | None:
        """Called after every vectorised env step, before episode ends are handled."""
        return None

    def end_episodes(self, done: np.ndarray) -> None:
        """Called after every step with the envs whose episode ended (by the env or by `terminate`)."""

    def update(self, trainer: "Trainer", batch: "Batch") -> dict[str, float]:
        """The update phase; PPO's by default."""
        return trainer.ppo_update(batch)

    def iteration_metrics(self) -> dict[str, float]:
        """Metrics of the iteration (namespaced keys); called once per iteration after the update."""
        return {}

    def metadata(self) -> dict[str, Any]:
        """Method settings saved in every checkpoint."""
        return {}


# ------------------------------------------------------------------------------------------------------ the trainer
@dataclass
class Batch:
    """A rollout flattened for the update: (T*N, ...) tensors; advantages/returns/values per stream."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    advantages: dict[str, torch.Tensor]
    returns: dict[str, torch.Tensor]
    values: dict[str, torch.Tensor]
    size: int


@dataclass
class TrainResult:
    """What `train` returns: the final policy, its evaluation curve and the per-iteration metrics."""

    policy: Policy
    eval_curve: list[dict[str, float]]
    metrics: list[dict[str, Any]]
    interrupted: bool = False


class Trainer:
    """One policy trained by PPO (plus a method's hooks) on a vector env."""

    def __init__(
        self,
        cfg: PPOConfig,
        method: Method | None = None,
        run_dir: str | Path | None = None,
        tensorboard: bool = True,
        metadata: dict[str, Any] | None = None,
    ):
        self.cfg = cfg.validate()
        self.method = method or Method()
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.extra_metadata = dict(metadata or {})
        torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)

        self.envs = make_vector_env(cfg.env_id, cfg.num_envs, cfg.env_backend, cfg.max_episode_steps)
        obs_space, act_space = self.envs.single_observation_space, self.envs.single_action_space
        if len(act_space.shape) != 1 or not np.all(np.isfinite(act_space.low)):
            raise NpscoError(f"{cfg.env_id}: npsco needs a bounded continuous (Box) action space, got {act_space}")
        self.obs_space, self.action_space = obs_space, act_space
        self.act_low, self.act_high = act_space.low.astype(np.float32), act_space.high.astype(np.float32)
        self.agent = ActorCritic(
            int(np.prod(obs_space.shape)), act_space.shape[0], cfg.actor_hidden, cfg.critic_hidden,
            cfg.init_log_std, cfg.norm_obs, cfg.obs_clip,
        )
        self.method.bind(self)
        self.streams = ("task", *self.method.streams)
        self.optimizer = torch.optim.Adam(self.agent.parameters(), lr=cfg.learning_rate, eps=1e-5, fused=True)
        self.reward_scaler = RewardScaler(cfg.num_envs, cfg.gamma, cfg.reward_clip, cfg.scale_reward)
        self.logger = MetricsLogger(self.run_dir, tensorboard)

        self.global_step = 0
        self.iteration = 0
        self.next_obs, _ = self.envs.reset(seed=cfg.seed)
        self.next_obs = self.next_obs.astype(np.float32)
        self.episode_return = np.zeros(cfg.num_envs)
        self.episode_step = np.zeros(cfg.num_envs, np.int64)
        self.finished: list[tuple[float, int]] = []  # (return, length) of episodes finished this iteration
        self.forced_ends = 0

    # -------------------------------------------------------------------------------------------- phase 1: rollout
    def collect_rollout(self) -> dict[str, Any]:
        """Step the envs `num_steps` times with the current policy; returns the (T, N) arrays of the rollout."""
        cfg, agent, T, N = self.cfg, self.agent, self.cfg.num_steps, self.cfg.num_envs
        obs_dim, act_dim = agent.obs_dim, agent.action_dim
        buf = {
            "obs": np.zeros((T, N, obs_dim), np.float32),
            "actions": np.zeros((T, N, act_dim), np.float32),
            "logprobs": np.zeros((T, N), np.float32),
            "terminated": np.zeros((T, N), bool),
            "done": np.zeros((T, N), bool),
        }
        for key in ("rewards", "values", "next_values"):
            buf[key] = {s: np.zeros((T, N), np.float32) for s in self.streams}
        self.finished, self.forced_ends = [], 0
        actor, log_std, critics = agent.numpy_views()
        std = np.exp(log_std)
        for t in range(T):
            raw_obs = self.next_obs
            agent.obs_rms.update(raw_obs)
            obs = agent.obs_rms.normalize(raw_obs)
            # The policy runs in numpy during the rollout (5-10x cheaper than torch for these small MLPs).
            mean = mlp_forward(actor, obs)
            action = (mean + std * self.rng.standard_normal(mean.shape, dtype=np.float32)).astype(np.float32)
            buf["logprobs"][t] = (-0.5 * ((action - mean) / std) ** 2 - log_std - LOG_SQRT_2PI).sum(-1)
            for s in self.streams:
                buf["values"][s][t] = mlp_forward(critics[s], obs)[:, 0]
            buf["obs"][t], buf["actions"][t] = obs, action

            env_action = np.clip(action, self.act_low, self.act_high)
            next_obs, reward, terminated, truncated, infos = self.envs.step(env_action)
            next_obs = next_obs.astype(np.float32)
            reward = np.asarray(reward, np.float64)
            self.episode_step += 1
            self.episode_return += reward
            env_done = terminated | truncated
            final_obs = final_observations(infos, truncated, next_obs)

            out = self.method.on_step(StepInfo(raw_obs, np.clip(mean, self.act_low, self.act_high), env_action, reward,
                                               terminated, truncated, self.episode_step)) or StepOutcome()
            if out.terminate is not None and (forced := out.terminate & ~env_done).any():
                # IPD: end these episodes now, as a true termination (no bootstrap), and start new ones.
                reset_obs, _ = self.envs.reset(options={"reset_mask": forced})
                next_obs[forced] = reset_obs[forced]
                terminated = terminated | forced
                self.forced_ends += int(forced.sum())
            done = terminated | truncated

            train_reward = out.train_reward if out.train_reward is not None else reward
            buf["rewards"]["task"][t] = self.reward_scaler(np.asarray(train_reward, np.float64), done)
            for s in self.method.streams:
                buf["rewards"][s][t] = out.streams[s]
            buf["terminated"][t], buf["done"][t] = terminated, done

            if truncated.any():  # bootstrap from the value of the final observation on time-limit truncation
                fo = agent.obs_rms.normalize(final_obs[truncated])
                for s in self.streams:
                    buf["next_values"][s][t, truncated] = mlp_forward(critics[s], fo)[:, 0]
            for i in np.flatnonzero(done):
                self.finished.append((float(self.episode_return[i]), int(self.episode_step[i])))
            self.method.end_episodes(done)
            self.episode_return[done] = 0.0
            self.episode_step[done] = 0
            self.next_obs = next_obs
            self.global_step += N

        last = agent.obs_rms.normalize(self.next_obs)  # V(s_{t+1}) for steps that did not end an episode
        for s in self.streams:
            following = np.concatenate([buf["values"][s][1:], mlp_forward(critics[s], last)[:, 0][None]], axis=0)
            buf["next_values"][s] = np.where(buf["done"], buf["next_values"][s], following)
        return buf

    # ---------------------------------------------------------------------------------------- phase 2: advantages
    def compute_advantages(self, buf: dict[str, Any]) -> Batch:
        """GAE per reward stream, then flatten the rollout into a `Batch`."""
        cfg = self.cfg
        adv, ret, val = {}, {}, {}
        for s in self.streams:
            a, r = compute_gae(buf["rewards"][s], buf["values"][s], buf["next_values"][s], buf["terminated"],
                               buf["done"], cfg.gamma, cfg.gae_lambda)
            adv[s], ret[s] = torch.from_numpy(a.reshape(-1)), torch.from_numpy(r.reshape(-1))
            val[s] = torch.from_numpy(buf["values"][s].reshape(-1))
        n = cfg.batch_size
        return Batch(
            obs=torch.from_numpy(buf["obs"].reshape(n, -1)),
            actions=torch.from_numpy(buf["actions"].reshape(n, -1)),
            logprobs=torch.from_numpy(buf["logprobs"].reshape(-1)),
            advantages=adv, returns=ret, values=val, size=n,
        )

    # -------------------------------------------------------------------------------------------- phase 3: update
    def minibatches(self) -> Any:
        """Index tensors of the minibatches of one epoch (a fresh permutation each call)."""
        perm = torch.randperm(self.cfg.batch_size)
        return perm.split(self.cfg.minibatch_size)

    def critic_loss(self, batch: Batch, mb: torch.Tensor, obs: torch.Tensor | None = None) -> torch.Tensor:
        """Sum over streams of the (clipped) value losses on minibatch `mb`."""
        obs = batch.obs[mb] if obs is None else obs
        return sum(
            value_loss(self.agent.value(obs, s), batch.values[s][mb], batch.returns[s][mb], self.cfg.clip_coef,
                       self.cfg.clip_vloss)
            for s in self.streams
        )

    def ppo_update(self, batch: Batch, advantage_stream: str = "task") -> dict[str, float]:
        """`update_epochs` passes of minibatch Adam steps on the clipped surrogate + value losses - entropy bonus."""
        cfg, agent = self.cfg, self.agent
        stats: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "entropy": [], "approx_kl": [], "clipfrac": []}
        for _epoch in range(cfg.update_epochs):
            for mb in self.minibatches():
                obs = batch.obs[mb]
                new_logprob, entropy, _ = agent.evaluate(obs, batch.actions[mb])
                adv = batch.advantages[advantage_stream][mb]
                if cfg.norm_adv:
                    adv = normalize_advantages(adv)
                pg_loss, info = policy_loss(new_logprob, batch.logprobs[mb], adv, cfg.clip_coef)
                v_loss = self.critic_loss(batch, mb, obs)
                ent = entropy
                loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                for k, v in (("policy_loss", pg_loss), ("value_loss", v_loss), ("entropy", ent),
                             ("approx_kl", info["approx_kl"]), ("clipfrac", info["clipfrac"])):
                    stats[k].append(v.item())
            if cfg.target_kl is not None and stats["approx_kl"][-1] > cfg.target_kl:
                break
        return {f"losses/{k}": float(np.mean(v)) for k, v in stats.items()}

    # -------------------------------------------------------------------------------------------------- the loop
    def policy(self) -> Policy:
        """A frozen snapshot of the current policy with its metadata."""
        meta = {
            "env_id": self.cfg.env_id,
            "observation_space": space_metadata(self.obs_space),
            "action_space": space_metadata(self.action_space),
            "method": self.method.name,
            "seed": self.cfg.seed,
            "config": self.cfg.to_dict(),
            "method_config": self.method.metadata(),
            "training": {"global_step": self.global_step, "iteration": self.iteration},
        }
        meta.update(self.extra_metadata)
        return Policy.from_agent(self.agent, self.action_space, meta)

    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Deterministic evaluation of the current policy on fresh envs (seeds 1_000_000 + iteration * episodes + i)."""
        from npsco.evaluation import run_episodes

        n = episodes or self.cfg.eval_episodes
        res = run_episodes(self.policy(), n, seed=1_000_000 + self.iteration * n,
                           max_episode_steps=self.cfg.max_episode_steps)
        return {"eval/return_mean": float(res.returns.mean()), "eval/return_std": float(res.returns.std()),
                "eval/length_mean": float(res.lengths.mean())}

    def train(self, progress: bool = True, on_iteration: Callable[["Trainer", dict], None] | None = None) -> TrainResult:
        """Run all iterations; saves the final policy to `run_dir/policy.safetensors` when a run dir is set.

        Ctrl-C stops cleanly after saving the policy in training to `run_dir/checkpoints/interrupted.safetensors`.
        A NaN or inf in the losses or parameters stops training with an NpscoError; the last good policy is saved to
        `run_dir/checkpoints/last_good.safetensors`.
        """
        from tqdm import tqdm

        cfg = self.cfg
        eval_curve: list[dict[str, float]] = []
        bar = tqdm(total=cfg.num_iterations * cfg.batch_size, unit="step", disable=not progress, dynamic_ncols=True,
                   desc=f"{self.method.name} {cfg.env_id} seed {cfg.seed}", leave=False)
        last_good = self.policy()
        interrupted = False
        start = time.perf_counter()
        recent: list[float] = []
        try:
            for it in range(1, cfg.num_iterations + 1):
                self.iteration = it
                if cfg.anneal_lr:
                    self.optimizer.param_groups[0]["lr"] = cfg.learning_rate * (1.0 - (it - 1.0) / cfg.num_iterations)
                t0 = time.perf_counter()
                buf = self.collect_rollout()
                batch = self.compute_advantages(buf)
                t1 = time.perf_counter()
                metrics = self.method.update(self, batch)
                t2 = time.perf_counter()
                self._check_finite(metrics, last_good)
                last_good = self.policy()

                metrics.update(self.method.iteration_metrics())
                metrics["charts/learning_rate"] = self.optimizer.param_groups[0]["lr"]
                metrics["charts/SPS"] = cfg.batch_size / (t2 - t0)
                metrics["charts/rollout_seconds"], metrics["charts/update_seconds"] = t1 - t0, t2 - t1
                metrics["charts/action_std_mean"] = float(self.agent.actor_logstd.detach().exp().mean())
                metrics["losses/explained_variance"] = explained_variance(
                    batch.values["task"].numpy(), batch.returns["task"].numpy())
                metrics["charts/episodes"] = len(self.finished)
                if self.finished:
                    rets, lens = zip(*self.finished)
                    metrics["charts/episodic_return"] = float(np.mean(rets))
                    metrics["charts/episodic_length"] = float(np.mean(lens))
                    recent = (recent + list(rets))[-100:]
                if cfg.eval_every and (it % cfg.eval_every == 0 or it == cfg.num_iterations):
                    ev = self.evaluate()
                    metrics.update(ev)
                    eval_curve.append({"global_step": self.global_step, **ev})
                self.logger.log(self.global_step, metrics)
                if self.run_dir is not None and cfg.checkpoint_every and it % cfg.checkpoint_every == 0:
                    last_good.save(self.run_dir / "checkpoints" / "last.safetensors")
                bar.update(cfg.batch_size)
                post = {"SPS": f"{self.global_step / (time.perf_counter() - start):.0f}"}
                if recent:
                    post["return"] = f"{np.mean(recent):.1f}"
                if "eval/return_mean" in metrics:
                    post["eval"] = f"{metrics['eval/return_mean']:.1f}"
                bar.set_postfix(post, refresh=False)
                if on_iteration is not None:
                    on_iteration(self, metrics)
        except KeyboardInterrupt:
            interrupted = True
            if self.run_dir is not None:
                last_good.save(self.run_dir / "checkpoints" / "interrupted.safetensors")
        finally:
            bar.close()
            self.logger.close()
            self.envs.close()
        policy = last_good
        if self.run_dir is not None and not interrupted:
            policy.save(self.run_dir / "policy.safetensors")
        return TrainResult(policy=policy, eval_curve=eval_curve, metrics=self.logger.rows, interrupted=interrupted)

    def _check_finite(self, metrics: dict[str, float], last_good: Policy) -> None:
        bad = [k for k, v in metrics.items() if not math.isfinite(v)]
        if not bad and all(torch.isfinite(p).all() for p in self.agent.parameters()):
            return
        where = ""
        if self.run_dir is not None:
            path = last_good.save(self.run_dir / "checkpoints" / "last_good.safetensors")
            where = f"; the last good policy is saved at {path}"
        what = f"non-finite {', '.join(bad)}" if bad else "non-finite parameters"
        raise NpscoError(f"training diverged at iteration {self.iteration} ({what}){where}")


def train(cfg: PPOConfig, method: Method | None = None, run_dir: str | Path | None = None, progress: bool = True,
          tensorboard: bool = True, metadata: dict[str, Any] | None = None) -> TrainResult:
    """Train one policy (PPO, or PPO + a novelty method) and return its `TrainResult`."""
    return Trainer(cfg, method, run_dir, tensorboard, metadata).train(progress=progress)
