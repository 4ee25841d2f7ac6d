"""Reading a pickle without running code from it: only numpy arrays, plain containers and inert records.

Stable-Baselines3 saves its VecNormalize statistics with `pickle.dump(vec_normalize)`. Unpickling such a file with
`pickle.load` would import and call whatever the file names (a file can name `os.system`). `load_records` instead reads
it with an unpickler whose `find_class` admits:

- numpy's array, scalar and dtype reconstruction (arrays of numbers and booleans only, no object arrays);
- plain containers (`collections.OrderedDict`, `deque`), which Python builds itself;
- a fixed list of class and function names (`RECORD_NAMES`: SB3's VecNormalize and RunningMeanStd, Gymnasium/Gym Box
  spaces, numpy's random generators) that become `Record`s: inert objects that keep the arguments and state the file
  gives them, and run nothing.

Any other name is refused with `NpscoError`, before anything is called.
"""

from __future__ import annotations

import io
import pickle
from collections import OrderedDict, deque
from typing import Any

import numpy as np

from npsco.errors import NpscoError

RECORD_NAMES = {
    # Stable-Baselines3 (the modules moved between 1.x and 2.x: both spellings)
    "stable_baselines3.common.vec_env.vec_normalize.VecNormalize",
    "stable_baselines3.common.running_mean_std.RunningMeanStd",
    # the spaces VecNormalize keeps (Gymnasium, and Gym for SB3 1.x files)
    "gymnasium.spaces.box.Box",
    "gym.spaces.box.Box",
    # the random generators of those spaces
    "numpy.random._pickle.__generator_ctor",
    "numpy.random._pickle.__bit_generator_ctor",
    "numpy.random._pickle.__randomstate_ctor",
    "numpy.random._pcg64.PCG64",
    "numpy.random._mt19937.MT19937",
    "numpy.random.bit_generator.__pyx_unpickle_SeedSequence",
    "numpy.random.bit_generator.SeedSequence",
    "numpy.random._generator.Generator",
    "numpy.random.mtrand.RandomState",
    "numpy.random.__RandomState_ctor",
    "numpy.random.mtrand.__RandomState_ctor",  # numpy < 1.17 (old RL Zoo files)
}
"""Names read as inert `Record`s: their fields are data, their code is never imported."""


class Record:
    """An object of a class the file names, reduced to data: `name`, the constructor `args` and its `state`."""

    name = "?"

    def __init__(self, *args: Any):
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def field(self, key: str, default: Any = None) -> Any:
        """A field of the object's state (pickled objects keep theirs in a dict)."""
        return self.state.get(key, default) if isinstance(self.state, dict) else default

    def __repr__(self) -> str:
        return f"Record({self.name})"


def _record_class(name: str) -> type:
    return type("Record", (Record,), {"name": name})


def _reconstruct(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    if subtype is not np.ndarray:
        raise NpscoError(f"an array of type {subtype!r} (only numpy.ndarray is read)")
    return np.ndarray.__new__(np.ndarray, shape, dtype)


def _dtype(*args: Any) -> np.dtype:
    dtype = np.dtype(*args)
    if dtype.hasobject:
        raise NpscoError("an array of Python objects (only numbers are read)")
    return dtype


def _scalar(dtype: np.dtype, data: bytes = b"") -> Any:
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise NpscoError("a numpy scalar of Python objects (only numbers are read)")
    return np.frombuffer(data, dtype=dtype, count=1)[0]


def _frombuffer(buffer: Any, dtype: np.dtype, shape: Any, order: str) -> np.ndarray:
    if not isinstance(dtype, np.dtype) or dtype.hasobject:
        raise NpscoError("an array of Python objects (only numbers are read)")
    array = np.frombuffer(bytes(buffer), dtype=dtype)
    return array.reshape(shape, order="F" if order == "F" else "C").copy()


ALLOWED = {
    **{f"{m}.multiarray._reconstruct": _reconstruct for m in ("numpy.core", "numpy._core")},
    **{f"{m}.multiarray.scalar": _scalar for m in ("numpy.core", "numpy._core")},
    **{f"{m}.numeric._frombuffer": _frombuffer for m in ("numpy.core", "numpy._core")},
    "numpy.ndarray": np.ndarray,
    "numpy.dtype": _dtype,
    "collections.OrderedDict": OrderedDict,
    "collections.deque": deque,
}
"""The only callables the file may reach: numpy array reconstruction and plain containers."""


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data))
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        full = f"{module}.{name}"
        if full in ALLOWED:
            return ALLOWED[full]
        if full in RECORD_NAMES:
            return _record_class(full)
        raise NpscoError(
            f"{self.source}: refused to load {full} (only numpy arrays, plain containers and the fields "
            f"of SB3's normalisation statistics are read; nothing from the file is run)"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise NpscoError(f"{self.source}: refused a persistent reference (not a statistics pickle)")


def load_records(data: bytes, source: str) -> Any:
    """Unpickle `data` into numpy arrays, plain Python values and `Record`s; NpscoError for anything else.

    `source` names the file in messages."""
    try:
        return _Unpickler(data, source).load()
    except NpscoError as e:
        raise NpscoError(str(e) if str(e).startswith(source) else f"{source}: refused: {e}") from None
    except Exception as e:  # noqa: BLE001  (a damaged or foreign file is a refusal, not a crash)
        raise NpscoError(f"{source}: not a readable pickle ({type(e).__name__}: {str(e)[:120]})") from None
