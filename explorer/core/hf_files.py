"""Hugging Face's files: a folder's weights files (shards only inside the folder), and
safetensors, whose header is parsed and checked against the file's size before anything
is allocated. Every failure is a CheckpointError naming the file."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import torch

from .errors import CheckpointError

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
                            "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 * 1024 * 1024


def hf_folder_weights(folder: Path) -> list[Path]:
    """The weights files of a Hugging Face folder: its shards (each a plain file name,
    so inside the folder), model.safetensors or pytorch_model.bin; [] when none."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise CheckpointError(index, f"unreadable shard index ({exc})") from None
        for shard in shards:
            if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
                raise CheckpointError(index, f"names {shard!r} as a shard; shards must be files "
                                             "in the same folder")
        return [folder / s for s in shards]
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return [folder / name]
    return []


def safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """The parsed header of a safetensors file and the byte count its tensors need,
    checked against the file size before anything is allocated."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise CheckpointError(path, "truncated safetensors file (no header)")
        (n,) = struct.unpack("<Q", raw)
        if n > min(size - 8, MAX_HEADER):
            raise CheckpointError(path, f"corrupt safetensors header: it declares {n:,} header "
                                        f"bytes but the file has {size:,} bytes")
        try:
            header = json.loads(fh.read(n))
        except (ValueError, UnicodeDecodeError):
            raise CheckpointError(path, "corrupt safetensors header (not valid JSON)") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "corrupt safetensors header (not a JSON object)")
    data_bytes = size - 8 - n
    needed = 0
    for key, info in header.items():
        if key == "__metadata__":
            continue
        try:
            start, end = info["data_offsets"]
            shape, dtype = info["shape"], info["dtype"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(path, f"corrupt safetensors header entry {key!r}") from None
        count = 1
        for d in shape:
            count *= int(d)
        expected = count * DTYPE_BYTES.get(dtype, 1)
        if end - start != expected:
            raise CheckpointError(path, f"corrupt safetensors header: {key!r} declares "
                                        f"{end - start:,} bytes for shape {shape} {dtype}")
        if end > data_bytes:
            raise CheckpointError(
                path, f"truncated safetensors file: tensor {key!r} ends at byte {end:,} but "
                      f"only {data_bytes:,} bytes of data are present (incomplete download?)")
        needed = max(needed, end)
    return header, needed


def read_safetensors(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    header, _ = safetensors_header(path)
    meta = header.get("__metadata__") or {}
    try:
        tensors = load_file(str(path), device="cpu")
    except (SafetensorError, OSError, RuntimeError, ValueError) as exc:
        raise CheckpointError(path, f"corrupt safetensors file ({exc})") from None
    return tensors, {str(k): str(v) for k, v in meta.items()}
