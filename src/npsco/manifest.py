"""What a population run directory records of its policies (`RUN/manifest.json`): one `Member` per policy, the novel
ones in `Chain`s, read back by training (resume), evaluation, the report and `npsco threshold`; and which population
run directories a sweep directory holds (`population_dirs`).

The manifest's format is unchanged by these types: a member is stored as its fields, its chain by name (`ipd`,
`ipd-r0x0.5`). Imports no torch, so that evaluation and the report read runs without the training code.

A member's run directory comes from its place in the layout (`layout_path`: `refs/ref{i}`, `novel/{chain}/k{k}`),
never from the file alone: a manifest whose recorded paths differ is refused (`check_layout`). The one exception is a
borrowed reference, trained in another run and only read from there (its SHA-256 checked at every load), where the
run's config.json says it borrows from (`borrowed_sources`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npsco.errors import NpscoError
from npsco.filecheck import MANIFEST, POPULATION_CONFIG, SWEEP, read_checked
from npsco.io import file_sha256
from npsco.layout import (
    CONFIG_FILE,
    MANIFEST_FILE,
    POLICY_FILE,
    REFS_FOLDER,
    SWEEP_FILE,
    candidate_path,
    novel_path,
    reference_path,
)
from npsco.paths import borrowed_folder, check_tree, readings, recorded_run, resolved
from npsco.seeds import candidate_seed

MANIFEST_FORMAT = "npsco-population"
DAMAGED = "the manifest was edited or damaged: restore it, or train the population again in another --out"
"""The end of every refusal of a manifest's member."""
CHAIN_SCALE_MARK = "-r0x"
"""Between a chain's method and its threshold multiple in its name: `ipd-r0x0.5`."""
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
"""What a chain's name (a folder name in `novel/`) may be."""


@dataclass(frozen=True)
class Chain:
    """A sequence of novel policies of one method at one threshold, each trained against the references and the
    chain's policies before it. `scale` is the threshold as a multiple of the default r0; None for a run's only chain
    when it needs no multiple in its name (plain PPO seeds, an absolute `--r0`, or the multiple 1 alone).

    The scale is kept as its name writes it (6 significant digits, `:g`), so that a chain read back from a manifest
    is the chain that was written, and its threshold the one it trained with."""

    method: str
    scale: float | None = None

    def __post_init__(self) -> None:
        if self.scale is not None:
            object.__setattr__(self, "scale", float(f"{float(self.scale):g}"))

    @property
    def name(self) -> str:
        """The chain's folder and manifest name: `ipd`, or `ipd-r0x0.5` with a scale."""
        return self.method if self.scale is None else f"{self.method}{CHAIN_SCALE_MARK}{self.scale:g}"

    @property
    def multiple(self) -> float:
        """The multiple of the default r0 the chain trains at (1 without a scale)."""
        return 1.0 if self.scale is None else self.scale

    @classmethod
    def parse(cls, name: str) -> Chain:
        """The chain named `name` (inverse of `name`); a name whose multiple does not read as a number is a chain of
        that whole name without a scale."""
        method, mark, scale = name.partition(CHAIN_SCALE_MARK)
        if mark:
            try:
                return cls(method, float(scale))
            except ValueError:
                pass
        return cls(name)

    def __str__(self) -> str:
        return self.name


@dataclass
class Candidate:
    """One candidate trained for a slot of a chain (`--candidates C`), as the manifest records it."""

    index: int
    """c: 0 is the slot's own seed and folder."""
    seed: int
    path: str
    """Its run directory, relative to the population directory: the slot's (`novel/CHAIN/kK`) for c = 0,
    `novel/CHAIN/kK-cC` for the others."""
    status: str = "pending"
    """`pending`, `training` or `done`."""
    final_eval: dict[str, Any] | None = None
    """Its deterministic evaluation after training (`npsco.evaluation.Episodes.summary()`)."""
    eval_curve: list[list[float]] = field(default_factory=list)
    wall_seconds: float | None = None
    nearest: float | None = None
    """Its distance to the nearest policy it had to avoid, on its final evaluation's states."""
    meets: bool | None = None
    """It meets the criteria (`npsco.selection.meets_criteria`)."""
    kept: bool = False
    """It is the slot's policy; the others are dropped (kept on disk, recorded here)."""

    @classmethod
    def of_slot(cls, member: Member, index: int) -> Candidate:
        """Candidate `index` of the slot `member` (before training)."""
        return cls(index=index, seed=candidate_seed(member.seed, index), path=candidate_path(member.path, index))


@dataclass
class Member:
    """One policy of a population, as recorded in the manifest."""

    name: str
    """`ref{i}` for a reference, `{chain}/k{k}` for the k-th novel policy of a chain."""
    role: str
    """`reference` or `novel`."""
    method: str
    seed: int
    path: str
    """Its run directory, relative to the population directory; a borrowed reference's is absolute, or relative to
    the population directory when its run lies beside this one (`npsco.paths.recorded`: a sweep's runs)."""
    chain: Chain | None = None
    """The novel policy's chain (None for references)."""
    index: int | None = None
    """k, the novel policy's place in its chain."""
    threshold: float | None = None
    """The novelty threshold it trained with (None for references and plain PPO seeds)."""
    references: list[str] = field(default_factory=list)
    """The names of the policies it was constrained to differ from."""
    status: str = "pending"
    """`pending`, `training` or `done`."""
    final_eval: dict[str, Any] | None = None
    """`npsco.evaluation.Episodes.summary()` of its deterministic evaluation after training."""
    eval_curve: list[list[float]] = field(default_factory=list)
    """[global step, evaluation return] at each evaluation during training."""
    wall_seconds: float | None = None
    sha256: str | None = None
    """Borrowed references: the checkpoint's hash when borrowed, checked at every load (`check_borrowed`)."""
    candidates: list[Candidate] = field(default_factory=list)
    """With `--candidates C` > 1: every candidate trained for this slot; the kept one's seed, path and evaluation are
    the member's own."""

    @property
    def checkpoint(self) -> str:
        """Its policy file, relative to the population directory (or absolute: a borrowed reference's, see `path`)."""
        return str(Path(self.path) / POLICY_FILE)

    def checkpoint_in(self, run: str | Path) -> Path:
        """Its policy file in the population directory `run`, resolved (`../ppo/refs/ref0` is found before `run`
        exists: `npsco.paths.resolved`)."""
        return resolved(self.path, run) / POLICY_FILE

    def to_dict(self) -> dict[str, Any]:
        """The manifest record (JSON-ready; the chain by name)."""
        record = dataclasses.asdict(self)
        record["chain"] = None if self.chain is None else self.chain.name
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Member:
        """Inverse of `to_dict`; keys this npsco does not know (a later version's) are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in record.items() if k in known}
        kwargs["chain"] = Chain.parse(kwargs["chain"]) if kwargs.get("chain") else None
        fields = {f.name for f in dataclasses.fields(Candidate)}
        kwargs["candidates"] = [
            Candidate(**{k: v for k, v in c.items() if k in fields}) for c in kwargs.get("candidates") or []
        ]
        return cls(**kwargs)


MAX_BORROWING = 16
"""How many runs deep references may be borrowed (a run borrowing from a run that borrowed them ...): a cycle of
hand-edited config.json files ends here."""


def load_manifest(run: str | Path, depth: int = 0) -> dict[str, Any]:
    """The manifest of a population run directory, every field type-checked (`npsco.filecheck.MANIFEST`) and its
    members where the layout puts them (`check_layout`), a borrowed reference where the run's config.json borrows it
    from (`borrowed_sources`); a one-line error if `run` is not one. The folder is checked first (`npsco.paths`): no
    symbolic link below it."""
    path = Path(run)
    if not path.is_dir():
        raise NpscoError(f"{run}: no such run directory")
    check_tree(path)
    if not (path / MANIFEST_FILE).exists():
        raise NpscoError(f"{run}: not a population run directory (no manifest.json)")
    manifest = read_checked(path / MANIFEST_FILE, MANIFEST)
    if manifest.get("format") != MANIFEST_FORMAT:
        raise NpscoError(f"{run}/manifest.json: not an npsco population manifest")
    members = read_members(manifest)
    check_layout(members, path / MANIFEST_FILE)
    if any(is_borrowed(m) for m in members):
        sources = borrowed_sources(path, depth)
        for m in members:
            if is_borrowed(m):
                try:
                    borrowed_folder(path, m.path, sources)
                except NpscoError as e:
                    raise NpscoError(f"{path / MANIFEST_FILE}: member {m.name!r}: {e}; {DAMAGED}") from None
    return manifest


def borrowed_sources(run: Path, depth: int = 0) -> list[Path]:
    """The folders (resolved) from which the population run `run` borrows its references, as its config.json says:
    those of the references of its `refs_from` run (read with `load_manifest`, so checked the same way), or its
    `ref_checkpoints` (a folder, or the folder of a file); [] when it borrows none (`npsco.paths.readings`)."""
    config = read_checked(run / CONFIG_FILE, POPULATION_CONFIG) if (run / CONFIG_FILE).exists() else {}
    if config.get("refs_from"):
        other = recorded_run(config["refs_from"], run)
        if depth >= MAX_BORROWING:
            raise NpscoError(f"{run}: its references are borrowed through more than {MAX_BORROWING} runs; refused")
        data = load_manifest(other, depth + 1)
        return [resolved(m.path, other) for m in read_members(data) if m.role == "reference"]
    folders = [p for given in config.get("ref_checkpoints") or [] for p in readings(given, run)]
    return [p.parent if p.suffix == ".safetensors" else p for p in folders]


def population_dirs(path: str | Path) -> list[Path]:
    """The population run directories under `path`: those of a sweep directory (`sweep.json`, in grid order, the
    ones that exist), or `path` itself when it is a population run directory. For `npsco report SWEEP_DIR`."""
    path = check_tree(path)
    if (path / SWEEP_FILE).exists():
        rows = read_checked(path / SWEEP_FILE, SWEEP).get("populations", [])
        for r in rows:
            if Path(r["path"]).is_absolute() or ".." in Path(r["path"]).parts:
                raise NpscoError(f"{path / SWEEP_FILE}: population path {r['path']!r} is not inside the sweep folder")
        return [path / r["path"] for r in rows if (path / r["path"] / MANIFEST_FILE).exists()]
    if (path / MANIFEST_FILE).exists():
        return [path]
    raise NpscoError(f"{path}: neither a sweep directory (sweep.json) nor a population run directory (manifest.json)")


def read_members(manifest: dict[str, Any]) -> list[Member]:
    """The members of a manifest, in its order."""
    return [Member.from_dict(m) for m in manifest.get("members", [])]


def layout_path(member: Member, candidate: int = 0) -> str:
    """Where the layout puts a member's run directory, relative to the population directory: `refs/ref{i}` for the
    reference named `ref{i}`, `novel/{chain}/k{k}` for the k-th novel policy of a chain, `novel/{chain}/k{k}-c{c}`
    for its candidate c > 0 (`Candidate.of_slot`). An NpscoError for a member that has no place in the layout (a
    name, chain or index no npsco writes)."""
    if candidate:
        return candidate_path(layout_path(member), candidate)
    if member.role == "reference":
        if not re.fullmatch(r"ref(0|[1-9][0-9]*)", member.name):
            raise NpscoError(f"reference {member.name!r}: a reference is named ref0, ref1, ...")
        return reference_path(int(member.name[len("ref") :]))
    chain, k = member.chain, member.index
    if k is None:  # a manifest without indices: k as its name says
        named = re.fullmatch(r".+/k(0|[1-9][0-9]*)", member.name)
        k = int(named.group(1)) if named else None
    if chain is None or k is None or k < 0 or not PLAIN_NAME.fullmatch(chain.name):
        raise NpscoError(f"novel policy {member.name!r}: its chain and index (k) must name a folder novel/CHAIN/kK")
    if member.name != f"{chain.name}/k{k}":
        raise NpscoError(f"novel policy {member.name!r}: chain {chain.name} and index {k} make it {chain.name}/k{k}")
    return novel_path(chain.name, k)


def is_borrowed(member: Member) -> bool:
    """Whether `member` is a reference trained in another run (`--refs-from`, `--ref-checkpoints`, a sweep's method
    run): recorded with that run's path, done, and only ever read."""
    return member.role == "reference" and (member.sha256 is not None or member.path != f"{REFS_FOLDER}/{member.name}")


def check_layout(members: list[Member], manifest: str | Path) -> None:
    """Refuse (one line naming the manifest and the member) a manifest whose members are not where the layout puts
    them (`layout_path`): the i-th reference is `ref{i}` in `refs/ref{i}`, unless it is borrowed (`is_borrowed`),
    which must then be done; a novel policy lies in `novel/{chain}/k{k}`, or in the folder of the candidate it kept,
    and each of its candidates in its own; no two members have one name."""
    seen: set[str] = set()
    refs = [m for m in members if m.role == "reference"]
    for m in members:
        try:
            if m.name in seen:
                raise NpscoError("listed twice")
            seen.add(m.name)
            expected = layout_path(m)
            if m.role == "reference" and m.name != f"ref{refs.index(m)}":
                raise NpscoError(f"the reference at place {refs.index(m)} must be named ref{refs.index(m)}")
            if is_borrowed(m):
                if m.status != "done":
                    raise NpscoError(
                        f"a borrowed reference (trained elsewhere, at {m.path!r}) is never trained here, but its "
                        f"status is {m.status!r}"
                    )
            elif m.path not in [expected] + [layout_path(m, c.index) for c in m.candidates if c.kept]:
                raise NpscoError(f"its path {m.path!r} is not where this run keeps it ({expected})")
            for c in m.candidates:
                if c.index < 0 or c.path != layout_path(m, c.index):
                    raise NpscoError(f"its candidate {c.index} is not where this run keeps it ({c.path!r})")
        except NpscoError as e:
            raise NpscoError(f"{manifest}: member {m.name!r}: {e}; {DAMAGED}") from None


def trained_references(run: str | Path) -> list[tuple[str, Path]]:
    """(name, checkpoint) of each trained reference of the population run `run` (a borrowed one checked first:
    `check_borrowed`)."""
    found = []
    for m in read_members(load_manifest(run)):
        if m.role == "reference" and m.status == "done":
            checkpoint = m.checkpoint_in(run)
            check_borrowed(m, checkpoint)
            found.append((m.name, checkpoint))
    return found


def policy_files(items: list[str]) -> tuple[list[Path], list[str]]:
    """The policies of `npsco threshold`'s arguments as (files, names): a checkpoint as given (named by its file or
    folder), a population run directory as its trained references (named as in the run)."""
    paths: list[Path] = []
    names: list[str] = []
    for item in items:
        p = Path(item)
        if (p / MANIFEST_FILE).exists():
            for name, checkpoint in trained_references(p):
                paths.append(checkpoint)
                names.append(name)
        else:
            paths.append(p)
            names.append(p.stem if p.suffix else p.name)
    return paths, names


def check_borrowed(member: Member, checkpoint: str | Path) -> None:
    """Refuse a borrowed reference whose checkpoint is gone or is no longer the file the run borrowed (its SHA-256
    differs): evaluation and resume would silently use another policy."""
    if member.sha256 is None:
        return
    if not Path(checkpoint).exists():
        raise NpscoError(f"borrowed reference {member.name}: {checkpoint} is gone")
    if file_sha256(checkpoint) != member.sha256:
        raise NpscoError(
            f"borrowed reference {member.name}: {checkpoint} changed since this run borrowed it (another "
            f"SHA-256); restore it, or train this population again in another --out"
        )
