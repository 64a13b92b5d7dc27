"""A saved run's file opened for editing as version 1 lays it out (each pass's ``nodes``
in the description, five tensors a node), and packed again into the current format: the
tests break one rule at a time in those terms, and the reader must find it in the packed
file."""

from __future__ import annotations

import json
import struct

import numpy as np
import torch

from explorer.core.playground.run_checks import SCALARS, seal
from explorer.core.playground.run_pack import COLUMNS, PACKED, RANK, unpack_pass

FIELDS = ("hist", "top_dims", "top_values", "token_l2")


def opened(raw: bytes) -> tuple[dict, dict, dict]:
    """The file's metadata, its description with every pass's nodes, and its tensors
    under version 1's names (copies, free to change)."""
    from safetensors.torch import load
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    run, packed, tensors = json.loads(meta["run"]), load(raw), {}
    for i, d in enumerate(run["passes"]):
        nodes, own = unpack_pass("edited", i, packed, run["node_names"], run["dtypes"])
        d["nodes"] = nodes
        if "ids" not in d:  # a step's ids, left out when they follow from the pass before
            d["ids"] = [*run["passes"][i - 1]["ids"], d["token_id"]]
        tensors.update({k: v.clone() for k, v in own.items()})
    del run["node_names"], run["dtypes"]
    return meta, run, tensors


def _row(values) -> list[int]:
    return [len(values), *list(values)[:RANK], *[0] * (RANK - len(values[:RANK]))]


def packed(run: dict, tensors: dict) -> tuple[dict, dict[str, torch.Tensor]]:
    """The description and tensors of ``opened`` in the current format."""
    run = json.loads(json.dumps(run))
    names, dtypes, out = {}, {}, {}
    for i, d in enumerate(run["passes"]):
        rows, parts = [], {k: [] for k in PACKED}
        for j, (name, shape, dtype, kept) in enumerate(d.pop("nodes", None) or []):
            key = f"p{i}.n{j}"
            got = {f: tensors.get(f"{key}.{f}", torch.zeros(0, dtype=PACKED[f])).reshape(-1)
                   for f in FIELDS}
            l2 = list(tensors.get(f"{key}.token_l2", torch.zeros(0)).shape)
            rows.append([names.setdefault(name, len(names)), dtypes.setdefault(dtype, len(dtypes)),
                         *_row(shape), *_row(kept or []), *_row(l2), len(got["hist"]),
                         len(got["top_dims"])])
            parts["scalars"].append(tensors.get(f"{key}.scalars", torch.zeros(len(SCALARS))))
            for f in FIELDS:
                parts[f].append(got[f])
            if f"{key}.tensor" in tensors:
                parts["tensors"].append(tensors[f"{key}.tensor"].reshape(-1))
        out[f"p{i}.nodes"] = torch.tensor(np.array(rows, np.int64).reshape(-1, len(COLUMNS)))
        for f, dtype in PACKED.items():
            joined = (torch.stack(parts[f]) if f == "scalars" else torch.cat(parts[f])) \
                if parts[f] else torch.zeros((0, len(SCALARS)) if f == "scalars" else 0)
            out[f"p{i}.{f}"] = joined if joined.dtype == dtype or f == "top_dims" and \
                joined.dtype.is_floating_point else joined.to(dtype)
        if f"p{i}.logits" in tensors:
            out[f"p{i}.logits"] = tensors[f"p{i}.logits"]
    run["node_names"], run["dtypes"] = list(names), list(dtypes)
    return run, out


def written(path, meta: dict, run: dict, tensors: dict) -> None:
    """``path`` holding ``run`` and ``tensors`` packed, its checksum written again when
    the metadata has one (as anyone can: it finds damage, it is not a signature)."""
    from safetensors.torch import save_file
    run, out = packed(run, tensors)
    save_file({k: v.contiguous() for k, v in out.items()}, str(path),
              metadata={**meta, "run": json.dumps(run)})
    if "checksum" in meta:
        seal(path)
