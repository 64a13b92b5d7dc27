"""Llama 3's ``tokenizer.model``: a tiktoken BPE file (one ``base64-token rank`` line per
token), read as the book's ``llama3.Llama3Tokenizer`` reads it — Llama 3's split
pattern, and the special tokens from the first id after the ranks (128,000 on Llama 3:
``<|begin_of_text|>``, ``<|end_of_text|>``, the header ids, ``<|eot_id|>`` and the
reserved ones). The file is parsed here, line by line and checked, not by tiktoken's
loader (which caches every path it reads); nothing in it is run. A SentencePiece
``tokenizer.model`` (Llama 2, Gemma: a binary protobuf) is not this format and is refused
in words."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

import tiktoken

from ..base.errors import CheckpointError
from ..base.validate import regular_file
from ..gpt.tokenizer import Tokenizer, spelled_text

TIKTOKEN_FILE = "tokenizer.model"
MAX_BYTES = 64 << 20  # Llama 3's is 2.2 MB
MAX_RANKS = 1 << 21
# Llama 3's split pattern, as the book writes it
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                  r"|[^\r\n\p{L}\p{N}]?\p{L}+"
                  r"|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+"
                  r"|\s+(?!\S)"
                  r"|\s+")
# the book's special tokens, as offsets from the first id after the ranks (128,000)
_NAMED = {"<|begin_of_text|>": 0, "<|end_of_text|>": 1, "<|start_header_id|>": 6,
          "<|end_header_id|>": 7, "<|eot_id|>": 9}
RESERVED = 256  # special ids after the ranks, the named ones among them


def special_tokens(first: int) -> dict[str, int]:
    """The book's special tokens when the ranks end at ``first``."""
    special = {name: first + offset for name, offset in _NAMED.items()}
    special.update({f"<|reserved_{i}|>": first + i for i in range(RESERVED)
                    if first + i not in special.values()})
    return special


def read_ranks(path: Path) -> dict[bytes, int]:
    """The file's tokens and their ranks, every line checked: ranks 0 … n−1 once each."""
    path = regular_file(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise CheckpointError(path, f"{size:,} bytes; a tiktoken tokenizer.model is at most "
                                    f"{MAX_BYTES:,}")
    data = path.read_bytes()
    if b"\x00" in data[:4096] or not data.strip():
        raise CheckpointError(path, "not a tiktoken BPE file (Llama 3's tokenizer.model): a "
                                    "SentencePiece model (Llama 2, Gemma) is not read; put the "
                                    "model's tokenizer.json beside it")
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            token, rank = base64.b64decode(parts[0], validate=True), int(parts[1])
        except (IndexError, ValueError, binascii.Error):
            raise CheckpointError(path, f"line {number} is not 'base64-token rank': not a "
                                        "tiktoken BPE file (Llama 3's tokenizer.model)") from None
        if len(parts) != 2 or not token or token in ranks or rank != len(ranks) \
                or len(ranks) >= MAX_RANKS:
            raise CheckpointError(path, f"line {number}: each token once, with ranks 0, 1, 2 … "
                                        f"in order (at most {MAX_RANKS:,})")
        ranks[token] = rank
    return ranks


class TiktokenFileTokenizer(Tokenizer):
    """Llama 3's tokenizer from its tokenizer.model, as the book builds it."""

    def __init__(self, path: Path, name: str, eos_id: int | None = None) -> None:
        ranks = read_ranks(path)
        self.special = special_tokens(len(ranks))
        self._enc = tiktoken.Encoding(name=Path(path).name, pat_str=LLAMA3_PATTERN,
                                      mergeable_ranks=ranks, special_tokens=self.special)
        self.name = name
        self.vocab_size = len(ranks) + RESERVED
        self.eot_id = eos_id if eos_id is not None else self.special["<|end_of_text|>"]
        names = {i: t for t, i in self.special.items()}
        self.eot_text = names.get(self.eot_id, "")
        self.path = path

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """The text as typed (no <|begin_of_text|> added: type it where the model wants
        it); a special token typed in the text is that token."""
        if allow_special:
            return self._enc.encode(text, allowed_special="all")
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        ids = list(ids)
        if all(0 <= i < self.vocab_size for i in ids):
            return self._enc.decode(ids, errors="replace")
        return spelled_text(self, ids)

    def token_bytes(self, token_id: int) -> bytes:
        return self._enc.decode_single_token_bytes(int(token_id))

    def ready(self) -> bool:
        return True

    def load(self) -> None:
        pass
