"""The array a reader's own task runs on (``python -m helpers.bench --task ...``): a ``.npy`` file,
memory-mapped read-only here (its pages are read from the file, never copied into this process
first), or random data of a shape and dtype. ``describe_*`` read only the size, so that a size that
does not fit is refused before anything is loaded or made. Sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_SHAPE = "2097152"  # 16 MiB of float64
DEFAULT_DTYPE = "float64"


@dataclass(frozen=True)
class ArrayInput:
    """Where the array comes from: ``path`` (a .npy file) or ``shape`` and ``dtype`` (random data)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    path: Path | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def describe(self) -> str:
        where = str(self.path) if self.path else "random"
        return f"{where}: shape {self.shape}, dtype {self.dtype}"


def parse_shape(text: str) -> tuple[int, ...]:
    """'1000,1000' -> (1000, 1000); ValueError (one line) unless every part is a positive integer."""
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(","))
    except ValueError:
        raise ValueError(f"--shape takes positive integers separated by commas, got {text!r}") from None
    if not shape or min(shape) < 1:
        raise ValueError(f"--shape takes positive integers separated by commas, got {text!r}")
    return shape


def describe_random(shape_text: str | None, dtype_text: str | None) -> ArrayInput:
    """The random array ``--shape``/``--dtype`` ask for (numbers and booleans only); ValueError otherwise."""
    try:
        dtype = np.dtype(dtype_text or DEFAULT_DTYPE)
    except TypeError:
        raise ValueError(f"--dtype: {dtype_text!r} is not a NumPy dtype (e.g. float64, float32, "
                         "int16)") from None
    if dtype.kind not in "biufc":
        raise ValueError(f"--dtype {dtype}: random data is made for numbers and booleans only; save other "
                         "data as a .npy file and give it with --array")
    return ArrayInput(parse_shape(shape_text or DEFAULT_SHAPE), dtype)


def describe_file(path: Path) -> ArrayInput:
    """Shape and dtype of the .npy file at ``path``, from its header; ValueError (one line) otherwise."""
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(file)
    except OSError as error:
        raise ValueError(f"--array {path}: {error.strerror}") from None
    except ValueError as error:
        raise ValueError(f"--array {path} is not a .npy file ({error}); save it with np.save") from None
    return ArrayInput(tuple(shape), np.dtype(dtype), Path(path))


def make(source: ArrayInput, seed: int = 0) -> np.ndarray:
    """The array itself: the file memory-mapped read-only (an object array, which cannot be mapped, is
    loaded with its pickles: only load files you trust), or random data of the shape and dtype."""
    if source.path is not None:
        if source.dtype.hasobject:
            return np.load(source.path, allow_pickle=True)
        return np.load(source.path, mmap_mode="r")
    rng = np.random.default_rng(seed)
    kind = source.dtype.kind
    if kind == "b":
        return rng.random(source.shape) < 0.5
    if kind in "iu":
        return rng.integers(0, 100, source.shape, dtype=source.dtype)
    if kind == "c":
        return (rng.random(source.shape) + 1j * rng.random(source.shape)).astype(source.dtype)
    return rng.random(source.shape).astype(source.dtype, copy=False)
