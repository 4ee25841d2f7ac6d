"""The sane maxima of what npsco reads and plans: file sizes, JSON/TOML nesting, and the counts a run allocates
memory or time for (policies, episodes, environments, steps; the seed's range is `PPOConfig.validate`'s). A value past
its limit is refused with a message that names the limit, before anything is read or allocated
(docs/reliability.md). Imports nothing from npsco but its error type, so that anything may import it."""

from __future__ import annotations

from collections.abc import Sequence

from npsco.errors import NpscoError

MAX_JSON_BYTES = 64 * 2**20
"""Any JSON file npsco reads, at most; each kind has its own limit below, at what that file can hold (parsing JSON
takes up to ~50 times the file's size in memory)."""
MAX_CONFIG_BYTES = 4 * 2**20
"""A config.json: the settings (a few KiB) and up to `MAX_POLICIES` reference checkpoint paths."""
MAX_MANIFEST_BYTES = 32 * 2**20
"""A manifest.json: up to `MAX_RUN_POLICIES` members of ~2 KiB each (their training curves included)."""
MAX_THRESHOLD_BYTES = 64 * 2**20
"""A threshold.json: the distance matrix between up to `MAX_POLICIES` references (~30 bytes a number)."""
MAX_EVALUATION_BYTES = 64 * 2**20
"""A run's evaluation/evaluation.json: a row per policy and the distance matrices between them."""
MAX_SWEEP_BYTES = 16 * 2**20
"""A sweep.json: a row of ~1 KiB per population of the grid."""
MAX_METRICS_BYTES = 256 * 2**20
"""A metrics.jsonl: a row of ~1.5 KiB per training iteration."""
MAX_CHECKPOINT_HEADER_BYTES = 1 * 2**20
"""The JSON header of a policy checkpoint, metadata included (npsco writes ~4 KiB)."""
MAX_TOML_BYTES = 4 * 2**20
"""A grid file: 4 MiB."""
MAX_CHECKPOINT_BYTES = 512 * 2**20
"""A policy checkpoint (`.safetensors`): 512 MiB (npsco's policies are about 25 KiB); every array it holds lies inside
the file, so this also bounds what loading one allocates."""
MAX_IMPORT_BYTES = 512 * 2**20
"""A file `npsco import` reads (an SB3 zip, a CleanRL checkpoint, VecNormalize or .npz statistics), and each member
of a zip archive, by its declared and its actual uncompressed size."""
MAX_NESTING = 64
"""Nesting depth of JSON and TOML documents (npsco writes at most 6)."""

MAX_POLICIES = 1000
"""References (`refs`) and novel policies per chain (`novel`) of a population."""
MAX_CHAINS = 100
"""Threshold multiples (chains) per method."""
MAX_CANDIDATES = 20
"""Candidates per novel slot (`candidates`; the IPD authors' code trained up to 15)."""
MAX_RUN_POLICIES = 10_000
"""Policies of one population run (references + chains x novel) and of one sweep's whole grid: each is a
training run of its own (10,000 of 1M steps is ~10^10 environment steps)."""
MAX_RECORDED_SEED = 2**31 - 1
"""A seed as the files record it (the configured seed plus a population's offsets; environments take int32 seeds)."""
MAX_EPISODES = 100_000
"""Episodes of one evaluation or threshold measurement (run side by side: one environment each)."""
MAX_ENVS = 4096
"""Environments stepped in parallel by one policy's training (`num_envs`)."""
MAX_ROLLOUT_STEPS = 1_000_000
"""Steps per environment per rollout (`num_steps`)."""
MAX_TIMESTEPS = 10**11
"""Environment steps of one policy's training (`steps`, `total_timesteps`)."""
MAX_EPISODE_STEPS = 10**7
"""An episode's time limit (`max_episode_steps`)."""
MAX_LAYER = 65_536
"""Width of a hidden layer (`actor_hidden`, `critic_hidden`); at most `MAX_LAYERS` of them."""
MAX_LAYERS = 64
MAX_NETWORK_PARAMETERS = 2**26
"""Parameters of one network (the actor, or one critic): 256 MiB as float32; training holds ~4 copies (the weights,
their gradient, Adam's two moments), ~1 GiB. npsco's default networks have ~5,000."""
MAX_FRAME_SIDE = 4096
"""A rendered frame's side in pixels (`npsco render --size`)."""
MAX_FRAMES = 2000
"""Frames of one `npsco render` (`--frames`)."""
MAX_RENDER_PIXELS = 2**29
"""Frames x side x side of one `npsco render`: ~1.5 GB of RGB frames held at once."""


def check_at_most(name: str, value: object, limit: int, least: int = 0) -> None:
    """Refuse a count `name` that is not a whole number in [least, limit], naming the limit."""
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
        raise NpscoError(f"{name} must be a whole number, got {value!r}")
    if value < least:
        raise NpscoError(f"{name} must be >= {least}, got {value}")
    if value > limit:
        raise NpscoError(f"{name} = {value:,.0f} is past npsco's limit of {limit:,} (docs/reliability.md)")


def network_parameters(inputs: int, hidden: Sequence[int], outputs: int) -> int:
    """The weights and biases of a fully connected network `inputs -> hidden... -> outputs`."""
    sizes = [inputs, *hidden, outputs]
    return sum((a + 1) * b for a, b in zip(sizes, sizes[1:], strict=False))


def check_network(name: str, hidden: Sequence[int], inputs: int = 1, outputs: int = 1) -> None:
    """Refuse hidden layers `hidden` (of the network `name`) whose parameters with `inputs` observations and `outputs`
    outputs (1 each where the task is not known yet) are past `MAX_NETWORK_PARAMETERS`, naming the memory."""
    count = network_parameters(inputs, hidden, outputs)
    if count > MAX_NETWORK_PARAMETERS:
        raise NpscoError(
            f"{name} {','.join(map(str, hidden))} makes a network of {count:,} parameters ({count * 4 / 2**30:.1f} "
            f"GiB as float32, ~4 times that to train), past npsco's limit of {MAX_NETWORK_PARAMETERS:,} parameters "
            "(docs/reliability.md)"
        )


def check_ppo_sizes(values: dict[str, object], where: str = "ppo") -> None:
    """The sizes among PPO settings (as `PPOConfig.to_dict` writes them) that allocate memory or time, against their
    limits; `where` prefixes the message."""
    limits = {
        "num_envs": MAX_ENVS,
        "num_steps": MAX_ROLLOUT_STEPS,
        "total_timesteps": MAX_TIMESTEPS,
        "eval_episodes": MAX_EPISODES,
    }
    try:
        for key, limit in limits.items():
            if key in values:
                check_at_most(f"{where}.{key}", values[key], limit)
        if values.get("max_episode_steps") is not None:
            check_at_most(f"{where}.max_episode_steps", values["max_episode_steps"], MAX_EPISODE_STEPS)
        for key in ("actor_hidden", "critic_hidden"):
            layers = values.get(key)
            if isinstance(layers, (list, tuple)):
                check_at_most(f"{where}.{key} (layers)", len(layers), MAX_LAYERS)
                for width in layers:
                    check_at_most(f"{where}.{key} (width)", width, MAX_LAYER, least=1)
                check_network(f"{where}.{key}", [int(w) for w in layers])
    except NpscoError as e:
        raise NpscoError(f"invalid configuration: {e}") from None
