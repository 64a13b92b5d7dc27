"""What a tokenizer.json makes of a text is bounded before the library sees it: a
normalizer (or a decoder) that replaces one character by 200,000 would turn a
200-character prompt into 40 million characters and gigabytes inside the library. Its
growth is read from the file's own replacements; a text it would blow past the bound is
refused in one line naming the file — in the commands, under the window's prompt (what
was typed kept, so a remembered prompt shows the line at start instead of filling the
memory) — and tokenizers built as the real ones are (Llama 2's ▁, ByteLevel) are not."""

import base64
import json
import struct

import pytest

transformers = pytest.importorskip("transformers")


def _folder(tmp_path, normalizer=None, decoder=None):
    from tests.llama_folder import _trained
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    spec = json.loads(_trained(320))
    if normalizer is not None:
        spec["normalizer"] = normalizer
    if decoder is not None:
        spec["decoder"] = decoder
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return tmp_path


BLOWS_UP = {"type": "Replace", "pattern": {"String": "a"}, "content": "x" * 200_000}


def test_growth_is_read_from_the_files_own_replacements():
    from explorer.core.weights.tokenizer_growth import growth
    llama2 = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    assert growth(llama2) == 2 and growth(None) == 1 and growth({"type": "NFC"}) == 1
    assert growth(BLOWS_UP) == 200_000
    assert growth({"type": "Replace", "pattern": {"String": "abcd"}, "content": "x" * 10}) == 3
    assert growth({"type": "Replace", "pattern": {"Regex": "a*"}, "content": "xyz"}) == 4
    twice = {"type": "Sequence", "normalizers": [BLOWS_UP, BLOWS_UP]}
    assert growth(twice) == 4_000_001  # capped past the bound: no 40-billion product
    blob = struct.pack("<I", 8) + b"\0" * 8 + b"ab\0" + b"y" * 300 + b"\0"
    charsmap = {"type": "Precompiled",
                "precompiled_charsmap": base64.b64encode(blob).decode("ascii")}
    assert growth(charsmap) == 300
    decoders = {"type": "Sequence", "decoders": [{"type": "ByteLevel"}, BLOWS_UP]}
    assert growth(decoders) == 800_000


def test_a_normalizer_that_blows_up_is_refused_in_one_line(tmp_path, capsys):
    from explorer.cli import main
    folder = _folder(tmp_path, normalizer=BLOWS_UP)
    prompt = "a" * 200
    for command in (["tokenize", prompt], ["generate", prompt, "--max-new-tokens", "1"]):
        assert main([*command, "--checkpoint", str(folder)]) == 2, command
        err = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("gpt-explorer")]
        assert err == [f"gpt-explorer {command[0]}: error: {folder / 'tokenizer.json'}: its "
                       "normalizer can make up to 200,000 characters of one, 40,000,000 of "
                       "these 200; the explorer lets a tokenizer make at most 4,000,000"], err
    assert main(["tokenize", "a" * 20, "--checkpoint", str(folder)]) == 0  # 4,000,000: made


def test_a_decoder_that_blows_up_is_refused_in_one_line(tmp_path):
    from explorer.core.weights.tokenizers_files import tokenizer_for
    byte_level = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                  "use_regex": True}
    folder = _folder(tmp_path, decoder={"type": "Sequence", "decoders": [
        byte_level, {"type": "Replace", "pattern": {"String": "e"},
                                "content": "x" * 100_000}]})
    tok = tokenizer_for(folder)
    ids = tok.encode("Every effort moves you " * 20)
    with pytest.raises(ValueError) as refused:
        tok.decode(ids)
    assert str(refused.value).startswith(f"{folder / 'tokenizer.json'}: its decoder can make up "
                                         "to 400,000 characters of one")
    assert tok.decode(ids[:6]).startswith("Evxxxxx")  # a few tokens: made


def test_real_tokenizers_keep_a_prompt_of_a_million_characters(tmp_path):
    from explorer.core.weights.tokenizers_files import tokenizer_for
    folder = _folder(tmp_path, normalizer={"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})
    text = "Every effort moves you. " * 40_000
    assert len(tokenizer_for(folder).encode(text)) > 100_000


def test_the_window_says_it_under_the_prompt_and_keeps_what_was_typed(qtbot, tmp_path):
    from explorer.core.sources import ModelSpec, open_model
    from tests.ui.alone import Alone
    folder = _folder(tmp_path, normalizer=BLOWS_UP)
    alone = Alone(qtbot, loaded=open_model(ModelSpec(checkpoint=str(folder))))
    panel = alone.prompt
    panel.prompt.setPlainText("a" * 200)
    panel.update_chips()
    assert "its normalizer can make up to 200,000 characters of one" in panel.token_count.text()
    assert panel.request_run() is False and panel.prompt.toPlainText() == "a" * 200
