"""Hugging Face's files: a folder's weights files (shards only inside the folder), and
safetensors, whose header is parsed and checked against the file's size before anything
is allocated. Every failure is a CheckpointError naming the file."""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import torch

from ..base.cancel import check
from ..base.devices import free_memory_bytes
from ..base.errors import CheckpointError
from ..base.validate import parse_json, read_json

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
                            "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
                "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
MAX_HEADER = 100 * 1024 * 1024
MAX_ELEMENTS = 2**63 - 1  # torch's sizes are 64-bit signed
SPARSE_FLOOR = 64 << 20  # declared data below this is read whatever the disk holds


def hf_folder_weights(folder: Path) -> list[Path]:
    """The weights files of a Hugging Face folder: its shards (each a plain file name,
    so inside the folder), model.safetensors or pytorch_model.bin; [] when none."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        data = read_json(index, "a shard index")
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(index, "unreadable shard index: it needs a \"weight_map\" "
                                         "object of tensor name -> shard file")
        shards = sorted({v for v in weight_map.values() if isinstance(v, str)})
        if len(shards) != len(set(map(str, weight_map.values()))):
            raise CheckpointError(index, "unreadable shard index: every shard must be a file name")
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
    checked entry by entry (types, known dtypes, shapes and offsets that agree, inside
    the file) before anything is allocated."""
    stat = path.stat()
    size = stat.st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise CheckpointError(path, "truncated safetensors file (no header)")
        (n,) = struct.unpack("<Q", raw)
        if n > min(size - 8, MAX_HEADER):
            raise CheckpointError(path, f"corrupt safetensors header: it declares {n:,} header "
                                        f"bytes but the file has {size:,} bytes")
        try:
            header = parse_json(fh.read(n), path, "a safetensors header")
        except CheckpointError as exc:
            raise CheckpointError(path, f"corrupt safetensors header ({exc.problem})") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "corrupt safetensors header (not a JSON object)")
    data_bytes = size - 8 - n
    _refuse_holes(path, getattr(stat, "st_blocks", 0) * 512, data_bytes)
    needed, spans = 0, []
    for key, info in header.items():
        if key == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise CheckpointError(path, "corrupt safetensors header: __metadata__ must map "
                                            "names to strings")
            continue
        start, end, count = _entry(path, key, info)
        expected = count * DTYPE_BYTES[info["dtype"]]
        if end - start != expected:
            raise CheckpointError(path, f"corrupt safetensors header: {key!r} declares "
                                        f"{end - start:,} bytes for shape {info['shape']} "
                                        f"{info['dtype']}")
        if end > data_bytes:
            raise CheckpointError(
                path, f"truncated safetensors file: tensor {key!r} ends at byte {end:,} but "
                      f"only {data_bytes:,} bytes of data are present (incomplete download?)")
        needed = max(needed, end)
        spans.append((start, end, key))
    at = 0
    for start, end, key in sorted(spans):
        if start != at:
            raise CheckpointError(path, f"corrupt safetensors header: {key!r} starts at byte "
                                        f"{start:,}, not where the tensor before it ends ({at:,})")
        at = end
    if at != data_bytes:
        raise CheckpointError(path, f"corrupt safetensors file: {data_bytes - at:,} bytes after "
                                    "the last tensor")
    return header, needed


def _refuse_holes(path: Path, on_disk: int, data_bytes: int) -> None:
    """A file whose length is mostly holes (a sparse file, ``truncate -s 4G``) would be
    read as gigabytes of zeros before its weights could be judged: refused from the
    bytes the file system stores for it, at once. A compressing file system stores
    weights in well over a sixteenth of their size; a system that reports no blocks is
    not judged."""
    if data_bytes > SPARSE_FLOOR and 0 < on_disk < data_bytes // 16:
        raise CheckpointError(path, f"declares {data_bytes / 1e9:,.1f} GB of weights but only "
                                    f"{on_disk:,} bytes of it are stored on disk (a sparse file: "
                                    "its weights would read as zeros)")


def _entry(path: Path, key: str, info: Any) -> tuple[int, int, int]:
    """(start, end, element count) of one header entry whose fields have the right types."""
    def bad(what: str) -> CheckpointError:
        return CheckpointError(path, f"corrupt safetensors header entry {key!r}: {what}")

    if not isinstance(info, dict):
        raise bad("not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise bad(f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or len(shape) > 8 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise bad(f"shape must be a list of whole numbers, got {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(
            isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
            and offsets[0] <= offsets[1]):
        raise bad(f"data_offsets must be [start, end] byte positions, got {offsets!r}")
    count = 1
    for d in shape:  # as the safetensors library multiplies: no step past 64 bits, zeros or not
        count *= d
        if d > MAX_ELEMENTS or count > MAX_ELEMENTS:
            raise bad(f"shape {shape!r} has more elements than a tensor can (over 2**63)"[:200])
    return offsets[0], offsets[1], count


READ_CHUNK = 64 << 20  # bytes read between two asks of Stop (~50 ms from a disk's cache)


def read_safetensors(path: Path, should_stop=None) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Every tensor, read into memory: tensors mapped from the file would die with
    SIGBUS when the file is truncated or re-saved in place while the model is loaded.

    The file is read with ``readinto`` (which releases the GIL) into one byte buffer,
    64 MiB at a time with ``should_stop`` asked between, and each tensor is a view of
    its bytes there: no copy is made while holding the GIL, so a window's thread keeps
    running while a snapshot loads (the safetensors library copies each tensor into
    Python bytes first, ~25 ms with the GIL held for 46 MB)."""
    header, _ = safetensors_header(path)
    meta = {str(k): str(v) for k, v in (header.get("__metadata__") or {}).items()}
    if sys.byteorder != "little":  # the file's bytes are little-endian
        return _read_swapped(path), meta
    size = path.stat().st_size
    free = free_memory_bytes(torch.device("cpu"))
    if free is not None and size > free:
        raise CheckpointError(path, f"needs {_sized(size)} of memory to load; {_sized(free)} "
                                    "are free")
    raw = torch.empty(size, dtype=torch.uint8)
    into = memoryview(raw.numpy())
    got = 0
    try:
        with open(path, "rb", buffering=0) as fh:
            while got < size:
                check(should_stop)
                n = fh.readinto(into[got:got + READ_CHUNK])
                if not n:
                    break
                got += n
    except OSError as exc:
        raise CheckpointError(path, f"could not be read ({exc.strerror or exc})") from None
    if got != size:
        raise CheckpointError(path, f"truncated safetensors file: {got:,} of {size:,} bytes read "
                                    "(was it changed while loading?)")
    (n,) = struct.unpack("<Q", raw[:8].numpy().tobytes())
    base, tensors = 8 + n, {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = TORCH_DTYPES[info["dtype"]]
        part = raw[base + start:base + end]
        if (base + start) % dtype.itemsize:  # unaligned: its own aligned copy
            part = part.clone()
        tensors[key] = part.view(dtype).view(info["shape"])
    return tensors, meta


def _sized(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _read_swapped(path: Path) -> dict[str, torch.Tensor]:
    """The safetensors library's reader, which converts the byte order."""
    from safetensors import SafetensorError
    from safetensors.torch import load
    try:
        return load(path.read_bytes())
    except (SafetensorError, OSError, RuntimeError, ValueError, TypeError) as exc:
        raise CheckpointError(path, f"corrupt safetensors file ({exc})") from None
