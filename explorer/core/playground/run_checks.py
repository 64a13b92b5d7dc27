"""The rules a run file's bytes and numbers keep (docs/RUN_FORMAT.md), apart from its
description's: the checksum over every byte, and each node's shape, kept tensor and
statistics against the node and the saved model. run_file.py reads and writes with them."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import numpy as np
import torch

from ..base.outputs import shown
from ..gpt.config import GPTConfig
from ..gpt.nodes import HistRange, Width
from ..run.stats import NodeStats

SCALARS = ("count", "mean", "std", "min", "max", "absmax", "rms", "kurtosis", "frac_neg",
           "frac_zero", "n_nan", "n_inf", "under", "over", "hist_lo", "hist_hi")

MAX_BINS = 10_000  # a histogram's bins (the explorer's own have at most a few hundred)
CHECKSUM = "checksum"  # the metadata key of the file's sha256 (docs/RUN_FORMAT.md)
UNCHECKED = ("saved without a checksum (an older file): a changed number inside it cannot "
             "be noticed")

class RunFileError(ValueError):
    """A run file that cannot be read: one line, naming the file."""

    def __init__(self, path, problem: str) -> None:
        super().__init__(shown(f"{path}: {problem}"))  # a line break in a name: escaped

# The file's sha256 is taken over every byte of it with the checksum's own 64 characters
# as zeros, then written there: a byte changed anywhere (the description, a statistic,
# a tensor, the header's padding) no longer matches.
PLACEHOLDER = "0" * 64
CHECKSUM_ENTRY = re.compile(rb'"' + CHECKSUM.encode() + rb'"\s*:\s*"')


def _checksum_at(raw: bytes | bytearray) -> int | None:
    """Where the checksum's 64 characters stand in the file's header (None: no checksum).
    In the header's JSON every quote inside a string is escaped, so an unescaped
    ``"checksum": "`` is the metadata entry itself, and once at most."""
    n = int.from_bytes(raw[:8], "little")
    found = list(CHECKSUM_ENTRY.finditer(bytes(raw[8:8 + n])))
    if len(found) > 1:
        raise ValueError("two checksums in the header")
    return 8 + found[0].end() if found else None


def _digest(raw: bytes | bytearray, at: int) -> str:
    digest = hashlib.sha256()
    digest.update(memoryview(raw)[:at])
    digest.update(PLACEHOLDER.encode())
    digest.update(memoryview(raw)[at + 64:])
    return digest.hexdigest()


def seal(path: Path) -> None:
    """Write the checksum of the run file at ``path`` as its bytes are now."""
    raw = bytearray(path.read_bytes())
    at = _checksum_at(raw)
    raw[at:at + 64] = _digest(raw, at).encode()
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(raw[at:at + 64])

PYTHON_WORDS = re.compile(r"'\w+' object|subscriptable|iterable|unhashable|positional|keyword"
                          r"|argument|fromhex|invalid literal")


def in_words(exc: Exception) -> str:
    """What a failure met while reading a run's description means for the file, in the
    file's words rather than Python's ('list' object has no attribute 'get')."""
    if isinstance(exc, KeyError):
        return f"its description lacks the field {shown(str(exc.args[0] if exc.args else ''))[:60]!r}"
    text = str(exc)
    if isinstance(exc, (AttributeError, IndexError)) or PYTHON_WORDS.search(text):
        return ("a field of its description is of the wrong kind (a list where an object "
                "belongs, text where a number does)")
    return text[:160]


def check_sum(path: Path, meta: dict) -> str:
    """Refuse a file whose bytes changed since it was saved; an older file without a
    checksum is read with a notice."""
    if CHECKSUM not in meta:
        return UNCHECKED
    raw = path.read_bytes()
    try:
        at = _checksum_at(raw)
    except ValueError:
        at = None
    if at is None or raw[at:at + 64].decode("ascii", "replace") != meta[CHECKSUM] or \
            _digest(raw, at) != meta[CHECKSUM]:
        raise RunFileError(path, "damaged: its bytes are not those it was saved with (the "
                                 "checksum does not match)")
    return ""

def check_shape(path: Path, what: str, node, shape: tuple, cfg: GPTConfig | None,
                 tokens: int, step: bool = False, read: int | None = None) -> None:
    """A node's shape is the one the saved model gives it for this pass's tokens: a
    prompt pass's keys are its tokens; a generated ``step`` is one query row (``tokens``
    1) against every key so far — the ``read`` tokens before and its own, or the last
    context's worth of them once they pass the context (the window slides)."""
    if cfg is None:
        if not 1 <= len(shape) <= 4:
            raise RunFileError(path, f"{what} has the shape {shape}, which no node has")
        return
    want = node.shape(cfg, 1, tokens)
    if node.width == Width.CTX and len(shape) == 4 and step:  # the keys: all so far
        keys = min(read, cfg.context_length) if read is not None else shape[3]
        want = want[:3] + (keys if tokens <= keys <= cfg.context_length else -1,)
    if shape != want:
        raise RunFileError(path, f"{what} has the shape {shape}; the saved model gives "
                                 f"{tuple(d if d >= 0 else 'T' for d in want)}")


def kept_tensor(path: Path, tensors: dict, key: str, shape: tuple | None) -> np.ndarray | None:
    t = tensors.get(key)
    if t is None or shape is None:
        return None
    if t.dtype != torch.float16 or tuple(t.shape) != shape:
        raise RunFileError(path, f"{key} must be float16 of shape {shape}")
    return t.float().numpy()


def node_stats(path: Path, tensors: dict, key: str, shape: tuple) -> NodeStats:
    scalars = tensors[f"{key}.scalars"]
    if scalars.dtype != torch.float64 or tuple(scalars.shape) != (len(SCALARS),):
        raise RunFileError(path, f"{key}.scalars must be {len(SCALARS)} float64 values")
    v = dict(zip(SCALARS, scalars.tolist()))
    hist = tensors[f"{key}.hist"].numpy()
    if hist.ndim != 1 or hist.dtype != np.int64 or not len(hist) or (hist < 0).any():
        raise RunFileError(path, f"{key}.hist must be counts")
    if not np.isfinite([v["hist_lo"], v["hist_hi"]]).all() or not v["hist_lo"] < v["hist_hi"]:
        raise RunFileError(path, f"{key}'s histogram range is not a range")
    if len(hist) > MAX_BINS:
        raise RunFileError(path, f"{key}.hist has {len(hist):,} bins; at most {MAX_BINS:,}")
    token_l2 = tensors[f"{key}.token_l2"].numpy()
    if token_l2.dtype != np.float32 or token_l2.size > int(np.prod(shape[:-1], dtype=np.int64)):
        raise RunFileError(path, f"{key}.token_l2 must be float32, one value a vector")
    counts = _counts(path, key, v, hist, int(np.prod(shape, dtype=np.int64)))
    _moments(path, key, v, counts)
    top_dims, top_values = tensors[f"{key}.top_dims"].numpy(), tensors[f"{key}.top_values"].numpy()
    width = shape[-1] if shape else 0
    if top_dims.ndim != 1 or top_dims.dtype != np.int64 or len(top_dims) > width or \
            ((top_dims < 0) | (top_dims >= width)).any() or len(set(top_dims.tolist())) != len(top_dims):
        raise RunFileError(path, f"{key}.top_dims must be distinct positions below {width:,} "
                                 "(the node's last axis)")
    if top_values.shape != top_dims.shape or top_values.dtype != np.float32:
        raise RunFileError(path, f"{key}.top_values must be float32, one per top dimension")
    return NodeStats(**counts, **{n: v[n] for n in ("mean", "std", "min", "max", "absmax", "rms",
                                                     "kurtosis", "frac_neg", "frac_zero")},
                     top_dims=top_dims, top_values=top_values, token_l2=token_l2,
                     hist=hist, hist_range=HistRange(v["hist_lo"], v["hist_hi"], len(hist)))


def _moments(path: Path, key: str, v: dict, counts: dict[str, int]) -> None:
    """Numbers that agree with each other: with finite values, min ≤ mean ≤ max, the
    spread and size never negative, the shares between 0 and 1."""
    if counts["count"] - counts["n_nan"] - counts["n_inf"] <= 0:
        return
    lo, hi, mean = v["min"], v["max"], v["mean"]
    slack = 1e-6 * max(abs(lo), abs(hi), 1.0)  # float32 sums: the mean a hair outside
    if not (lo <= hi and lo - slack <= mean <= hi + slack and v["std"] >= 0 and v["rms"] >= 0
            and v["absmax"] >= 0 and 0 <= v["frac_neg"] <= 1 and 0 <= v["frac_zero"] <= 1):
        raise RunFileError(path, f"{key}'s statistics contradict each other (min {lo:.4g}, "
                                 f"mean {mean:.4g}, max {hi:.4g}, std {v['std']:.4g})")


def _counts(path: Path, key: str, v: dict, hist: np.ndarray, size: int) -> dict[str, int]:
    """The counts: whole numbers, the values' count that of the node's shape, the NaNs,
    infinities and the histogram's values (with those outside it) none more than that."""
    counts = {}
    for name in ("count", "n_nan", "n_inf", "under", "over"):
        x = v[name]
        if not (math.isfinite(x) and x == int(x) and 0 <= x <= size):
            raise RunFileError(path, f"{key}'s {name} is {x!r}; a count from 0 to {size:,} (the "
                                     "node's values)")
        counts[name] = int(x)
    if counts["count"] != size:
        raise RunFileError(path, f"{key} counts {counts['count']:,} values; its node has {size:,}")
    counted = int(hist.sum()) + counts["under"] + counts["over"]
    if counts["n_nan"] + counts["n_inf"] > size or counted > size:
        raise RunFileError(path, f"{key}'s histogram and NaN / infinity counts add up to more "
                                 f"than its {size:,} values")
    return counts
