
import pytest

from explorer.core.gpt import tokenizer
from explorer.core.gpt.tokenizer import (END_OF_TEXT_ID, IncrementalDecoder, decode, encode,
                                         get_encoding, token_piece)


@pytest.mark.parametrize("text,ids", [
    ("Hello world", [15496, 995]),
    ("Every effort moves you", [6109, 3626, 6100, 345]),
    ("<|endoftext|>", [50256]),
    # tiktoken's own published example for the GPT-2 encoding
    ("hello world", [31373, 995]),
])
def test_known_token_ids(text, ids):
    assert encode(text) == ids


def test_vocabulary_size_and_special_token():
    enc = get_encoding()
    assert enc.n_vocab == 50257
    assert END_OF_TEXT_ID == enc.eot_token == 50256
    assert encode("<|endoftext|>", allow_special=False) != [50256]


def test_round_trip_on_sample_text():
    from explorer.core.base.resources import resource_path
    text = resource_path("the-verdict.txt").read_text(encoding="utf-8")
    ids = encode(text)
    assert len(ids) == 5145  # the book's count for "The Verdict"
    assert decode(ids) == text


def test_pieces_of_partial_utf8_are_shown_as_bytes():
    ids = encode("🦙")
    assert len(ids) > 1
    pieces = [token_piece(i) for i in ids]
    assert all(p.startswith("<0x") for p in pieces)
    assert token_piece(encode(" effort")[0]) == " effort"


def test_incremental_decoder_holds_back_split_characters():
    ids = encode("a 🦙 é b")
    dec = IncrementalDecoder()
    pieces = [dec.push(i) for i in ids] + [dec.flush()]
    assert "".join(pieces) == "a 🦙 é b"
    assert "\ufffd" not in "".join(pieces)


def test_vocabulary_is_not_cached_in_temp_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    tokenizer._encoding.cache_clear()
    try:
        assert encode("Hello world") == [15496, 995]
    finally:
        tokenizer._encoding.cache_clear()
    assert not (tmp_path / "cache").exists()


def test_damaged_vocabulary_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "gpt2.tiktoken"
    bad.write_bytes(b"SGVsbG8= 0\n")
    monkeypatch.setattr(tokenizer, "resource_path", lambda name: bad)
    tokenizer._encoding.cache_clear()
    try:
        with pytest.raises(ValueError, match="sha256"):
            get_encoding()
    finally:
        tokenizer._encoding.cache_clear()


def test_two_threads_read_the_vocabulary_once(monkeypatch):
    """The window reads it on a thread while the engine may ask for it with the model:
    one reads, the other waits for the same encoding."""
    import threading
    reads = []
    real = tokenizer._load_ranks

    def counted():
        reads.append(threading.current_thread().name)
        return real()
    monkeypatch.setattr(tokenizer, "_load_ranks", counted)
    tokenizer._encoding.cache_clear()
    got = []
    try:
        threads = [threading.Thread(target=lambda: got.append(get_encoding())) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        tokenizer._encoding.cache_clear()
    assert len(reads) == 1 and len(got) == 3
    assert got[0] is got[1] is got[2]
    assert got[0].encode("Hello world") == [15496, 995]
