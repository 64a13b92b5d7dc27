"""Every text the explorer writes about a model speaks that model's vocabulary: a Qwen3
block with a tokenizer of its own (320 byte-level BPE tokens, trained here on the sample
text), saved in the project's format with its tokenizer.json beside it, then run through
each text producer — Explain, the worked formulas, the forward trace, Learn's questions,
the logit lens and the game's words, the attribution (``why``), and the command line's
``attribute`` and ``diff``. Every token shown with its id is that id's piece in the
model's own tokenizer (GPT-2's piece for the same id differs), and no number is GPT-2's
vocabulary."""

from __future__ import annotations

import re

import pytest
import torch

from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.nodes import all_hook_names, order_of
from explorer.core.gpt.tokenizer import gpt2_tokenizer
from explorer.core.run.passes import EVERYTHING, run_prompt
from explorer.core.weights.checkpoints import load_checkpoint, save_checkpoint
from tests.llama_folder import write_tokenizer

PROMPT = "I had always thought Jack Gisburn rather a cheap genius"
PAIR = re.compile(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*") \(id (\d+)\)""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own-vocabulary")
    write_tokenizer(folder, 320)
    model = build_model(preset("qwen3-tiny", vocab_size=320), seed=5)
    return save_checkpoint(model, folder / "model.safetensors")


@pytest.fixture(scope="module")
def loaded(saved):
    loaded = load_checkpoint(saved)
    tok = loaded.tokenizer
    assert tok is loaded.model.tokenizer and tok.vocab_size == 320 and "tokenizer.json" in tok.name
    ids = tok.encode(PROMPT)
    gpt2 = gpt2_tokenizer()
    # the two vocabularies name the same ids differently: a GPT-2 piece would show
    assert sum(tok.token_piece(i) != gpt2.token_piece(i) for i in ids) >= len(ids) // 2
    return loaded


@pytest.fixture(scope="module")
def pass_(loaded):
    ids = loaded.tokenizer.encode(PROMPT)
    return ids, run_prompt(loaded.model, ids, keep=EVERYTHING)


def the_models_words(text: str, tok, at_least: int = 0) -> None:
    """Every 'piece' (id N) in ``text`` is the model's piece for N; no GPT-2 vocabulary."""
    pairs = PAIR.findall(text)
    assert len(pairs) >= at_least, text
    for piece, token_id in pairs:
        assert piece == repr(tok.token_piece(int(token_id))), (piece, token_id, text)
    assert "50257" not in text and "50,257" not in text, text


def test_explain_the_formulas_and_the_trace_speak_the_models_tokens(loaded, pass_):
    from explorer.core.lessons.explain import explain
    from explorer.core.lessons.formulas import worked
    from explorer.core.lessons.trace import what_changed

    ids, result = pass_
    tok, cfg, order = loaded.tokenizer, loaded.config, order_of(loaded.config)
    for name in all_hook_names(cfg):
        e = explain(name, result.views, result.pieces, None, order, cfg, tok)
        the_models_words(" ".join((e.what, e.here, e.mistake)), tok,
                         at_least=1 if name == "out_head" else 0)
        the_models_words(what_changed(name, result.views, cfg), tok)
    assert result.pieces == [tok.token_piece(i) for i in ids]
    assert "(vocabulary: 320" in explain("out_head", result.views, result.pieces, None, order,
                                         cfg, tok).what or "320" in explain(
        "out_head", result.views, result.pieces, None, order, cfg, tok).what
    for name in ("out_head", "tok_emb", "trf_blocks.1.ff", "trf_blocks.0.att.attn_weights"):
        if result.views[name].array is None:
            continue
        formula = worked(loaded.model, name, result.views, ids, 3)
        text = " ".join(formula.lines)
        assert f"token {tok.token_piece(ids[3])!r} at position 3" in text
        the_models_words(text, tok, at_least=1 if name == "out_head" else 0)


def test_learns_questions_the_lens_and_the_game_speak_the_models_tokens(loaded, pass_):
    from explorer.core.lessons.game import guess_token, token_facts
    from explorer.core.lessons.learn import question_for
    from explorer.core.run.analysis import logit_lens
    from explorer.core.gpt.nodes import residual_nodes, block_hook_name

    ids, result = pass_
    tok, cfg, order = loaded.tokenizer, loaded.config, order_of(loaded.config)
    for name in all_hook_names(cfg):
        q = question_for(name, result.views, order, asked=0)
        if q is not None:
            the_models_words(" ".join([q.text, *q.options, q.explanation, *q.why]), tok)
    residuals = {block_hook_name(layer, key): torch.tensor(result.views[block_hook_name(layer, key)].array)
                 for layer in range(cfg.n_layers) for key in residual_nodes(order)}
    for row in logit_lens(loaded.model, residuals, len(ids) - 1):
        assert row.top_pieces == tuple(tok.token_piece(i) for i in row.top_ids)
    assert token_facts(ids[0], tokenizer=tok)[0] == repr(tok.token_piece(ids[0]))
    word = tok.token_piece(ids[1])
    assert guess_token(word, tok)[0] == tok.encode(word)[0]


def test_the_attribution_speaks_the_models_tokens(loaded, pass_):
    from explorer.core.attribution.why import summary_lines, why_token

    ids, _ = pass_
    tok = loaded.tokenizer
    why = why_token(loaded.model, ids, len(ids) - 1)
    assert why.tokenizer is tok
    text = "\n".join(summary_lines(why, 5))
    assert f"{tok.token_piece(why.attribution.target)!r} at position {len(ids) - 1}" in text
    assert f"(after {tok.token_piece(ids[-1])!r})" in text
    the_models_words(text, tok)
    for row in why.layers:
        assert row.lens_top in {tok.token_piece(i) for i in range(320)}


def test_the_command_lines_attribute_and_diff_read_the_prompt_with_the_models_tokenizer(
        loaded, saved, capsys):
    from explorer.cli import main

    tok = loaded.tokenizer
    ids, gpt2_ids = tok.encode(PROMPT), gpt2_tokenizer().encode(PROMPT)
    assert len(ids) != len(gpt2_ids)
    assert main(["attribute", PROMPT, "--checkpoint", str(saved), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert f"at position {len(ids) - 1} (after {tok.token_piece(ids[-1])!r})" in out
    the_models_words(out, tok)
    assert main(["diff", PROMPT, "--a", str(saved), "--b", "mutation:no-shortcut"]) == 0
    out = capsys.readouterr().out
    assert f"prompt: {len(ids)} tokens" in out
    the_models_words(out, tok)
