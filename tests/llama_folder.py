"""A small tokenizer.json of our own, trained here with the ``tokenizers`` library on the
sample text (byte-level BPE, as Llama 3, Qwen and SmolLM2 use), for the Llama-family
folders the tests write with transformers' ``save_pretrained``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from explorer.core.base.resources import resource_path

END = "<|endoftext|>"


@lru_cache(maxsize=4)
def _trained(vocab_size: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[END],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([resource_path("the-verdict.txt").read_text(encoding="utf-8")], trainer)
    return tok.to_str()


def write_tokenizer(folder: Path, vocab_size: int = 320) -> int:
    """tokenizer.json into ``folder``; its end-of-text id."""
    from tokenizers import Tokenizer
    text = _trained(vocab_size)
    (Path(folder) / "tokenizer.json").write_text(text, encoding="utf-8")
    return Tokenizer.from_str(text).token_to_id(END)
