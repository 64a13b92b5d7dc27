"""A saved run's tokens shown without its model: the bytes of every id the run holds,
saved with it when its model has a tokenizer of its own (docs/RUN_FORMAT.md, ``token_bytes``)."""

from __future__ import annotations

from ..gpt.tokenizer import Tokenizer


class RecordedTokenizer(Tokenizer):
    """A saved run's tokenizer, for showing it: the bytes of the ids the run holds (its
    model's own vocabulary was saved with it); it reads no text."""

    name = "the saved run's"
    eot_id = None

    def __init__(self, pieces: dict[int, bytes], vocab_size: int) -> None:
        self.pieces, self.vocab_size = pieces, vocab_size

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        raise ValueError("a saved run's model is not loaded: its tokenizer reads no text")

    def decode(self, ids: list[int]) -> str:
        return b"".join(self.pieces.get(int(i), b"") for i in ids).decode("utf-8", "replace")

    def token_bytes(self, token_id: int) -> bytes:
        return self.pieces[int(token_id)]

    def ready(self) -> bool:
        return True

    def load(self) -> None:
        pass


def recorded_tokenizer(value, vocab: int, most: int) -> RecordedTokenizer:
    """``token_bytes`` of a run file: {"id": "hex of its bytes"}, ids below ``vocab``."""
    if not isinstance(value, dict) or len(value) > most:
        raise TypeError("token_bytes must be an object of token ids and their bytes in hex")
    pieces = {}
    for key, text in value.items():
        if not (key.isascii() and key.isdigit()) or not int(key) < vocab or not isinstance(text, str) or len(text) > 256:
            raise TypeError("token_bytes must map token ids below the vocabulary to hex bytes")
        pieces[int(key)] = bytes.fromhex(text)
    return RecordedTokenizer(pieces, vocab)
