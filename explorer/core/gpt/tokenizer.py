"""Tokenizers: what a model reads and writes, text <-> ids and the pieces shown.

``Tokenizer`` is what the rest of the app asks (a loaded model carries its own:
``LoadedModel.tokenizer``). GPT-2's byte-pair tokenizer is built offline from
``resources/gpt2.tiktoken``: the vocabulary file is checked against its sha256 and
parsed here, so nothing is downloaded and nothing is cached under the temp folder
(tiktoken's own loader caches every path it reads). A Llama or Qwen folder's
``tokenizer.json`` is read by the ``tokenizers`` library (weights/tokenizers_files.py).
The module functions (``encode``, ``token_piece``…) are GPT-2's: whatever shows a model's
tokens asks the model's own (``tokenizer_of``). Knows nothing of models but that.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import threading

import tiktoken

from ..base.resources import resource_path

GPT2_TIKTOKEN_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
END_OF_TEXT = "<|endoftext|>"
END_OF_TEXT_ID = 50256
# r50k_base's split pattern (the one GPT-2 was trained with).
_GPT2_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)


def _load_ranks() -> dict[bytes, int]:
    path = resource_path("gpt2.tiktoken")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != GPT2_TIKTOKEN_SHA256:
        raise ValueError(
            f"{path}: sha256 {digest} does not match GPT-2's vocabulary "
            f"({GPT2_TIKTOKEN_SHA256}); the file is damaged or not the GPT-2 vocabulary"
        )
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


_reading = threading.Lock()  # one thread reads the vocabulary; the others wait for it


def get_encoding() -> tiktoken.Encoding:
    """The GPT-2 encoding (50,257 ids; ``<|endoftext|>`` = 50256)."""
    with _reading:
        return _encoding()


@functools.lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=_GPT2_PATTERN,
        mergeable_ranks=_load_ranks(),
        special_tokens={END_OF_TEXT: END_OF_TEXT_ID},
        explicit_n_vocab=50257,
    )


def tokenizer_ready() -> bool:
    """Whether the vocabulary is loaded (its first use reads and checks 1 MB: ~0.2 s)."""
    return _encoding.cache_info().currsize > 0


def encode(text: str, allow_special: bool = True) -> list[int]:
    """Token ids for ``text``. With ``allow_special`` the literal ``<|endoftext|>`` becomes
    id 50256 (as the book does); otherwise it is tokenized as ordinary text."""
    enc = get_encoding()
    if allow_special:
        return enc.encode(text, allowed_special={END_OF_TEXT})
    return enc.encode(text, disallowed_special=())


def decode(ids: list[int]) -> str:
    """Text for token ids; bytes that are not valid UTF-8 become U+FFFD; an id GPT-2's
    vocabulary lacks (a padded model's extra rows) is written ``<id N>``."""
    ids = list(ids)
    if all(0 <= i < END_OF_TEXT_ID + 1 for i in ids):
        return get_encoding().decode(ids, errors="replace")
    return spelled_text(_GPT2, ids)


def spelled_text(tokenizer: "Tokenizer", ids: list[int]) -> str:
    """The text of ``ids`` one token at a time (``Tokenizer.spelled``): an id the
    vocabulary lacks is ``<id N>``, bytes that are not valid UTF-8 U+FFFD."""
    return b"".join(tokenizer.spelled(i) for i in ids).decode("utf-8", errors="replace")


def token_bytes(token_id: int) -> bytes:
    return get_encoding().decode_single_token_bytes(token_id)


def visible(piece: str) -> str:
    """A piece as a chip or a label shows it: leading spaces as ·, newlines and tabs as
    ⏎ and ⇥, other invisible characters as their code."""
    shown = piece.replace(" ", "·").replace("\n", "⏎").replace("\t", "⇥") or "∅"
    # other control or invisible characters (a blank label tells nothing): their code
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in shown)


def token_piece(token_id: int) -> str:
    """A display string for one token: its text, or ``<0xE2><0x80>``-style byte escapes
    when the token is only part of a UTF-8 character."""
    try:
        raw = token_bytes(token_id)
    except KeyError:  # an id GPT-2's vocabulary does not have (a padded model's extra rows)
        return f"<id {token_id}>"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"<0x{b:02X}>" for b in raw)


class Tokenizer:
    """Text <-> ids for one model. ``token_bytes`` is what one id stands for; the pieces
    shown and the incremental decoding follow from it."""

    name = "GPT-2"  # whose tokenizer, for messages
    vocab_size = 50257  # the ids it produces: the model needs at least as many rows
    eot_id: int | None = END_OF_TEXT_ID  # the end-of-text token, if it has one
    eot_text = END_OF_TEXT

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        return encode(text, allow_special)

    def decode(self, ids: list[int]) -> str:
        return decode(ids)

    def token_bytes(self, token_id: int) -> bytes:
        return token_bytes(token_id)

    def token_piece(self, token_id: int) -> str:
        return _piece(self, token_id)

    def spelled(self, token_id: int) -> bytes:
        """What one id writes into a text: its bytes, or ``<id N>`` for an id the
        vocabulary lacks (a model may have more rows than its tokenizer has tokens:
        every row is a token the model can choose)."""
        try:
            return self.token_bytes(token_id)
        except (KeyError, ValueError, TypeError, OverflowError):
            return f"<id {token_id}>".encode()

    def ready(self) -> bool:
        return tokenizer_ready()

    def load(self) -> None:
        """Read its files now (GPT-2's: 1 MB checked and parsed, ~0.2 s)."""
        get_encoding()

    def decoder(self) -> "IncrementalDecoder":
        return IncrementalDecoder(self)

    def __deepcopy__(self, memo: dict) -> "Tokenizer":
        return self  # read-only: a copied model reads with the same tokenizer


_GPT2 = Tokenizer()


def gpt2_tokenizer() -> Tokenizer:
    """GPT-2's tokenizer (the default of every model without a tokenizer of its own)."""
    return _GPT2


def tokenizer_of(model) -> Tokenizer:
    """The tokenizer a model reads and writes text with (``model.tokenizer``: set by the
    loaders, and GPT-2's by ``build.build_model`` for a model built from a config). A
    model without one is refused in words: guessing GPT-2's would name another
    vocabulary's tokens."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("this model has no tokenizer: build it with build_model or load it "
                         "with open_model, which give it one")
    return tokenizer


def _piece(tokenizer: Tokenizer, token_id: int) -> str:
    try:
        raw = tokenizer.token_bytes(token_id)
    except (KeyError, ValueError, TypeError, OverflowError):  # an id the vocabulary lacks
        return f"<id {token_id}>"
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(f"<0x{b:02X}>" for b in raw)


class IncrementalDecoder:
    """Turns a stream of token ids into text pieces, holding back bytes of a UTF-8
    character that a later token completes (so an emoji split over tokens prints whole)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self._pending = b""
        self._bytes = (tokenizer or _GPT2).spelled  # an id without a token: <id N>

    def push(self, token_id: int) -> str:
        data = self._pending + self._bytes(token_id)
        try:
            text = data.decode("utf-8")
            self._pending = b""
            return text
        except UnicodeDecodeError as exc:
            if exc.reason == "unexpected end of data" and len(data) - exc.start < 4:
                self._pending = data[exc.start:]
                return data[:exc.start].decode("utf-8", errors="replace")
            self._pending = b""
            return data.decode("utf-8", errors="replace")

    def flush(self) -> str:
        text = self._pending.decode("utf-8", errors="replace")
        self._pending = b""
        return text
