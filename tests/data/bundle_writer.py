"""A tensor bundle index written byte by byte, for hostile cases TensorFlow would never
write (keys that grow by a byte an entry, many handles to one block). The layout is
LevelDB's table as TensorFlow writes it; a test checks that the explorer reads this
writer's version of the committed TensorFlow checkpoint's index exactly as the original."""

from __future__ import annotations

import struct

from explorer.core.weights.crc32c import crc32c
from explorer.core.weights.tf_bundle import TABLE_MAGIC


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, bytes):
        return varint(number << 3 | 2) + varint(len(value)) + value
    return varint(number << 3) + varint(value)


def mask(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def entry_proto(dtype: int, shape: tuple[int, ...], offset: int, size: int, crc: int | None,
                shard: int = 0) -> bytes:
    dims = b"".join(field(2, field(1, d)) for d in shape)
    out = field(1, dtype) + field(2, dims) + field(3, shard) + field(4, offset) + field(5, size)
    if crc is not None:
        out += varint(6 << 3 | 5) + struct.pack("<I", mask(crc))
    return out


def header_proto(num_shards: int = 1) -> bytes:
    return field(1, num_shards) + field(2, 0) + field(3, field(1, 1))


def block(items: list[tuple[bytes, bytes]], shared_prefix: bool = True) -> bytes:
    """A block's contents and trailer: prefix-compressed keys, one restart point."""
    body = bytearray()
    last = b""
    for key, value in items:
        shared = 0
        if shared_prefix:
            while shared < min(len(key), len(last)) and key[shared] == last[shared]:
                shared += 1
        body += varint(shared) + varint(len(key) - shared) + varint(len(value))
        body += key[shared:] + value
        last = key
    body += struct.pack("<I", 0) + struct.pack("<I", 1)
    return bytes(body) + b"\x00" + struct.pack("<I", mask(crc32c(bytes(body) + b"\x00")))


def handle(offset: int, size: int) -> bytes:
    return varint(offset) + varint(size)


def table(blocks: list[list[tuple[bytes, bytes]]], repeat_first: int = 1) -> bytes:
    """The whole index file: data blocks, an index block naming each (the first one
    ``repeat_first`` times, which no writer does), an empty meta block, the footer."""
    out = bytearray()
    handles = []
    for items in blocks:
        raw = block(items)
        handles.append((items[-1][0] if items else b"", handle(len(out), len(raw) - 5)))
        out += raw
    handles = [handles[0]] * (repeat_first - 1) + handles
    meta_offset = len(out)
    meta = block([])
    out += meta
    index_offset = len(out)
    index = block([(key + bytes([i % 256]) * (i > 0), h) for i, (key, h) in enumerate(handles)],
                  shared_prefix=False)
    out += index
    footer = handle(meta_offset, len(meta) - 5) + handle(index_offset, len(index) - 5)
    footer = footer.ljust(40, b"\x00") + struct.pack("<Q", TABLE_MAGIC)
    return bytes(out) + footer
