"""A run file's passes packed (format version 2, docs/RUN_FORMAT.md): each pass's nodes
are rows of one table and their statistics and kept tensors one tensor per field, so the
file's header grows by a few entries a pass, not five a node — the longest run the window
makes (1,024 tokens on the largest model, attention opened) stays far under the header
limit the reader applies, and the writer checks that limit before it writes.

Read back, a pass is unpacked into the node list and the per-node tensors of version 1,
which run_file.py checks node by node as before."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from ..base.validate import MAX_JSON_BYTES
from .run_checks import SCALARS, RunFileError

MAX_HEADER_BYTES = MAX_JSON_BYTES  # the reader parses a header of at most this many bytes
RANK = 4  # a node's shape has 1 to 4 axes
# one row a node: its name and dtype (indices into the run's tables), its shape, the kept
# tensor's shape (rank 0: not kept), its vector norms' shape, and how many histogram bins
# and top dimensions it has in the pass's packed statistics
COLUMNS = ("name", "dtype", *(f"{a}{k}" if k >= 0 else f"{a}_rank"
                              for a in ("d", "k", "l") for k in range(-1, RANK)), "bins", "tops")
PACKED = {"scalars": torch.float64, "hist": torch.int64, "top_dims": torch.int64,
          "top_values": torch.float32, "token_l2": torch.float32, "tensors": torch.float16}
SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
                      torch.int64: "I64"}


def _padded(shape) -> list[int]:
    return [len(shape), *shape, *[0] * (RANK - len(shape))]


def pack_pass(i: int, p, names: dict[str, int], dtypes: dict[str, int],
              budget: int) -> tuple[dict[str, torch.Tensor], int]:
    """Pass ``i``'s tensors (``p{i}.nodes`` and one per field of PACKED) and the tensor
    budget left; ``names`` and ``dtypes`` grow with what the pass names first."""
    rows, parts = [], {k: [] for k in PACKED}
    for name, view in p.views.items():
        s = view.stats
        kept = ()
        if view.array is not None and view.array.size * 2 <= budget:
            parts["tensors"].append(view.array.astype(np.float16).reshape(-1))
            budget -= view.array.size * 2
            kept = view.array.shape  # a step keeps one position: (1, 1, C)
        parts["scalars"].append([float(getattr(s, n)) for n in SCALARS[:-2]]
                                + [s.hist_range.lo, s.hist_range.hi])
        parts["hist"].append(np.asarray(s.hist, np.int64))
        parts["top_dims"].append(np.asarray(s.top_dims, np.int64))
        parts["top_values"].append(np.asarray(s.top_values, np.float32))
        parts["token_l2"].append(np.asarray(s.token_l2, np.float32).reshape(-1))
        rows.append([names.setdefault(name, len(names)), dtypes.setdefault(view.dtype, len(dtypes)),
                     *_padded(view.shape), *_padded(kept), *_padded(np.shape(s.token_l2)),
                     len(s.hist), len(s.top_dims)])
    out = {f"p{i}.nodes": torch.tensor(np.array(rows, np.int64).reshape(-1, len(COLUMNS)))}
    for key, dtype in PACKED.items():
        if key == "scalars":
            array = np.array(parts[key], np.float64).reshape(-1, len(SCALARS))
        else:
            array = np.concatenate(parts[key]) if parts[key] else np.zeros(0)
        out[f"p{i}.{key}"] = torch.from_numpy(np.ascontiguousarray(array)).to(dtype)
    return out, budget


def header_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> int:
    """An upper bound on the safetensors header these make: its JSON with every offset as
    long as the largest and every character escaped as Python escapes it."""
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    header = {k: {"dtype": SAFETENSORS_DTYPES.get(t.dtype, "BOOL"), "shape": list(t.shape),
                  "data_offsets": [total, total]} for k, t in tensors.items()}
    header["__metadata__"] = metadata
    return len(json.dumps(header, separators=(",", ":"))) + 8  # and its padding


def check_header(path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Refuse, before anything is written, a run whose header the reader would refuse."""
    n = header_bytes(tensors, metadata)
    if n > MAX_HEADER_BYTES:
        raise RunFileError(path, f"not saved: this run's description takes {n:,} bytes, "
                                 f"over the {MAX_HEADER_BYTES:,} a run file's header may have "
                                 "(a shorter prompt or fewer interventions fit)")


def unpack_pass(path, i: int, tensors: dict, names: list[str], dtypes: list[str]
                ) -> tuple[list, dict[str, torch.Tensor]]:
    """Pass ``i``'s nodes as version 1 lists them (``[name, shape, dtype, kept]``) and
    its tensors under version 1's names (views of the packed ones)."""
    table = _tensor(path, tensors, f"p{i}.nodes", torch.int64)
    if table.dim() != 2 or table.shape[1] != len(COLUMNS):
        raise RunFileError(path, f"p{i}.nodes must be int64 rows of {len(COLUMNS)} columns")
    packed = {k: _tensor(path, tensors, f"p{i}.{k}", dtype) for k, dtype in PACKED.items()}
    rows = table.tolist()
    scalars = packed["scalars"]
    if tuple(scalars.shape) != (len(rows), len(SCALARS)):
        raise RunFileError(path, f"p{i}.scalars must be {len(SCALARS)} float64 values a node")
    where = dict.fromkeys(("hist", "top_dims", "top_values", "token_l2", "tensors"), 0)
    nodes, out = [], {}
    for j, row in enumerate(rows):
        (name_at, dtype_at), (bins, tops) = row[:2], row[-2:]
        shape, kept, l2 = (_shape(row[2 + k * (RANK + 1):2 + (k + 1) * (RANK + 1)])
                           for k in range(3))
        if not (0 <= name_at < len(names) and 0 <= dtype_at < len(dtypes) and shape
                and None not in (kept, l2) and min(bins, tops) >= 0):
            raise RunFileError(path, f"p{i}.nodes row {j} is not a node's row")
        name = names[name_at]
        if kept and (kept[-1] != shape[-1] or _size(kept) != _size(shape)):
            raise RunFileError(path, f"pass {i}'s {name[:60]} keeps a tensor of shape "
                                     f"{tuple(kept)}; its node's is {tuple(shape)}")
        nodes.append([name, shape, dtypes[dtype_at], kept or None])
        key = f"p{i}.n{j}"
        out[f"{key}.scalars"] = scalars[j]
        counts = {"hist": bins, "top_dims": tops, "top_values": tops, "token_l2": _size(l2),
                  "tensors": _size(kept) if kept else 0}
        for field, n in counts.items():
            part = packed[field][where[field]:where[field] + n]
            if len(part) != n:
                raise RunFileError(path, f"p{i}.{field} holds fewer values than its nodes' rows say")
            where[field] += n
            if field == "token_l2":
                out[f"{key}.token_l2"] = part.reshape(l2)
            elif field != "tensors":
                out[f"{key}.{field}"] = part
            elif kept:
                out[f"{key}.tensor"] = part.reshape(kept)
    if any(where[k] != len(packed[k]) for k in where):
        raise RunFileError(path, f"pass {i}'s packed tensors hold values no node's row names")
    if f"p{i}.logits" in tensors:
        out[f"p{i}.logits"] = tensors[f"p{i}.logits"]
    return nodes, out


def _shape(columns: list[int]) -> list[int] | None:
    """A shape from its row's columns (rank, then the lengths); None when they are not one."""
    rank, *lengths = columns
    if not 0 <= rank <= RANK or any(n < 0 for n in lengths) or any(lengths[rank:]):
        return None
    return lengths[:rank]


def _size(shape: list[int]) -> int:
    return math.prod(shape)  # Python's integers: no length can wrap it round


def _tensor(path, tensors: dict, key: str, dtype: torch.dtype) -> torch.Tensor:
    t = tensors.get(key)
    if t is None or t.dtype != dtype or (key.endswith(".nodes") and t.dim() != 2) or \
            (not key.endswith((".nodes", ".scalars")) and t.dim() != 1):
        raise RunFileError(path, f"{key} is missing or not {str(dtype).removeprefix('torch.')} "
                                 "of the format's shape")
    return t


def unknown_tensors(tensors: dict, passes: int) -> list[str]:
    """Tensors a version 2 file should not have (a pass it does not list, a field the
    format does not name)."""
    known = {f"p{i}.{k}" for i in range(passes) for k in ("nodes", "logits", *PACKED)}
    return sorted(set(tensors) - known)
