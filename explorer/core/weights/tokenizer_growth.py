"""How long a tokenizer.json can make a text before its pieces are cut: the most
characters its normalizer (or its decoder) can write for one character it reads, from
the file's own replacements. A ``Replace`` of one character by 200,000 would turn a
200-character prompt into 40 million characters and gigabytes inside the library; the
explorer refuses such a text before the library sees it. Reads no file."""

from __future__ import annotations

import base64
import binascii
import struct
from enum import StrEnum
from typing import Any

MAX_CHARS = 4_000_000  # characters a tokenizer may make of one text (a 1,000,000-character
# prompt through Llama 2's ▁ replacements is 2,000,000)



class Step(StrEnum):
    """A tokenizer.json's normalizer or decoder ``type`` whose output the file's own
    content sets (the others, the library's fixed ones, are ``_FIXED``)."""
    SEQUENCE = "Sequence"
    REPLACE = "Replace"
    PREPEND = "Prepend"
    PRECOMPILED = "Precompiled"


# the library's own normalizers and decoders, and the most each makes of one character:
# Unicode's forms and case (the text's own characters, no content from the file), bytes
# spelled as characters (ByteLevel: up to 4), spaces around CJK characters (Bert: 3)
_FIXED = {"NFC": 1, "NFD": 1, "NFKC": 1, "NFKD": 1, "Lowercase": 1, "Strip": 1,
          "StripAccents": 1, "Nmt": 1, "ByteLevel": 4, "BertNormalizer": 3, "Metaspace": 2,
          "WordPiece": 1, "BPEDecoder": 2, "CTC": 1, "Fuse": 1, "ByteFallback": 1}


def growth(node: Any) -> int:
    """The most characters ``node`` (a normalizer's or a decoder's JSON) writes for one
    it reads: replacements by their content, a sequence by the product of its parts; a
    type the library does not have counts as 1 (the library refuses the file)."""
    if not isinstance(node, dict):
        return 1
    kind = node.get("type")
    if kind == Step.SEQUENCE:
        parts = node.get("normalizers", node.get("decoders"))
        total = 1
        for part in parts if isinstance(parts, list) else ():
            total = min(total * growth(part), MAX_CHARS + 1)
        return total
    if kind == Step.REPLACE:
        return _replace(node.get("pattern"), node.get("content"))
    if kind == Step.PREPEND:
        prepend = node.get("prepend")
        return 1 + (len(prepend) if isinstance(prepend, str) else 0)
    if kind == Step.PRECOMPILED:
        return _precompiled(node.get("precompiled_charsmap"))
    return _FIXED.get(kind, 1)


def _replace(pattern: Any, content: Any) -> int:
    """A string pattern of n characters gives len(content) for n; a regex may match one
    character, or none (its content between any two): len(content) + 1 for one."""
    size = len(content) if isinstance(content, str) else 0
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str) and pattern["String"]:
        return max(1, -(-size // len(pattern["String"])))
    return size + 1


def _precompiled(charsmap: Any) -> int:
    """A SentencePiece charsmap: a trie, then its replacements, each ended by a zero
    byte; one character becomes at most the longest of them (its UTF-8 bytes)."""
    if not isinstance(charsmap, str):
        return 1
    try:
        blob = base64.b64decode(charsmap, validate=True)
        (trie,) = struct.unpack("<I", blob[:4])
    except (binascii.Error, ValueError, struct.error):
        return 1  # not one: the library refuses the file
    return max((len(piece) for piece in blob[4 + trie:].split(b"\0")), default=1) or 1


def refusal(text_chars: int, factor: int, what: str) -> str | None:
    """Why a text of ``text_chars`` characters is not tokenized (or decoded) by a
    tokenizer that makes up to ``factor`` of one (``what``: "normalizer", "decoder"),
    or None."""
    made = text_chars * factor
    if made <= MAX_CHARS:
        return None
    return (f"its {what} can make up to {factor:,} characters of one, {made:,} of these "
            f"{text_chars:,}; the explorer lets a tokenizer make at most {MAX_CHARS:,}")
