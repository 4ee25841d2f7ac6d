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
        if n > 1:  # numpy's mean and var as they compute them, without their Python wrappers (this runs every step)
            bm = float(np.add.reduce(self.returns)) / n
            centred = self.returns - bm
            bv = float(np.add.reduce(centred * centred)) / n
        else:
            bm, bv = float(self.returns[0]), 0.0
        delta, total = bm - self.mean, self.count + n
        self.mean += delta * n / total
        self.var = (self.var * self.count + bv * n + delta**2 * self.count * n / total) / total
        self.count = total
        if done.any():
            self.returns[done] = 0.0
        scaled = rewards / math.sqrt(self.var + 1e-8)
        return np.minimum(np.maximum(scaled, -self.clip), self.clip).astype(np.float32)  # np.clip, minus its wrapper


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
        """Called after a step in which some episode ended (by the env or by `terminate`), with the (N,) mask of the
        envs whose episode ended."""

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
        torch.manual_seed(cfg.seed)  # the networks' initial weights
        self.rng = np.random.default_rng(cfg.seed)  # the rollout's action noise
        # the minibatch permutations: the trainer's own generator, so that whatever else draws from torch's global one
        # (the caller, another trainer in the same process) does not change this trainer's run
        self.torch_rng = torch.Generator().manual_seed(cfg.seed)

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
        method = self.method
        # plain PPO's hook does nothing: skip building its StepInfo (and the clipped mean) every step
        hooked = getattr(method.on_step, "__func__", None) is not Method.on_step
        no_outcome = StepOutcome()
        act_low, act_high = self.act_low, self.act_high
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

            env_action = np.minimum(np.maximum(action, act_low), act_high)  # np.clip, minus its Python wrapper
            next_obs, reward, terminated, truncated, infos = self.envs.step(env_action)
            next_obs = next_obs.astype(np.float32)
            reward = np.asarray(reward, np.float64)
            self.episode_step += 1
            self.episode_return += reward
            env_done = terminated | truncated

            out = no_outcome
            if hooked:
                out = method.on_step(StepInfo(raw_obs, np.minimum(np.maximum(mean, act_low), act_high), env_action,
                                              reward, terminated, truncated, self.episode_step)) or no_outcome
            if out.terminate is not None and (forced := out.terminate & ~env_done).any():
                # IPD: end these episodes now, as a true termination (no bootstrap), and start new ones.
                reset_obs, _ = self.envs.reset(options={"reset_mask": forced})
                next_obs[forced] = reset_obs[forced]
                terminated = terminated | forced
                self.forced_ends += int(forced.sum())
            done = terminated | truncated

            train_reward = out.train_reward if out.train_reward is not None else reward
            buf["rewards"]["task"][t] = self.reward_scaler(np.asarray(train_reward, np.float64), done)
            for s in method.streams:
                buf["rewards"][s][t] = out.streams[s]
            buf["terminated"][t], buf["done"][t] = terminated, done

            if truncated.any():  # bootstrap from the value of the final observation on time-limit truncation
                fo = agent.obs_rms.normalize(final_observations(infos, truncated, next_obs)[truncated])
                for s in self.streams:
                    buf["next_values"][s][t, truncated] = mlp_forward(critics[s], fo)[:, 0]
            any_done = done.any()
            if any_done:
                for i in np.flatnonzero(done):
                    self.finished.append((float(self.episode_return[i]), int(self.episode_step[i])))
                method.end_episodes(done)
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
        perm = torch.randperm(self.cfg.batch_size, generator=self.torch_rng)
        return perm.split(self.cfg.minibatch_size)

    def critic_loss(self, batch: Batch, mb: torch.Tensor, obs: torch.Tensor | None = None) -> torch.Tensor:
        """Sum over streams of the (clipped) value losses on minibatch `mb`."""
        obs = batch.obs[mb] if obs is None else obs
        return sum(
            value_loss(self.agent.value(obs, s), batch.values[s][mb], batch.returns[s][mb], self.cfg.clip_coef,
                       self.cfg.clip_vloss)
            for s in self.streams
        )

    fast_update: bool = True
    """Run `ppo_update` in numpy (`NumpyPPOUpdate`, ~4-5x less CPU time here) whenever the agent and optimiser are
    the standard ones; False always uses the torch loop (`ppo_update_torch`), the reference the numpy one is tested
    against."""

    def ppo_update(self, batch: Batch, advantage_stream: str = "task") -> dict[str, float]:
        """`update_epochs` passes of minibatch Adam steps on the clipped surrogate + value losses - entropy bonus.

        The same computation runs in numpy when it can (`fast_update`, see `NumpyPPOUpdate`): same minibatches (drawn
        with `minibatches()`), same losses, gradient clipping and Adam state (the optimiser's own, so methods that mix
        this with their own torch steps keep one Adam), equal to the torch loop up to float32 rounding.
        """
        if self.fast_update and NumpyPPOUpdate.unsupported(self) is None:
            return NumpyPPOUpdate(self).run(batch, advantage_stream)
        return self.ppo_update_torch(batch, advantage_stream)

    def ppo_update_torch(self, batch: Batch, advantage_stream: str = "task") -> dict[str, float]:
        """`ppo_update` with torch autograd and the torch optimiser (the reference implementation)."""
        cfg, agent = self.cfg, self.agent
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
        stats: list[torch.Tensor] = []  # one row per minibatch; no .item() sync per minibatch
        params = list(agent.parameters())
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
                nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
                self.optimizer.step()
                stats.append(torch.stack([pg_loss.detach(), v_loss.detach(), ent.detach(), info["approx_kl"],
                                          info["clipfrac"]]))
            if cfg.target_kl is not None and float(stats[-1][3]) > cfg.target_kl:
                break
        means = torch.stack(stats).double().mean(0).tolist()
        return {f"losses/{k}": float(v) for k, v in zip(names, means)}

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


# ------------------------------------------------------------------------------------------- the update in numpy
_BLAS_UNSET = object()
_blas_funcs: Any = _BLAS_UNSET


def _openblas_thread_functions() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the number of threads of the OpenBLAS that numpy uses, or None where it cannot be found.

    (threadpoolctl does the same; it is not a dependency of npsco.) Linux only: it finds the library in
    /proc/self/maps; elsewhere numpy's BLAS keeps its own threading.
    """
    global _blas_funcs
    if _blas_funcs is not _BLAS_UNSET:
        return _blas_funcs
    _blas_funcs = None
    try:
        import ctypes

        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line})
        for path in paths:
            lib = ctypes.CDLL(path)
            for prefix in ("scipy_", ""):
                for suffix in ("64_", "_64", ""):
                    get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                    set_ = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                    if get is not None and set_ is not None:
                        get.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
                        _blas_funcs = (get, set_)
                        return _blas_funcs
    except (OSError, AttributeError):
        pass
    return _blas_funcs


class _BlasThreads:
    """Context manager: numpy's OpenBLAS uses `n` threads inside, its previous setting after.

    Measured here (2 shared cores): at minibatch 256 OpenBLAS splits the update's matmuls over 2 spinning threads and
    the numpy update takes 20-30x more CPU time than with 1 thread (the same reason torch runs with 1 thread).
    """

    def __init__(self, n: int):
        self.n, self.funcs, self.old = n, _openblas_thread_functions(), None

    def __enter__(self) -> None:
        if self.funcs is not None:
            self.old = self.funcs[0]()
            if self.old != self.n:
                self.funcs[1](self.n)

    def __exit__(self, *exc) -> None:
        if self.funcs is not None and self.old is not None and self.old != self.n:
            self.funcs[1](self.old)


def _mlp_linears(module: nn.Module) -> list[nn.Linear] | None:
    """The Linear layers of a `policy.mlp` (Linear, Tanh, ..., Linear), or None for any other structure."""
    if not isinstance(module, nn.Sequential):
        return None
    layers = list(module)
    if not layers or len(layers) % 2 == 0:
        return None
    for i, m in enumerate(layers):
        if type(m) is not (nn.Linear if i % 2 == 0 else nn.Tanh):
            return None
    return layers[::2]


class NumpyPPOUpdate:
    """`Trainer.ppo_update` in numpy: the forward and backward passes of the actor and critic MLPs written out, the
    global gradient-norm clip and Adam on one flat float32 parameter vector.

    Why: on these machines the update of the small PPO networks is bound by per-operation overhead, not arithmetic;
    measured on Hopper (minibatch 64, 64x64 networks) torch needs ~4x-5x the CPU time of this numpy version (autograd
    graph, ~60 dispatched kernels and optimiser bookkeeping per minibatch).

    It computes what `Trainer.ppo_update_torch` computes, step for step: the same minibatches (from
    `trainer.minibatches()`, drawn from the trainer's own generator), advantage normalisation with the unbiased std,
    the clipped surrogate and the (clipped) value losses with torch's gradient conventions at the kinks
    (`torch.max` splits a tie's gradient in halves; `clamp` passes the gradient at the bounds), the entropy bonus,
    `clip_grad_norm_` (max_norm / (norm + 1e-6), only when below 1) and Adam as `torch.optim.Adam` (bias-corrected,
    eps added after the square root). The Adam moments and step counts are read from and written back to the
    trainer's torch optimiser, so a method mixing torch steps with `ppo_update` (TNB) keeps one consistent Adam.
    The differences are float32 rounding (summation order in the matmuls): tests/unit/test_fast_update.py checks
    the gradients and whole updates against the torch loop.

    Used when the agent is a standard `ActorCritic` (tanh MLPs built by `policy.mlp`), the parameters are float32 and
    the optimiser is a plain `torch.optim.Adam` with one parameter group (no weight decay, amsgrad, maximize);
    `unsupported` names the first condition that fails, and `ppo_update` then runs the torch loop.
    """

    @staticmethod
    def unsupported(trainer: "Trainer") -> str | None:
        agent, opt = trainer.agent, trainer.optimizer
        if not isinstance(agent, ActorCritic) or type(agent).evaluate is not ActorCritic.evaluate:
            return "the agent is not a standard ActorCritic"
        if type(trainer).critic_loss is not Trainer.critic_loss:
            return "critic_loss is overridden"
        nets = [agent.actor_mean, *(agent.critics[s] for s in trainer.streams)]
        if any(_mlp_linears(net) is None for net in nets):
            return "a network is not a tanh MLP"
        if type(opt) is not torch.optim.Adam or len(opt.param_groups) != 1:
            return "the optimiser is not torch.optim.Adam with one parameter group"
        group = opt.param_groups[0]
        if group["weight_decay"] or group["amsgrad"] or group["maximize"] or torch.is_tensor(group["lr"]):
            return "Adam options (weight decay, amsgrad, maximize, tensor lr) are not supported"
        in_group = {id(p) for p in group["params"]}
        if any(p.dtype != torch.float32 or id(p) not in in_group for p in agent.parameters()):
            return "parameters are not all float32 and in the optimiser"
        return None

    def __init__(self, trainer: "Trainer"):
        self.trainer, self.cfg, self.agent, self.optimizer = trainer, trainer.cfg, trainer.agent, trainer.optimizer
        agent = self.agent
        actor = _mlp_linears(agent.actor_mean)
        critics = {s: _mlp_linears(agent.critics[s]) for s in trainer.streams}
        # The parameters that get gradients: the actor, the log-std and the critics of the trained streams (a critic
        # outside the streams gets no gradient in the torch loop either, so Adam leaves it alone).
        self.params: list[nn.Parameter] = [t for lin in actor for t in (lin.weight, lin.bias)] + [agent.actor_logstd]
        for s in trainer.streams:
            self.params += [t for lin in critics[s] for t in (lin.weight, lin.bias)]
        sizes = [p.numel() for p in self.params]
        self.offsets = np.cumsum([0, *sizes])
        n = int(self.offsets[-1])
        self.flat = np.empty(n, np.float32)      # parameters
        self.grad = np.zeros(n, np.float32)
        self.exp_avg = np.empty(n, np.float32)
        self.exp_avg_sq = np.empty(n, np.float32)
        self.tmp = np.empty(n, np.float32)
        self.steps = np.empty(len(self.params), np.float64)
        views = [self._view(buf) for buf in (self.flat, self.grad)]
        k = 2 * len(actor)
        self.actor = list(zip(views[0][0:k:2], views[0][1:k:2]))
        self.actor_grad = list(zip(views[1][0:k:2], views[1][1:k:2]))
        self.log_std, self.log_std_grad = views[0][k], views[1][k]
        self.critics, self.critics_grad, start = {}, {}, k + 1
        for s in trainer.streams:
            end = start + 2 * len(critics[s])
            self.critics[s] = list(zip(views[0][start:end:2], views[0][start + 1:end:2]))
            self.critics_grad[s] = list(zip(views[1][start:end:2], views[1][start + 1:end:2]))
            start = end

    def _view(self, buf: np.ndarray) -> list[np.ndarray]:
        return [buf[a:b].reshape(p.shape) for p, a, b in zip(self.params, self.offsets[:-1], self.offsets[1:])]

    # ------------------------------------------------------------------------------------ moving state in and out
    def _load(self) -> None:
        group = self.optimizer.param_groups[0]
        for i, p in enumerate(self.params):
            a, b = self.offsets[i], self.offsets[i + 1]
            self.flat[a:b] = p.detach().numpy().reshape(-1)
            state = self.optimizer.state[p]
            if len(state) == 0:  # lazy initialisation, as torch.optim.Adam does it
                fused_or_capturable = group["fused"] or group["capturable"]
                state["step"] = (torch.zeros((), dtype=torch.float32) if fused_or_capturable
                                 else torch.tensor(0.0, dtype=torch.get_default_dtype()))
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            self.exp_avg[a:b] = state["exp_avg"].numpy().reshape(-1)
            self.exp_avg_sq[a:b] = state["exp_avg_sq"].numpy().reshape(-1)
            self.steps[i] = float(state["step"])

    def _store(self) -> None:
        with torch.no_grad():
            for i, p in enumerate(self.params):
                a, b = self.offsets[i], self.offsets[i + 1]
                p.copy_(torch.from_numpy(self.flat[a:b]).view_as(p))
                state = self.optimizer.state[p]
                state["exp_avg"].copy_(torch.from_numpy(self.exp_avg[a:b]).view_as(p))
                state["exp_avg_sq"].copy_(torch.from_numpy(self.exp_avg_sq[a:b]).view_as(p))
                state["step"].fill_(self.steps[i])
                p.grad = torch.from_numpy(self.grad[a:b].copy()).view_as(p)  # the last minibatch's, as torch leaves it

    # ------------------------------------------------------------------------------------------- the computation
    @staticmethod
    def _forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> list[np.ndarray]:
        """Activations [x, h1, ..., out] of a tanh MLP."""
        acts = [x]
        last = len(layers) - 1
        for i, (w, b) in enumerate(layers):
            x = np.matmul(x, w.T)
            x += b
            if i < last:
                np.tanh(x, out=x)
            acts.append(x)
        return acts

    @staticmethod
    def _backward(layers, grads, acts: list[np.ndarray], g: np.ndarray) -> None:
        """Write d loss / d (W, b) of every layer into `grads`, given g = d loss / d output."""
        for i in range(len(layers) - 1, -1, -1):
            gw, gb = grads[i]
            np.matmul(g.T, acts[i], out=gw)
            np.add.reduce(g, axis=0, out=gb)
            if i:
                g = np.matmul(g, layers[i][0])
                h = acts[i]
                g *= 1.0 - h * h

    def loss_and_grad(self, obs, actions, old_logprob, adv, values, returns) -> np.ndarray:
        """The PPO loss of one minibatch: writes its gradient into `self.grad`; returns the five statistics
        (policy loss, value loss, entropy, approx KL, clip fraction). `values`/`returns` map stream -> array."""
        cfg = self.cfg
        B = obs.shape[0]
        clip = cfg.clip_coef
        inv_b = np.float32(1.0 / B)
        add = np.add.reduce  # (ndarray.mean/std go through slow Python wrappers; these arrays are tiny)
        if cfg.norm_adv:  # torch's std is the unbiased one
            centred = adv - add(adv) * inv_b
            adv = centred / (np.sqrt(add(centred * centred) / np.float32(B - 1)) + np.float32(1e-8))
        # actor: log pi(a|s) and the clipped surrogate
        acts = self._forward(self.actor, obs)
        mean = acts[-1]
        log_std = self.log_std[0]
        inv_std = np.exp(-log_std)
        z = (actions - mean) * inv_std
        logprob = -0.5 * np.einsum("ba,ba->b", z, z) - (log_std.sum() + np.float32(LOG_SQRT_2PI * log_std.size))
        log_ratio = logprob - old_logprob
        ratio = np.exp(log_ratio)
        clipped = np.clip(ratio, 1 - clip, 1 + clip)
        unclipped_term, clipped_term = -adv * ratio, -adv * clipped
        pg_loss = add(np.maximum(unclipped_term, clipped_term)) * inv_b
        # d pg / d ratio: torch.max gives a tie half to each side, clamp passes the gradient inside [lo, hi]
        w_unclipped = np.where(unclipped_term > clipped_term, 1.0, np.where(unclipped_term == clipped_term, 0.5, 0.0))
        in_range = (ratio >= 1 - clip) & (ratio <= 1 + clip)
        g_ratio = (adv * -inv_b) * (w_unclipped + (1.0 - w_unclipped) * in_range)
        g_logprob = (g_ratio * ratio).astype(np.float32)
        g_mean = (g_logprob[:, None] * z) * inv_std
        entropy = (0.5 + LOG_SQRT_2PI + log_std).sum()
        self.log_std_grad[0] = add(g_logprob[:, None] * (z * z - 1.0), axis=0) - np.float32(cfg.ent_coef)
        self._backward(self.actor, self.actor_grad, acts, g_mean)
        # critics
        v_loss = 0.0
        for s, layers in self.critics.items():
            cacts = self._forward(layers, obs)
            v = cacts[-1][:, 0]
            err = v - returns[s]
            unclipped = err * err
            if cfg.clip_vloss:
                old = values[s]
                vc = old + np.clip(v - old, -clip, clip)
                cerr = vc - returns[s]
                clipped_sq = cerr * cerr
                v_loss += 0.5 * float(add(np.maximum(unclipped, clipped_sq))) / B
                w = np.where(unclipped > clipped_sq, 1.0, np.where(unclipped == clipped_sq, 0.5, 0.0))
                d = v - old
                g_v = w * err + (1.0 - w) * cerr * ((d >= -clip) & (d <= clip))
            else:
                v_loss += 0.5 * float(add(unclipped)) / B
                g_v = err
            g_v = (g_v * (cfg.vf_coef / B)).astype(np.float32)[:, None]
            self._backward(layers, self.critics_grad[s], cacts, g_v)
        approx_kl = add((ratio - 1) - log_ratio) * inv_b
        clipfrac = np.count_nonzero(np.abs(ratio - 1.0) > clip) / B
        return np.array([pg_loss, v_loss, entropy, approx_kl, clipfrac])

    def _clip_and_adam(self) -> None:
        cfg, g, tmp = self.cfg, self.grad, self.tmp
        group = self.optimizer.param_groups[0]
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], float(group["eps"])
        norm = math.sqrt(float(np.dot(g, g)))
        coef = cfg.max_grad_norm / (norm + 1e-6)
        if coef < 1.0:
            g *= np.float32(coef)
        # Adam (torch.optim.Adam, no weight decay): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
        # p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
        m, v = self.exp_avg, self.exp_avg_sq
        m *= np.float32(beta1)
        np.multiply(g, np.float32(1 - beta1), out=tmp)
        m += tmp
        v *= np.float32(beta2)
        np.multiply(g, g, out=tmp)
        tmp *= np.float32(1 - beta2)
        v += tmp
        self.steps += 1
        if np.all(self.steps == self.steps[0]):
            t = self.steps[0]
            step_size, bc2_sqrt = lr / (1 - beta1**t), math.sqrt(1 - beta2**t)
        else:  # parameters stepped a different number of times (a method stepped only some of them)
            counts = np.diff(self.offsets)
            step_size = np.repeat(lr / (1 - beta1**self.steps), counts).astype(np.float32)
            bc2_sqrt = np.repeat(np.sqrt(1 - beta2**self.steps), counts).astype(np.float32)
        np.sqrt(v, out=tmp)
        tmp /= bc2_sqrt if np.isscalar(bc2_sqrt) else bc2_sqrt
        tmp += np.float32(eps)
        np.divide(m, tmp, out=tmp)
        tmp *= np.float32(step_size) if np.isscalar(step_size) else step_size
        self.flat -= tmp

    def run(self, batch: Batch, advantage_stream: str = "task") -> dict[str, float]:
        with _BlasThreads(self.cfg.torch_threads):  # numpy's BLAS gets the thread count torch has
            return self._run(batch, advantage_stream)

    def _run(self, batch: Batch, advantage_stream: str) -> dict[str, float]:
        cfg, streams = self.cfg, self.trainer.streams
        self._load()
        obs, actions = batch.obs.detach().numpy(), batch.actions.detach().numpy()
        logprobs = batch.logprobs.detach().numpy()
        adv = batch.advantages[advantage_stream].detach().numpy()
        values = {s: batch.values[s].detach().numpy() for s in streams}
        returns = {s: batch.returns[s].detach().numpy() for s in streams}
        stats = []
        for _epoch in range(cfg.update_epochs):
            mbs = [mb.numpy() for mb in self.trainer.minibatches()]
            idx = np.concatenate(mbs)  # gather the epoch once, then take contiguous slices
            e_obs, e_act, e_lp, e_adv = obs[idx], actions[idx], logprobs[idx], adv[idx]
            e_val = {s: values[s][idx] for s in streams}
            e_ret = {s: returns[s][idx] for s in streams}
            start = 0
            for mb in mbs:
                sl = slice(start, start + len(mb))
                start += len(mb)
                stats.append(self.loss_and_grad(e_obs[sl], e_act[sl], e_lp[sl], e_adv[sl],
                                                {s: e_val[s][sl] for s in streams}, {s: e_ret[s][sl] for s in streams}))
                self._clip_and_adam()
            if cfg.target_kl is not None and stats[-1][3] > cfg.target_kl:
                break
        self._store()
        means = np.mean(stats, axis=0)
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
        return {f"losses/{k}": float(v) for k, v in zip(names, means)}


def train(cfg: PPOConfig, method: Method | None = None, run_dir: str | Path | None = None, progress: bool = True,
          tensorboard: bool = True, metadata: dict[str, Any] | None = None) -> TrainResult:
    """Train one policy (PPO, or PPO + a novelty method) and return its `TrainResult`."""
    return Trainer(cfg, method, run_dir, tensorboard, metadata).train(progress=progress)
