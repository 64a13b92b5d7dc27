"""A saved run's tokens shown without its model: the bytes of every id the run holds,
saved with it when its model has a tokenizer of its own (docs/RUN_FORMAT.md, ``token_bytes``)."""

from __future__ import annotations

from ..gpt.tokenizer import Tokenizer, spelled_text


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
        return spelled_text(self, ids)

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


def spelled_ids(run) -> dict[str, str]:
    """What each token id the run holds stands for (hex of its bytes), by the model's own
    tokenizer: read back without that tokenizer, the run still shows its text."""
    ids = set(run.prompt_ids)
    for p in run.every_pass():
        ids.update(p.ids)
        ids.update(p.top_ids)
        if p.token_id is not None:
            ids.add(p.token_id)
    spelled = {}
    for i in sorted(ids):  # an id the tokenizer lacks (a padded row) is shown <id N>
        try:
            spelled[str(i)] = run.tokenizer.token_bytes(i).hex()
        except (KeyError, ValueError, TypeError, OverflowError):
            continue
    return spelled
