"""TensorFlow's checkpoint format (a "tensor bundle", V2), read without TensorFlow.

OpenAI published GPT-2 as a TensorFlow 1 checkpoint: ``model.ckpt.index`` lists every
variable (dtype, shape, shard, offset, size, CRC32C) and ``model.ckpt.data-00000-of-00001``
holds the raw little-endian bytes. The index is a LevelDB-style sorted table whose values
are protocol buffers (``BundleHeaderProto`` under the empty key, ``BundleEntryProto`` for
each variable). This module reads just that: a table of fixed-size blocks, a few varints
and the CRC32C TensorFlow stores, and nothing in the files is executed.

Every size and offset in the index is checked against the files before anything is
allocated; checksums are verified. The cost is bounded by the index's size: each block is
read and checksummed once (vectorised CRC32C), keys and entries have limits no real
bundle comes near, and a file that is not a regular file (a FIFO would block the read)
is refused before it is opened. Failures are ``BundleError`` with the file and the
problem. GPT-2 names and shapes are not this module's business (see tf_checkpoint.py).
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base.cancel import check
from .crc32c import crc32c, unmask
from ..base.validate import FileKind, file_kind

TABLE_MAGIC = 0xDB4775248B80FB57  # LevelDB's table magic, as TensorFlow writes it
FOOTER_BYTES = 48
BLOCK_TRAILER_BYTES = 5  # compression type + masked CRC32C
MAX_INDEX_BYTES = 64 * 1024 * 1024  # GPT-2 XL's index is ~40 KB
MAX_KEY_BYTES = 4096  # a variable's name; GPT-2's longest is 24 bytes
MAX_ENTRIES = 100_000  # GPT-2 XL with its optimizer state has about 2,000

# TensorFlow's DataType enum: the floating-point ones a model's weights can have.
DTYPES = {1: (torch.float32, "<f4"), 2: (torch.float64, "<f8"), 19: (torch.float16, "<f2"),
          14: (torch.bfloat16, None)}
DTYPE_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
               7: "string", 9: "int64", 10: "bool", 14: "bfloat16", 19: "float16"}


class BundleError(ValueError):
    """A file of the bundle that cannot be used; the message names it and the problem."""

    def __init__(self, path: str | os.PathLike, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# --------------------------------------------------------------------------- protobuf

def _varint(buf: bytes, pos: int, path, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise BundleError(path, f"not a TensorFlow tensor bundle index (bad varint in {what})")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, path, what: str) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protocol buffer message: ints for varint and fixed
    fields, bytes for length-delimited ones."""
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, path, what)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, path, what)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise BundleError(path, f"not a TensorFlow tensor bundle index (cut {what})")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos, path, what)
            if pos + length > len(buf):
                raise BundleError(path, f"not a TensorFlow tensor bundle index (cut {what})")
            value = bytes(buf[pos:pos + length])
            pos += length
        elif wire == 5:
            if pos + 4 > len(buf):
                raise BundleError(path, f"not a TensorFlow tensor bundle index (cut {what})")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise BundleError(path, f"not a TensorFlow tensor bundle index (wire type {wire} "
                                    f"in {what})")
        out.append((number, value))
    return out


@dataclass(frozen=True)
class BundleEntry:
    """Where one variable's bytes are and what they hold."""

    name: str
    dtype: int  # TensorFlow's DataType number
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int | None  # masked, as stored

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype, f"DataType {self.dtype}")


def _entry(name: str, value: bytes, path) -> BundleEntry:
    dtype = shard = offset = size = 0
    crc = None
    shape: list[int] = []
    for number, v in _fields(value, path, f"the entry of {name!r}"):
        if number == 1:
            dtype = int(v)
        elif number == 2 and isinstance(v, bytes):
            for sub, dim in _fields(v, path, f"the shape of {name!r}"):
                if sub == 2 and isinstance(dim, bytes):
                    size_field = [d for n, d in _fields(dim, path, f"the shape of {name!r}") if n == 1]
                    d = int(size_field[0]) if size_field else 0
                    if d >= 1 << 63:  # a negative int64: an unknown dimension
                        raise BundleError(path, f"{name!r} has an unknown dimension")
                    shape.append(d)
                elif sub == 3 and dim:
                    raise BundleError(path, f"{name!r} has an unknown rank")
        elif number == 3:
            shard = int(v)
        elif number == 4:
            offset = int(v)
        elif number == 5:
            size = int(v)
        elif number == 6:
            crc = int(v)
        elif number == 7:
            raise BundleError(path, f"{name!r} is saved in slices (a partitioned variable); "
                                    "only whole tensors are read")
    return BundleEntry(name, dtype, tuple(shape), shard, offset, size, crc)


# --------------------------------------------------------------------------- the table

def _block(data: bytes, offset: int, size: int, path, what: str) -> bytes:
    end = offset + size + BLOCK_TRAILER_BYTES
    if offset < 0 or size < 4 or end > len(data):
        raise BundleError(path, f"not a TensorFlow tensor bundle index ({what} lies outside "
                                f"the file's {len(data):,} bytes)")
    contents = data[offset:offset + size]
    kind = data[offset + size]
    stored = struct.unpack_from("<I", data, offset + size + 1)[0]
    # the stored CRC covers the contents and the compression byte, which follow each other
    if crc32c(memoryview(data)[offset:offset + size + 1]) != unmask(stored):
        raise BundleError(path, f"corrupt tensor bundle index: {what} fails its checksum")
    if kind != 0:
        raise BundleError(path, f"the index's {what} is compressed (type {kind}); TensorFlow "
                                "writes bundle indexes uncompressed, so this file is not one")
    return contents


def _block_entries(block: bytes, path, what: str) -> list[tuple[bytes, bytes]]:
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    limit = len(block) - 4 - 4 * restarts
    if restarts == 0 or limit < 0:
        raise BundleError(path, f"not a TensorFlow tensor bundle index (bad {what})")
    out = []
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos, path, what)
        unshared, pos = _varint(block, pos, path, what)
        length, pos = _varint(block, pos, path, what)
        if shared > len(key) or pos + unshared + length > limit:
            raise BundleError(path, f"not a TensorFlow tensor bundle index (bad {what})")
        if shared + unshared > MAX_KEY_BYTES:
            raise BundleError(path, f"not a TensorFlow tensor bundle index (a key of "
                                    f"{shared + unshared:,} bytes in {what}; variable names "
                                    f"are at most {MAX_KEY_BYTES:,})")
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        out.append((key, block[pos:pos + length]))
        pos += length
    return out


def _handle(buf: bytes, pos: int, path) -> tuple[int, int, int]:
    offset, pos = _varint(buf, pos, path, "the footer")
    size, pos = _varint(buf, pos, path, "the footer")
    return offset, size, pos


@dataclass
class TensorBundle:
    """The variables of a checkpoint prefix (``…/model.ckpt``) and how to read them."""

    prefix: Path
    entries: dict[str, BundleEntry]
    num_shards: int
    big_endian: bool
    index_sha256: str = ""  # of the index's bytes: what a verified-checksum record is tied to

    @property
    def index_path(self) -> Path:
        return self.prefix.with_name(self.prefix.name + ".index")

    def data_path(self, shard: int) -> Path:
        return self.prefix.with_name(f"{self.prefix.name}.data-{shard:05d}-of-{self.num_shards:05d}")

    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries.values())

    def check_files(self) -> None:
        """Every entry's bytes lie inside its data file, and sizes fit dtype x shape."""
        sizes: dict[int, int] = {}
        for e in self.entries.values():
            if e.dtype not in DTYPES:
                continue  # refused when read; not every variable is a weight
            if not 0 <= e.shard < self.num_shards:
                raise BundleError(self.index_path, f"{e.name!r} names shard {e.shard} of "
                                                   f"{self.num_shards}")
            count = 1
            for d in e.shape:
                count *= d
            itemsize = torch.tensor([], dtype=DTYPES[e.dtype][0]).element_size()
            if count * itemsize != e.size:
                raise BundleError(self.index_path, f"{e.name!r} declares {e.size:,} bytes for "
                                                   f"shape {list(e.shape)} {e.dtype_name}")
            if e.shard not in sizes:
                data = self.data_path(e.shard)
                kind = file_kind(data)
                if kind not in (FileKind.FILE, FileKind.MISSING):
                    raise BundleError(data, f"{kind}, not a regular file: it is not read")
                try:
                    sizes[e.shard] = data.stat().st_size
                except FileNotFoundError:
                    raise BundleError(data, "the data file of this checkpoint is missing "
                                            f"(its index is {self.index_path.name})") from None
                except OSError as exc:
                    raise BundleError(data, f"cannot be read ({exc.strerror or exc})") from None
            if e.offset + e.size > sizes[e.shard]:
                raise BundleError(self.data_path(e.shard),
                                  f"truncated: {e.name!r} ends at byte {e.offset + e.size:,} but "
                                  f"the file has {sizes[e.shard]:,} bytes (incomplete download?)")

    def read(self, name: str, should_stop=None, verify: bool = True) -> torch.Tensor:
        """One variable as a CPU tensor, its bytes checked against the stored CRC32C."""
        e = self.entries[name]
        if e.dtype not in DTYPES:
            raise BundleError(self.index_path, f"{name!r} holds {e.dtype_name} values; "
                                               "weights must be floating point")
        torch_dtype, np_dtype = DTYPES[e.dtype]
        raw = bytearray(e.size)
        path = self.data_path(e.shard)
        try:
            with open(path, "rb") as fh:
                fh.seek(e.offset)
                got = fh.readinto(raw)
        except OSError as exc:
            raise BundleError(path, f"cannot be read ({exc.strerror or exc})") from None
        if got != e.size:
            raise BundleError(path, f"truncated: {name!r} needs {e.size:,} bytes at offset "
                                    f"{e.offset:,}, only {got:,} are there")
        if verify and e.crc32c is not None and crc32c(raw, should_stop) != unmask(e.crc32c):
            raise BundleError(path, f"corrupt: the bytes of {name!r} do not match their "
                                    "checksum in the index (a damaged download?)")
        if torch_dtype == torch.bfloat16:
            words = np.frombuffer(raw, dtype=">u2" if self.big_endian else "<u2").astype(np.int16)
            return torch.from_numpy(words.copy()).view(torch.bfloat16).reshape(e.shape)
        array = np.frombuffer(raw, dtype=np_dtype.replace("<", ">") if self.big_endian else np_dtype)
        return torch.from_numpy(array.astype(np_dtype[1:], copy=True)).reshape(e.shape)


def index_for(path: str | os.PathLike) -> Path:
    """The ``.index`` file of a checkpoint given as its folder, prefix or index file."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("*.index"))
        state = p / "checkpoint"
        if state.is_file():  # TensorFlow's checkpoint state names the current prefix
            try:
                for line in state.read_text(encoding="utf-8", errors="replace").splitlines():
                    if line.startswith("model_checkpoint_path:"):
                        name = line.split(":", 1)[1].strip().strip('"')
                        candidate = p / (Path(name).name + ".index")
                        if candidate.is_file():
                            return candidate
            except OSError:
                pass
        if len(found) == 1:
            return found[0]
        if not found:
            raise BundleError(p, "no TensorFlow checkpoint index (*.index) in this folder")
        raise BundleError(p, f"{len(found)} checkpoint indexes here; choose one of "
                             f"{', '.join(f.name for f in found)}")
    if p.suffix == ".index":
        return p
    return p.with_name(p.name + ".index")


_PARSED: dict[tuple[str, str], TensorBundle] = {}  # the last index parsed: path, sha256


def _index_bytes(index: Path) -> bytes:
    kind = file_kind(index)
    if kind == FileKind.MISSING:
        raise BundleError(index, "no such file")
    if kind != FileKind.FILE:  # opening a FIFO would wait for a writer forever
        raise BundleError(index, f"{kind}, not a regular file: it is not read")
    try:
        st = index.stat()
        if st.st_size > MAX_INDEX_BYTES:
            raise BundleError(index, f"{st.st_size:,} bytes is far larger than any tensor "
                                     "bundle index")
        return index.read_bytes()
    except OSError as exc:
        raise BundleError(index, f"cannot be read ({exc.strerror or exc})") from None


def _table(data: bytes, index: Path, should_stop) -> tuple[dict[str, BundleEntry], list | None]:
    """The entries of the sorted table and the bundle header's fields; every block is
    read and checksummed once."""
    if len(data) < FOOTER_BYTES or struct.unpack_from("<Q", data, len(data) - 8)[0] != TABLE_MAGIC:
        raise BundleError(index, "not a TensorFlow tensor bundle index (no table magic at "
                                 "its end)")
    footer = data[-FOOTER_BYTES:]
    _, _, pos = _handle(footer, 0, index)  # the meta-index block: unused by TensorFlow
    index_offset, index_size, _ = _handle(footer, pos, index)
    index_block = _block(data, index_offset, index_size, index, "the index block")
    entries: dict[str, BundleEntry] = {}
    header = None
    seen: set[int] = set()
    for _, handle in _block_entries(index_block, index, "the index block"):
        check(should_stop)
        offset, size_, _ = _handle(handle, 0, index)
        if offset in seen:
            raise BundleError(index, "not a TensorFlow tensor bundle index (it names the "
                                     f"block at byte {offset:,} twice)")
        seen.add(offset)
        block = _block(data, offset, size_, index, "a data block")
        for key, value in _block_entries(block, index, "a data block"):
            if key == b"":
                header = _fields(value, index, "the bundle header")
                continue
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise BundleError(index, "not a TensorFlow tensor bundle index (a variable "
                                         "name is not text)") from None
            entries[name] = _entry(name, value, index)
            if len(entries) > MAX_ENTRIES:
                raise BundleError(index, f"more than {MAX_ENTRIES:,} variables: not a model's "
                                         "checkpoint")
    return entries, header


def open_bundle(path: str | os.PathLike, should_stop=None) -> TensorBundle:
    """Parse the index of a checkpoint (folder, prefix or ``.index`` file). The parse is
    kept for the same index bytes, so a load that asks several times parses it once; the
    data files are checked every time."""
    index = index_for(path)
    data = _index_bytes(index)
    digest = hashlib.sha256(data).hexdigest()
    stamp = (str(index), digest)
    bundle = _PARSED.get(stamp)
    if bundle is None:
        entries, header = _table(data, index, should_stop)
        if header is None:
            raise BundleError(index, "not a TensorFlow tensor bundle index (no bundle header)")
        num_shards, big_endian = 1, False
        for number, value in header:
            if number == 1:
                num_shards = int(value)
            elif number == 2:
                big_endian = int(value) == 1
        if not 1 <= num_shards <= 100_000:
            raise BundleError(index, f"the bundle header declares {num_shards} shards")
        bundle = TensorBundle(index.with_name(index.name[: -len(".index")]), entries,
                              num_shards, big_endian, digest)
        _PARSED.clear()
        _PARSED[stamp] = bundle
    bundle.check_files()
    return bundle
