"""The trainer: one policy trained by PPO, plus the hooks of a method, on a vector env.

Each iteration runs three phases: `collect_rollout` (the policy acts in the envs; the hooks see each step as it
happens, `on_step`, and shape the rewards of the whole rollout once collected, `shape_rollout`),
`compute_advantages` (GAE per reward stream), and the update (`Hooks.update` with the `Learner`: PPO's
`ppo_update` by default). `train` runs the iterations and logs, evaluates and saves the policy. `state_dict` and
`load_state_dict` give and take everything a resumed run needs (`npsco.ppo.state` writes it to its file and reads it
back). The trainer knows hooks (a step shaper and an update rule), not methods; the pieces that stand alone live beside
it (`maths`, `rollout`, `learner`, `fast_update`, `hooks`, `state`).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from npsco.envs import state as env_state
from npsco.envs.make import check_task_spaces, final_observations, make_vector_env
from npsco.episodes import run_episodes
from npsco.errors import NpscoError
from npsco.forward import TANH, actor_means
from npsco.io import remove_inside
from npsco.layout import CHECKPOINTS_FOLDER, INTERRUPTED_FILE, LAST_FILE, LAST_GOOD_FILE, POLICY_FILE
from npsco.limits import check_network
from npsco.logger import MetricsLogger, Tracking
from npsco.paths import check_tree
from npsco.policy import Policy, mlp_forward, space_metadata
from npsco.ppo._rollout_kernels import record_ends, sample_action, tally
from npsco.ppo.agent import LOG_SQRT_2PI, ActorCritic
from npsco.ppo.config import PPOConfig
from npsco.ppo.hooks import Hooks, RolloutSteps, StepInfo, StepOutcome, TrainingSetup
from npsco.ppo.learner import Learner
from npsco.ppo.maths import compute_gae, explained_variance
from npsco.ppo.rollout import Batch, RewardScaler, RolloutBuffer
from npsco.ppo.state import AdamMoments, TrainingState, read_state, state_path, write_state
from npsco.seeds import training_evaluation_seed

NO_NORMALISATION = np.zeros((0, 0))
"""`actor_means`'s normaliser for observations the rollout has already normalised."""


@dataclass
class TrainResult:
    """What `Trainer.train` returns: the final policy, its evaluation curve and the per-iteration metrics."""

    policy: Policy
    """The policy after the last iteration (or the last good one, when interrupted)."""
    eval_curve: list[dict[str, float]]
    """One entry per periodic evaluation: `global_step` and the `eval/*` metrics."""
    metrics: list[dict[str, Any]]
    """The logged row of every iteration."""
    interrupted: bool = False
    """Training stopped on Ctrl-C."""


class Trainer:
    """One policy trained by PPO (plus a method's hooks) on a vector env."""

    def __init__(
        self,
        cfg: PPOConfig,
        hooks: Hooks | None = None,
        run_dir: str | Path | None = None,
        tensorboard: bool = True,
        metadata: dict[str, Any] | None = None,
        resume: bool = False,
        tracking: Tracking | None = None,
    ):
        """With `resume`, the state saved in `run_dir` (`npsco.ppo.state.state_path`) is loaded (`load_state_dict`)
        and training continues from it (a run directory without one starts from the beginning). With `tracking`, the
        metrics also go to W&B."""
        self.cfg = cfg.validate()
        self.hooks = hooks or Hooks()
        self.run_dir = Path(run_dir) if run_dir is not None else None
        if self.run_dir is not None:  # before anything there is read or written: no link below it (npsco.paths)
            check_tree(self.run_dir, known=True)
        self.extra_metadata = dict(metadata or {})
        torch.set_num_threads(cfg.torch_threads)
        torch.manual_seed(cfg.seed)  # the networks' initial weights
        self.rng = np.random.default_rng(cfg.seed)  # the rollout's action noise

        self.envs = make_vector_env(cfg.env_id, cfg.num_envs, cfg.env_backend, cfg.max_episode_steps)
        try:
            obs_space, act_space = check_task_spaces(
                cfg.env_id, self.envs.single_observation_space, self.envs.single_action_space
            )
        except NpscoError:
            self.envs.close()
            raise
        self.obs_space, self.action_space = obs_space, act_space
        self.act_low, self.act_high = act_space.low.astype(np.float32), act_space.high.astype(np.float32)
        self.bounds = np.stack([self.act_low, self.act_high])  # as `actor_means` reads them (unused: no squash)
        try:  # with the task's sizes (validate knew the hidden layers only), before the networks are allocated
            check_network("actor_hidden", cfg.actor_hidden, int(np.prod(obs_space.shape)), act_space.shape[0])
            check_network("critic_hidden", cfg.critic_hidden, int(np.prod(obs_space.shape)), 1)
        except NpscoError as e:
            self.envs.close()
            raise NpscoError(f"invalid configuration: {e}") from None
        self.agent = ActorCritic(
            int(np.prod(obs_space.shape)),
            act_space.shape[0],
            cfg.actor_hidden,
            cfg.critic_hidden,
            cfg.init_log_std,
            cfg.norm_obs,
            cfg.obs_clip,
        )
        self.streams = ("task", *self.hooks.streams)
        for s in self.hooks.streams:
            self.agent.add_critic(s)
        self.hooks.bind(
            TrainingSetup(
                env_id=cfg.env_id,
                num_envs=cfg.num_envs,
                num_iterations=cfg.num_iterations,
                num_steps=cfg.num_steps,
                observation_space=obs_space,
                action_space=act_space,
            )
        )
        self.learner = Learner(cfg, self.agent, self.streams)
        self.reward_scaler = RewardScaler(cfg.num_envs, cfg.gamma, cfg.reward_clip, cfg.scale_reward)
        self.global_step = 0
        self.iteration = 0
        self.next_obs, _ = self.envs.reset(seed=cfg.seed)
        self.next_obs = self.next_obs.astype(np.float32)
        self.episode_return = np.zeros(cfg.num_envs)
        self.episode_step = np.zeros(cfg.num_envs, np.int64)
        self.eval_curve: list[dict[str, float]] = []
        """One entry per periodic evaluation so far: `global_step` and the `eval/*` metrics."""
        self._settings_metadata: dict[str, Any] | None = None  # the checkpoints' metadata but `training`
        self.stop_requested = False
        """Set by SIGINT / SIGTERM during `train`: the run saves its state after the current iteration and stops."""
        self.resumed_rows: int | None = None
        """Rows of metrics.jsonl that the loaded state had seen (None: a fresh run)."""
        if resume and self.run_dir is not None and state_path(self.run_dir).exists():
            try:
                self._resume(state_path(self.run_dir))
            except BaseException:
                self.envs.close()
                raise
        tracked = None if tracking is None else {"ppo": cfg.to_dict(), "method": self.hooks.name}
        self.logger = MetricsLogger(self.run_dir, tensorboard, self.resumed_rows, tracking, tracked)

    # ------------------------------------------------------------------------------------------- resumable state
    def state_dict(self) -> TrainingState:
        """A copy of everything the next iteration depends on (between two iterations): `load_state_dict` of it
        on a fresh trainer of the same configuration and method continues as this one would."""
        agent, learner, scaler = self.agent, self.learner, self.reward_scaler
        adam = {}
        for name, p in agent.named_parameters():
            moments = learner.optimizer.state.get(p)
            if moments:
                adam[name] = AdamMoments(
                    float(moments["step"]), moments["exp_avg"].numpy().copy(), moments["exp_avg_sq"].numpy().copy()
                )
        return TrainingState(
            config=self.cfg.to_dict(),
            method=self.hooks.name,
            global_step=self.global_step,
            iteration=self.iteration,
            rng=dict(self.rng.bit_generator.state),
            agent={k: v.detach().numpy().copy() for k, v in agent.state_dict().items()},
            adam=adam,
            torch_rng=learner.torch_rng.get_state().numpy(),
            obs_rms_mean=agent.obs_rms.mean.copy(),
            obs_rms_var=agent.obs_rms.var.copy(),
            obs_rms_count=agent.obs_rms.count,
            reward_returns=scaler.returns.copy(),
            reward_stats=[scaler.mean, scaler.var, scaler.count],
            next_obs=self.next_obs.copy(),
            episode_return=self.episode_return.copy(),
            episode_step=self.episode_step.copy(),
            envs=env_state.capture(self.envs),
            eval_curve=[dict(e) for e in self.eval_curve],
            metrics_rows=len(self.logger.rows),
            hooks={k: v.copy() if isinstance(v, np.ndarray) else v for k, v in self.hooks.state().items()},
        )

    def load_state_dict(self, state: TrainingState) -> None:
        """Put this trainer, freshly built with the same configuration and method, in `state` (`state_dict`)."""
        if not self._is_own(state):
            raise NpscoError("the training state belongs to another configuration or method")
        agent, learner, scaler = self.agent, self.learner, self.reward_scaler
        with torch.no_grad():
            agent.load_state_dict({k: torch.from_numpy(v) for k, v in state.agent.items()})  # copied in
        for name, p in agent.named_parameters():
            if name in state.adam:
                moments = state.adam[name]
                learner.optimizer.state[p] = {
                    "step": torch.tensor(moments.step, dtype=torch.float32),
                    "exp_avg": torch.from_numpy(moments.exp_avg.copy()),
                    "exp_avg_sq": torch.from_numpy(moments.exp_avg_sq.copy()),
                }
        agent.obs_rms.mean, agent.obs_rms.var = state.obs_rms_mean.copy(), state.obs_rms_var.copy()
        agent.obs_rms.count = state.obs_rms_count
        scaler.returns = state.reward_returns.copy()
        scaler.mean, scaler.var, scaler.count = state.reward_stats
        learner.torch_rng.set_state(torch.from_numpy(state.torch_rng.copy()))
        self.rng.bit_generator.state = state.rng
        self.global_step, self.iteration = state.global_step, state.iteration
        self.eval_curve = [dict(e) for e in state.eval_curve]
        self.hooks.load_state({k: v.copy() if isinstance(v, np.ndarray) else v for k, v in state.hooks.items()})
        if state.envs is not None:
            env_state.restore(self.envs, state.envs)
            self.next_obs = state.next_obs.copy()
            self.episode_return = state.episode_return.copy()
            self.episode_step = state.episode_step.copy()
        else:  # the freshly reset envs' episodes start (not bitwise: see npsco.ppo.state)
            self.hooks.end_episodes(np.ones(self.cfg.num_envs, bool))
        self.resumed_rows = state.metrics_rows

    def _is_own(self, state: TrainingState) -> bool:
        """Whether `state` was saved by a trainer of this configuration (how often it saves aside) and method."""

        def same_run(config: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in config.items() if k != "state_every"}

        return same_run(state.config) == same_run(self.cfg.to_dict()) and state.method == self.hooks.name

    def _resume(self, path: Path) -> None:
        state = read_state(path)
        if not self._is_own(state):
            raise NpscoError(f"{path}: the saved state belongs to another configuration; delete it to start over")
        self.load_state_dict(state)

    # -------------------------------------------------------------------------------------------- phase 1: rollout
    def collect_rollout(self) -> RolloutBuffer:
        """Step the envs `num_steps` times with the current policy; returns the rollout's (T, N) arrays."""
        agent, T, N = self.agent, self.cfg.num_steps, self.cfg.num_envs
        buf = RolloutBuffer.empty(T, N, agent.obs_dim, agent.action_dim, self.streams)
        summary = buf.summary
        actor, log_std, critics = agent.numpy_views()
        std = np.exp(log_std)
        hooks = self.hooks
        on_step = hooks.on_step  # None for plain PPO: no StepInfo (nor clipped mean) to build every step
        shape = hooks.shape_rollout  # hooks that shape the rewards after the rollout, all at once
        steps = RolloutSteps.empty(T, N, agent.obs_dim, agent.action_dim) if shape is not None else None
        if steps is not None:
            steps.action_std[:] = std
        no_outcome = StepOutcome()
        act_low, act_high = self.act_low, self.act_high
        means = np.empty((T, N, agent.action_dim), np.float32)  # the policy's mean actions: log-probs after the loop
        # the rollout's action noise, drawn at once: the same numbers, in the same order, as one draw per step
        noise = self.rng.standard_normal((T, N, agent.action_dim), dtype=np.float32)
        env_actions = np.empty((T, N, agent.action_dim), np.float32)  # the actions clipped to the bounds
        # the actor's layers as the compiled forward pass reads them (W^T), once per rollout: the weights change only
        # in the update
        weights_t = tuple(np.ascontiguousarray(w.T) for w, _ in actor)
        biases = tuple(b for _, b in actor)
        for t in range(T):
            raw_obs, obs = self.next_obs, buf.obs[t]
            agent.obs_rms.observe(raw_obs, obs)  # the normaliser's update, then obs = the normalised raw_obs
            # the policy's mean action, compiled as `Policy.mean_action` computes it (row by row: the same bits as
            # the saved policy at these normalised observations), then the sampled action
            mean = means[t]
            actor_means(obs, NO_NORMALISATION, 0.0, weights_t, biases, TANH, self.bounds, False, False, mean)
            sample_action(mean, std, noise, act_low, act_high, t, means, buf.actions, env_actions)
            env_action = env_actions[t]
            next_obs, reward, terminated, truncated, infos = self.envs.step(env_action)
            next_obs = next_obs.astype(np.float32)
            reward = np.asarray(reward, np.float64)
            tally(reward, self.episode_return, self.episode_step)  # episode_step += 1, episode_return += reward

            out = no_outcome
            if on_step is not None:
                out = (
                    on_step(
                        StepInfo(
                            raw_obs,
                            np.minimum(np.maximum(mean, act_low), act_high),
                            env_action,
                            reward,
                            terminated,
                            truncated,
                            self.episode_step,
                            std,
                        )
                    )
                    or no_outcome
                )
            if out.terminate is not None and (forced := out.terminate & ~(terminated | truncated)).any():
                # IPD: end these episodes now, as a true termination (no bootstrap), and start new ones.
                reset_obs, _ = self.envs.reset(options={"reset_mask": forced})
                next_obs[forced] = reset_obs[forced]
                terminated = terminated | forced
                summary.forced_ends += int(forced.sum())
            done = buf.done[t]  # buf.terminated[t] = terminated, done = terminated | truncated
            any_truncated, any_done = record_ends(terminated, truncated, buf.terminated[t], done)

            if steps is None:
                train_reward = out.train_reward if out.train_reward is not None else reward
                self.reward_scaler(np.asarray(train_reward, np.float64), done, out=buf.rewards["task"][t])
                for s in hooks.streams:
                    buf.rewards[s][t] = out.streams[s]
            else:  # what shape_rollout sees of this step
                steps.obs[t], steps.action[t] = raw_obs, env_action
                steps.reward[t], steps.terminated[t], steps.done[t] = reward, terminated, done
                steps.episode_step[t] = self.episode_step

            if any_truncated:  # bootstrap from the value of the final observation on time-limit truncation
                fo = agent.obs_rms.normalize(final_observations(infos, truncated, next_obs)[truncated])
                for s in self.streams:
                    buf.next_values[s][t, truncated] = mlp_forward(critics[s], fo)[:, 0]
            if any_done:
                for i in np.flatnonzero(done):
                    summary.returns.append(float(self.episode_return[i]))
                    summary.lengths.append(int(self.episode_step[i]))
                hooks.end_episodes(done)
                self.episode_return[done] = 0.0
                self.episode_step[done] = 0
            self.next_obs = next_obs
            self.global_step += N

        # log pi(a_t | s_t), for all steps at once: element for element the arithmetic of one step, so the same bits
        buf.logprobs[:] = (-0.5 * ((buf.actions - means) / std) ** 2 - log_std - LOG_SQRT_2PI).sum(-1)
        # V(s_t) of every stream, for all steps in one batched call (the critics do not change during the rollout)
        states = buf.obs.reshape(T * N, -1)
        for s in self.streams:
            buf.values[s][:] = mlp_forward(critics[s], states)[:, 0].reshape(T, N)
        if steps is not None and shape is not None:
            np.minimum(np.maximum(means, act_low), act_high, out=steps.mean_action)  # clipped, all steps at once
            shaped = shape(steps)
            train = shaped.train_reward if shaped.train_reward is not None else steps.reward
            for t in range(T):  # the reward scaler's running statistics, step after step as above
                buf.rewards["task"][t] = self.reward_scaler(np.asarray(train[t], np.float64), buf.done[t])
            for s in hooks.streams:
                buf.rewards[s] = shaped.streams[s].astype(np.float32)
        last = agent.obs_rms.normalize(self.next_obs)  # V(s_{t+1}) for steps that did not end an episode
        for s in self.streams:
            following = np.concatenate([buf.values[s][1:], mlp_forward(critics[s], last)[:, 0][None]], axis=0)
            buf.next_values[s] = np.where(buf.done, buf.next_values[s], following)
        return buf

    # ---------------------------------------------------------------------------------------- phase 2: advantages
    def compute_advantages(self, buf: RolloutBuffer) -> Batch:
        """GAE per reward stream, then flatten the rollout into a `Batch`."""
        cfg = self.cfg
        adv, ret, val = {}, {}, {}
        for s in self.streams:
            a, r = compute_gae(
                buf.rewards[s], buf.values[s], buf.next_values[s], buf.terminated, buf.done, cfg.gamma, cfg.gae_lambda
            )
            adv[s], ret[s] = torch.from_numpy(a.reshape(-1)), torch.from_numpy(r.reshape(-1))
            val[s] = torch.from_numpy(buf.values[s].reshape(-1))
        n = cfg.batch_size
        return Batch(
            obs=torch.from_numpy(buf.obs.reshape(n, -1)),
            actions=torch.from_numpy(buf.actions.reshape(n, -1)),
            logprobs=torch.from_numpy(buf.logprobs.reshape(-1)),
            advantages=adv,
            returns=ret,
            values=val,
            size=n,
        )

    # -------------------------------------------------------------------------------------------------- the loop
    def policy(self) -> Policy:
        """A frozen snapshot of the current policy with its metadata."""
        if self._settings_metadata is None:  # the settings do not change during training: read them once
            self._settings_metadata = {
                "env_id": self.cfg.env_id,
                "observation_space": space_metadata(self.obs_space),
                "action_space": space_metadata(self.action_space),
                "method": self.hooks.name,
                "seed": self.cfg.seed,
                "config": self.cfg.to_dict(),
                "method_config": self.hooks.metadata(),
            }
        training = {"global_step": self.global_step, "iteration": self.iteration}
        return self.agent.to_policy(
            self.action_space, {**self._settings_metadata, "training": training, **self.extra_metadata}
        )

    def evaluate(self, episodes: int | None = None, policy: Policy | None = None) -> dict[str, float]:
        """Deterministic evaluation of the current policy (`policy`: its snapshot, when the caller has one) on fresh
        envs (seeds `training_evaluation_seed(iteration, episodes)` + i)."""
        n = episodes or self.cfg.eval_episodes
        res = run_episodes(
            policy or self.policy(),
            n,
            seed=training_evaluation_seed(self.iteration, n),
            max_episode_steps=self.cfg.max_episode_steps,
        )
        return {
            "eval/return_mean": float(res.returns.mean()),
            "eval/return_std": float(res.returns.std()),
            "eval/length_mean": float(res.lengths.mean()),
        }

    def train(self, progress: bool = True, on_iteration: Callable[[Trainer, dict], None] | None = None) -> TrainResult:
        """Run all iterations; saves the final policy to `run_dir/policy.safetensors` when a run dir is set.

        With a run dir, the resumable state (`npsco.ppo.state`) is saved every `state_every` seconds of wall time,
        between two iterations. Ctrl-C or SIGTERM stops after the current iteration, with its state saved and the
        policy in training in `run_dir/checkpoints/interrupted.safetensors` (a second Ctrl-C stops at once). A NaN or
        inf in the losses or parameters stops training with an NpscoError; the last good policy is saved to
        `run_dir/checkpoints/last_good.safetensors`.
        """
        cfg = self.cfg
        eval_curve = self.eval_curve
        bar = tqdm(
            total=cfg.policy_steps,
            initial=self.global_step,
            unit="step",
            disable=not progress,
            dynamic_ncols=True,
            desc=f"{self.hooks.name} {cfg.env_id} seed {cfg.seed}",
            leave=False,
        )
        last_good = self.policy()
        interrupted = False
        start, start_step = time.perf_counter(), self.global_step  # a resumed run's speed counts its own steps
        last_save = time.monotonic()
        recent: list[float] = []
        restore_signals = _stop_on_signals(self)
        try:
            for it in range(self.iteration + 1, cfg.num_iterations + 1):
                self.iteration = it
                if cfg.anneal_lr:
                    self.learner.learning_rate = cfg.learning_rate * (1.0 - (it - 1.0) / cfg.num_iterations)
                self.hooks.begin_iteration(it)
                t0 = time.perf_counter()
                buf = self.collect_rollout()
                batch = self.compute_advantages(buf)
                t1 = time.perf_counter()
                metrics = self.hooks.update(self.learner, batch)
                t2 = time.perf_counter()
                self._check_finite(metrics, last_good)
                policy = self.policy()

                metrics.update(self.hooks.iteration_metrics(buf.summary))
                metrics["charts/learning_rate"] = self.learner.learning_rate
                metrics["charts/SPS"] = cfg.batch_size / (t2 - t0)
                metrics["charts/rollout_seconds"], metrics["charts/update_seconds"] = t1 - t0, t2 - t1
                metrics["charts/action_std_mean"] = float(self.agent.actor_logstd.detach().exp().mean())
                metrics["losses/explained_variance"] = explained_variance(
                    batch.values["task"].numpy(), batch.returns["task"].numpy()
                )
                metrics["charts/episodes"] = buf.summary.episodes
                if buf.summary.episodes:
                    metrics["charts/episodic_return"] = float(np.mean(buf.summary.returns))
                    metrics["charts/episodic_length"] = float(np.mean(buf.summary.lengths))
                    recent = (recent + buf.summary.returns)[-100:]
                if cfg.eval_period and (it % cfg.eval_period == 0 or it == cfg.num_iterations):
                    ev = self.evaluate(policy=policy)
                    metrics.update(ev)
                    eval_curve.append({"global_step": self.global_step, **ev})
                self.logger.log(self.global_step, metrics)
                last_good = policy  # only now: a Ctrl-C never saves a policy that its metrics.jsonl does not reach
                if self.run_dir is not None and cfg.checkpoint_every and it % cfg.checkpoint_every == 0:
                    last_good.save(self.run_dir / CHECKPOINTS_FOLDER / LAST_FILE)
                bar.update(cfg.batch_size)
                post = {"SPS": f"{(self.global_step - start_step) / (time.perf_counter() - start):.0f}"}
                if recent:
                    post["return"] = f"{np.mean(recent):.1f}"
                if "eval/return_mean" in metrics:
                    post["eval"] = f"{metrics['eval/return_mean']:.1f}"
                bar.set_postfix(post, refresh=False)
                if on_iteration is not None:
                    on_iteration(self, metrics)
                if self.run_dir is not None and it < cfg.num_iterations:
                    due = time.monotonic() - last_save >= cfg.state_every
                    if due or self.stop_requested:
                        write_state(self.state_dict(), state_path(self.run_dir))
                        last_save = time.monotonic()
                if self.stop_requested and it < cfg.num_iterations:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            interrupted = True
            if self.run_dir is not None:
                last_good.save(self.run_dir / CHECKPOINTS_FOLDER / INTERRUPTED_FILE)
        finally:
            restore_signals()
            bar.close()
            self.logger.close()
            self.envs.close()
        policy = last_good
        if self.run_dir is not None and not interrupted:
            policy.save(self.run_dir / POLICY_FILE)
            for done_with in (state_path(self.run_dir), self.run_dir / CHECKPOINTS_FOLDER / INTERRUPTED_FILE):
                remove_inside(self.run_dir, done_with)  # the run is complete: nothing to resume
        return TrainResult(policy=policy, eval_curve=eval_curve, metrics=self.logger.rows, interrupted=interrupted)

    def _check_finite(self, metrics: dict[str, float], last_good: Policy) -> None:
        bad = [k for k, v in metrics.items() if not math.isfinite(v)]
        if not bad and all(torch.isfinite(p).all() for p in self.agent.parameters()):
            return
        where = ""
        if self.run_dir is not None:
            path = last_good.save(self.run_dir / CHECKPOINTS_FOLDER / LAST_GOOD_FILE)
            where = f"; the last good policy is saved at {path}"
        what = f"non-finite {', '.join(bad)}" if bad else "non-finite parameters"
        raise NpscoError(f"training diverged at iteration {self.iteration} ({what}){where}")


def _stop_on_signals(trainer: Trainer) -> Callable[[], None]:
    """Make SIGINT and SIGTERM request a stop after the current iteration (`Trainer.stop_requested`); a second
    SIGINT interrupts at once. Returns the function that puts the previous handlers back. Only the main thread can
    handle signals: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def request_stop(signum: int, frame: Any) -> None:
        if trainer.stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        trainer.stop_requested = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore
