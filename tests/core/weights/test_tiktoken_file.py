"""Llama 3's tokenizer.model (tiktoken's BPE format), beside the book's Llama 3 .pth as
its readers have it: read as the book's ``Llama3Tokenizer`` (transcribed below from
llms_from_scratch 1.0.19's llama3.py) reads it — the same ids for every text, the same
special ids from 128,000 on, the same text back; the model opens with it, its title and
``tokenize`` name it, and its probabilities are over its 128,256 rows. A SentencePiece
tokenizer.model, a damaged one and a tokenizer file that is not a regular file are each
refused in one line."""

import base64
import json
import os
from pathlib import Path

import pytest
import tiktoken
import torch
from tiktoken.load import load_tiktoken_bpe

from explorer.core.base.errors import CheckpointError
from explorer.core.base.resources import resource_path
from explorer.core.gpt.config import preset
from explorer.core.weights.checkpoints import load_checkpoint
from explorer.core.weights.tokenizers_files import tokenizer_for


class BookLlama3Tokenizer:
    """llms_from_scratch.llama3.Llama3Tokenizer, as the book writes it."""

    def __init__(self, model_path):
        if not os.path.isfile(model_path):
            raise FileNotFoundError(model_path)
        mergeable = load_tiktoken_bpe(model_path)
        self.special = {
            "<|begin_of_text|>": 128000,
            "<|end_of_text|>": 128001,
            "<|start_header_id|>": 128006,
            "<|end_header_id|>": 128007,
            "<|eot_id|>": 128009,
        }
        self.special.update({f"<|reserved_{i}|>": 128002 + i
                             for i in range(256)
                             if 128002 + i not in self.special.values()})
        self.model = tiktoken.Encoding(
            name=Path(model_path).name,
            pat_str=r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
                    r"|[^\r\n\p{L}\p{N}]?\p{L}+"
                    r"|\p{N}{1,3}"
                    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+"
                    r"|\s+(?!\S)"
                    r"|\s+",
            mergeable_ranks=mergeable,
            special_tokens=self.special,
        )

    def encode(self, text, bos=False, eos=False, **kwargs):
        ids = ([self.special["<|begin_of_text|>"]] if bos else []) + self.model.encode(text)
        if eos:
            ids.append(self.special["<|end_of_text|>"])
        return ids

    def decode(self, ids):
        return self.model.decode(ids)


def write_tokenizer_model(folder: Path) -> Path:
    """A tokenizer.model of Llama 3's size, 128,000 ranks: GPT-2's 50,256 merges, then
    tokens no merge makes (their ranks only fill the table, as the book's file has)."""
    lines = [line for line in resource_path("gpt2.tiktoken").read_bytes().splitlines() if line]
    for i in range(len(lines), 128000):
        lines.append(base64.b64encode(b"\xf8" + i.to_bytes(3, "big")) + f" {i}".encode())
    path = folder / "tokenizer.model"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


TEXTS = ["Every effort moves you", "I HAD always thought Jack Gisburn rather a cheap genius",
         "It's 2025: 12345 tokens, über naïve — 東京 🙂\n\n  indented\tand\r\nlines",
         "don't we'll they'RE"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("llama3")


def test_tokenizer_model_reads_as_the_books_llama3_tokenizer(folder, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # the book's loader: no cache of the file
    path = write_tokenizer_model(folder)
    book = BookLlama3Tokenizer(str(path))
    ours = tokenizer_for(folder)
    assert ours.name == "Llama 3 (tokenizer.model)" and ours.vocab_size == 128256
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == book.encode(text), text
        assert ours.decode(ids) == book.decode(ids) == text
        assert [ours.token_bytes(i) for i in ids] == [
            book.model.decode_single_token_bytes(i) for i in ids]
    typed = "<|begin_of_text|>Hello<|eot_id|>"
    assert ours.encode(typed) == book.model.encode(typed, allowed_special="all")
    assert ours.encode(typed)[0] == 128000 and ours.encode(typed)[-1] == 128009
    assert ours.eot_id == 128001 and ours.eot_text == "<|end_of_text|>"
    assert ours.token_piece(128100) == "<|reserved_100|>"
    assert ours.token_piece(128256) == "<id 128256>"


def test_the_books_llama3_pth_opens_with_its_tokenizer_model(folder, capsys):
    """The book's Llama3Model (transcribed in tests/book_llama.py, random weights of a
    128,256-row vocabulary) saved as its readers save it: torch.save of its state dict,
    its config dict beside it with json.dump(..., default=str) (its dtype a torch dtype),
    and tokenizer.model. The title and ``tokenize`` name Llama 3's tokenizer, the prompt
    is read with it, and the logits over every one of the 128,256 rows equal the book
    model's."""
    from explorer.cli import main
    from explorer.core.run.passes import run_prompt
    from tests import book_llama
    if not (folder / "tokenizer.model").exists():
        write_tokenizer_model(folder)
    cfg = preset("llama-tiny", vocab_size=128256, emb_dim=16, n_heads=2, n_kv_groups=1,
                 head_size=8, n_layers=1, ff_dim=32, rope_base=500000.0, tie_weights=False)
    config = book_llama.book_config(cfg)
    torch.manual_seed(2)
    book = book_llama.Llama3Model(config).eval()
    torch.save(book.state_dict(), folder / "model.pth")
    with open(folder / "config.json", "w") as f:  # as the README says: default=str
        json.dump({**config, "dtype": torch.bfloat16}, f, default=str)
    loaded = load_checkpoint(folder / "model.pth")
    assert loaded.tokenizer.name == "Llama 3 (tokenizer.model)"
    assert "GPT-2" not in loaded.label and not any("<id N>" in n for n in loaded.notices)
    ids = loaded.tokenizer.encode(TEXTS[0])
    assert ids == BookLlama3Tokenizer(str(folder / "tokenizer.model")).encode(TEXTS[0])
    result = run_prompt(loaded.model, ids)
    with torch.no_grad():
        logits = book(torch.tensor([ids]))[0, -1].double()
    assert (torch.from_numpy(result.next_logits).double() - logits).abs().max() <= 1e-5
    want = torch.softmax(logits, -1)
    assert result.next_logits.shape == (128256,)
    assert result.top_ids[0] == int(want.argmax())
    assert result.top_probs[0] == pytest.approx(float(want.max()), rel=1e-4)
    assert result.top_pieces[0] == loaded.tokenizer.token_piece(int(want.argmax()))
    assert main(["tokenize", TEXTS[0], "--checkpoint", str(folder / "model.pth")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{len(ids)} tokens (Llama 3 (tokenizer.model))")


@pytest.mark.parametrize("content, words", [
    (b"\n\x08\x10\x00\x1a\x04\x08\x00" * 64, "not a tiktoken BPE file"),  # SentencePiece
    (b"IQ== 0\nIg== 2\n", "ranks 0, 1, 2"),
    (b"IQ== 0\nIQ== 1\n", "each token once"),
    (b"!!!! 0\n", "line 1 is not 'base64-token rank'"),
    (b"", "not a tiktoken BPE file"),
])
def test_a_tokenizer_model_that_is_not_llama3s_is_refused_in_one_line(tmp_path, content, words):
    (tmp_path / "tokenizer.model").write_bytes(content)
    with pytest.raises(CheckpointError, match=words):
        tokenizer_for(tmp_path)


def test_a_tokenizer_file_that_is_no_regular_file_is_named_not_passed_over(tmp_path):
    (tmp_path / "tokenizer.json").mkdir()
    with pytest.raises(CheckpointError, match="tokenizer.json: a folder, not a regular file: "
                                              "the model's tokenizer cannot be read"):
        tokenizer_for(tmp_path)
    (tmp_path / "tokenizer.json").rmdir()
    os.mkfifo(tmp_path / "tokenizer.model")
    with pytest.raises(CheckpointError, match="a FIFO"):
        tokenizer_for(tmp_path)
