"""A model folder's own tokenizer: ``tokenizer.json`` (Llama, Qwen, SmolLM2…) read by the
``tokenizers`` library, behind the explorer's ``Tokenizer``, or Llama 3's tokenizer.model
(tiktoken_file.py); a folder without one is read with GPT-2's. Whether a model's rows and
its tokenizer fit, and what is said when they do not. Nothing here runs code from a file:
tokenizer.json is JSON data."""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING
from pathlib import Path

from ..base.errors import CheckpointError
from ..base.validate import FileKind, file_kind, parse_json, read_json, regular_file
from ..gpt.families import for_model_type
from ..gpt.tokenizer import Tokenizer, gpt2_tokenizer, spelled_text
from .tokenizer_growth import MAX_CHARS, growth, refusal

if TYPE_CHECKING:
    from ..gpt.config import GPTConfig

TOKENIZER_FILE = "tokenizer.json"
_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")  # SentencePiece's byte fallback


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode: byte-level BPE writes each byte as one
    printable character."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` from a model's tokenizer.json."""

    def __init__(self, path: Path, name: str, eos_id: int | None = None) -> None:
        from tokenizers import Tokenizer as Library

        raw = regular_file(path).read_bytes()
        spec = parse_json(raw, path, "a tokenizer.json")  # size and depth checked first
        if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
            raise CheckpointError(path, "not a tokenizer.json (no tokenizer model in it)")
        try:
            self._tok = Library.from_buffer(raw)
        except Exception as exc:  # the library's own error types: one line for people
            raise CheckpointError(path, f"not a tokenizer.json the tokenizers library reads "
                                        f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        self._byte_level = "ByteLevel" in str(spec.get("decoder"))
        # what its normalizer and decoder can make of one character, its longest token
        self._grows = growth(spec.get("normalizer")), growth(spec.get("decoder"))
        self._specials = {i: t.content for i, t in self._tok.get_added_tokens_decoder().items()}
        self.name = name
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        self.eot_id = eos_id
        self.eot_text = self._specials.get(eos_id, "") if eos_id is not None else ""
        self.path = path

    def encode(self, text: str, allow_special: bool = True) -> list[int]:
        """The text as typed, as GPT-2's is: no start token is added (a model that wants
        one, as Llama 3's <|begin_of_text|>, gets it when it is typed); special tokens
        typed in the text are those tokens."""
        why = refusal(len(text), self._grows[0], "normalizer")
        if why:  # refused before the library sees it: it would fill the memory
            raise ValueError(f"{self.path}: {why}")
        return list(self._guarded(lambda: self._tok.encode(text, add_special_tokens=False),
                                  "this text").ids)

    @cached_property
    def _longest(self) -> int:
        """The longest token's characters: read once, when a long decode first asks."""
        return max(map(len, self._tok.get_vocab(with_added_tokens=True)), default=1)

    def decode(self, ids: list[int]) -> str:
        ids = list(ids)
        if all(0 <= i < self.vocab_size for i in ids):
            if len(ids) * self._longest * self._grows[1] > MAX_CHARS:  # its pieces' own length
                why = refusal(sum(len(self._tok.id_to_token(i) or "") for i in ids),
                              self._grows[1], "decoder")
                if why:
                    raise ValueError(f"{self.path}: {why}")
            return self._guarded(lambda: self._tok.decode(ids, skip_special_tokens=False),
                                 "these token ids")
        return spelled_text(self, ids)  # a padded row's id among them: <id N>

    def _guarded(self, call, what: str):
        """The library's answer; its failure — a Rust panic too, which is no Exception (a
        tokenizer.json's regex that backtracks past its limit) — one ValueError naming
        the file."""
        try:
            return call()
        except Exception as exc:
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        except BaseException as exc:  # pyo3's PanicException: caught, nothing else is
            if type(exc).__name__ != "PanicException":
                raise
            said = str(exc).splitlines()[0] if str(exc) else "a panic"
        raise ValueError(f"{self.path}: its tokenizer failed on {what} ({said[:160]})")

    def token_bytes(self, token_id: int) -> bytes:
        if token_id in self._specials:
            return self._specials[token_id].encode("utf-8")
        token = self._tok.id_to_token(int(token_id))
        if token is None:
            raise KeyError(token_id)
        if self._byte_level:
            table = _unicode_to_byte()
            return bytes(table[c] for c in token if c in table)
        m = _BYTE.match(token)
        if m:
            return bytes([int(m.group(1), 16)])
        return token.replace("▁", " ").encode("utf-8")

    def ready(self) -> bool:
        return True

    def load(self) -> None:
        pass


def _eos(folder: Path) -> int | None:
    """The end-of-text id the folder's generation_config.json or config.json names."""
    found = _eos_in(folder)
    return None if found is None else found[0]


def checked_eos(tokenizer: Tokenizer, folder: Path) -> None:
    """An end-of-text id the folder names that is not one of its tokenizer's ids (it
    would never be produced, and generation never stop there) is refused naming its file."""
    found = _eos_in(folder)
    if found is not None and found[0] >= tokenizer.vocab_size:
        raise CheckpointError(found[1], f"eos_token_id {found[0]:,} is not one of the "
                                        f"tokenizer's {tokenizer.vocab_size:,} ids "
                                        f"({tokenizer.name})")


def _eos_in(folder: Path) -> tuple[int, Path] | None:
    """(the end-of-text id, the file that names it): generation_config.json's, else
    config.json's; None where neither names one."""
    for name in ("generation_config.json", "config.json"):
        f = folder / name
        if file_kind(f) != FileKind.FILE:
            continue
        try:
            data = read_json(f, "a config")
        except CheckpointError:
            continue
        eos = data.get("eos_token_id") if isinstance(data, dict) else None
        if isinstance(eos, list) and eos:
            eos = eos[0]
        if isinstance(eos, int) and not isinstance(eos, bool) and eos >= 0:
            return eos, f
    return None


def tokenizer_for(path: str | Path) -> Tokenizer:
    """The tokenizer of a checkpoint: the tokenizer.json in its folder (or beside its
    file), else Llama 3's tokenizer.model (tiktoken's format), else GPT-2's. A tokenizer
    file that is there but not a regular file (a folder, a FIFO, a device) is refused in
    words, never passed over for GPT-2's."""
    from .tiktoken_file import TIKTOKEN_FILE, TiktokenFileTokenizer
    p = Path(path)
    folder = p if file_kind(p) == FileKind.FOLDER else p.parent
    for file_name in (TOKENIZER_FILE, TIKTOKEN_FILE):
        found = folder / file_name
        kind = file_kind(found)
        if kind == FileKind.MISSING:
            continue
        if kind != FileKind.FILE:
            raise CheckpointError(found, f"{'a folder' if kind == FileKind.FOLDER else kind}, not "
                                         "a regular file: the model's tokenizer cannot be read "
                                         "from it (remove it to read the model with GPT-2's)")
        named = _family_name(folder)
        if file_name == TIKTOKEN_FILE:  # the book's Llama 3 files: its tokenizer
            tokenizer = TiktokenFileTokenizer(found, f"{named or 'Llama 3'} ({file_name})",
                                              _eos(folder))
        else:
            tokenizer = HFTokenizer(found, f"{named or folder.name} ({file_name})", _eos(folder))
        checked_eos(tokenizer, folder)
        return tokenizer
    return gpt2_tokenizer()


def _family_name(folder: Path) -> str | None:
    """What config.json's model_type calls the model ("Qwen3"), or None."""
    config = folder / "config.json"
    if file_kind(config) != FileKind.FILE:
        return None
    try:
        data = read_json(config, "a config")
    except CheckpointError:
        return None
    kind = data.get("model_type") if isinstance(data, dict) else None
    family = for_model_type(kind)
    return family.files.hf_name(kind) if family is not None else None


def check_vocabulary_size(path, cfg: GPTConfig, tokenizer: Tokenizer | None = None) -> None:
    """The model needs a row for each id its tokenizer produces (a larger, padded
    vocabulary is fine: its extra ids are never produced)."""
    tokenizer = tokenizer or gpt2_tokenizer()
    if cfg.vocab_size < tokenizer.vocab_size:
        fix = " (a model of its own vocabulary needs its tokenizer.json beside it)" if (
            tokenizer is gpt2_tokenizer() and cfg.family.files.own_tokenizer) else ""
        raise CheckpointError(path, f"this model has {cfg.vocab_size:,} tokens; {tokenizer.name}'s "
                                    f"tokenizer, which the explorer uses, needs "
                                    f"{tokenizer.vocab_size:,}{fix}")


def tokenizer_notes(cfg: GPTConfig, tokenizer: Tokenizer, notices: list[str]) -> str:
    """What a model's tokenizer does not cover, said in ``notices``: ids past its tokens
    (a padded vocabulary: they show as <id N>). Returned, for the title: that the model
    is read with GPT-2's tokenizer when it is not GPT-2's vocabulary ("" otherwise)."""
    rows, spelled = cfg.vocab_size, tokenizer.vocab_size
    foreign = ""
    if tokenizer is gpt2_tokenizer() and cfg.family.files.own_tokenizer and rows != spelled:
        foreign = "read with GPT-2's tokenizer, not its own"
        notices.append(f"{foreign}: no tokenizer.json or tokenizer.model beside it, and its "
                       f"{rows:,} token rows are not GPT-2's {spelled:,}, so its text is "
                       "another vocabulary's")
    if rows > spelled:
        notices.append(f"ids {spelled:,}–{rows - 1:,} have no token in the tokenizer "
                       f"({tokenizer.name}): {rows - spelled:,} of the model's {rows:,} rows, "
                       "shown as <id N> (they can be chosen)")
    return foreign
