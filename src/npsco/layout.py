"""The names of the files a run directory holds, in one place (docs/configuration.md and docs/population.md describe
the layouts): every reader and writer takes the name from here."""

POLICY_FILE = "policy.safetensors"
"""A finished policy (`npsco.policy.Policy.save`): in an `npsco train` run and in each population member's folder."""
CONFIG_FILE = "config.json"
"""What a run was made with: an `npsco train` run's settings, a population's configuration, a member's record."""
MANIFEST_FILE = "manifest.json"
"""A population run's members and their status (`npsco.manifest`)."""
THRESHOLD_FILE = "threshold.json"
"""A population run's default threshold r0 and its distance matrix (`npsco.novelty.threshold`)."""
METRICS_FILE = "metrics.jsonl"
"""The per-iteration metrics of a training run (`npsco.logger`)."""
SWEEP_FILE = "sweep.json"
"""A sweep's populations and their status (`npsco.sweep`)."""
CHECKPOINTS_FOLDER = "checkpoints"
"""A training run's folder of the policies and state saved while it trains (the files below)."""
STATE_FILE = "state.safetensors"
"""In `CHECKPOINTS_FOLDER`: the resumable training state (`npsco.ppo.state`)."""
LAST_FILE = "last.safetensors"
"""In `CHECKPOINTS_FOLDER`: the policy in training, every `checkpoint_every` iterations."""
INTERRUPTED_FILE = "interrupted.safetensors"
"""In `CHECKPOINTS_FOLDER`: the policy in training when Ctrl-C or SIGTERM stopped the run."""
LAST_GOOD_FILE = "last_good.safetensors"
"""In `CHECKPOINTS_FOLDER`: the last finite policy of a run that diverged."""
TENSORBOARD_FOLDER = "tensorboard"
"""A training run's TensorBoard event files (`npsco.logger`)."""
EVALUATION_FOLDER = "evaluation"
"""`npsco evaluate`'s output inside the run it evaluates (`EVALUATION_FILE`, `EVALUATION_TABLE`)."""
EVALUATION_FILE = "evaluation.json"
"""An evaluation document (`npsco.evaluation.evaluate`): in a run's `EVALUATION_FOLDER` and in a report's folder."""
EVALUATION_TABLE = "evaluation.csv"
"""The evaluation's rows as a tidy table, beside `EVALUATION_FILE`."""
REFS_FOLDER = "refs"
"""A population run's references: reference i in `reference_path(i)`."""
NOVEL_FOLDER = "novel"
"""A population run's novel policies: novel policy k of a chain in `novel_path(chain, k)`."""


def reference_path(i: int) -> str:
    """Reference i's run directory, relative to the population directory: `refs/ref{i}`."""
    return f"{REFS_FOLDER}/ref{i}"


def novel_path(chain: str, k: int) -> str:
    """Novel policy k of the chain named `chain`, relative to the population directory: `novel/{chain}/k{k}`."""
    return f"{NOVEL_FOLDER}/{chain}/k{k}"


def candidate_path(slot: str, c: int) -> str:
    """Candidate c of the slot whose run directory is `slot`: the slot's own for c = 0, else `{slot}-c{c}`."""
    return slot if c == 0 else f"{slot}-c{c}"


REPORT_MARKER = ".npsco-report"
"""A report folder's mark (`npsco.report.build`): a re-run of `npsco report` may rewrite the folder that holds it."""
