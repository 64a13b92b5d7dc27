import re

import numpy as np
import pytest

from explorer.core.gpt.tokenizer import gpt2_tokenizer
import torch

from explorer.core.run.capture import Capture
from explorer.core.gpt.config import preset
from explorer.core.lessons.explain import explain
from explorer.core.lessons.kinds import KIND_LESSONS
from explorer.core.gpt.build import build_model
from explorer.core.gpt.nodes import all_hook_names, node_for_hook
from explorer.core.gpt.tokenizer import encode, token_piece


@pytest.fixture(scope="module")
def captured():
    model = build_model(preset("tiny"), seed=5)
    ids = encode("Every effort moves you")
    with torch.inference_mode(), Capture(model, tensors=True, attention=True) as cap:
        model(torch.tensor([ids]))
    return cap.views(), [token_piece(i) for i in ids]


def numbers(text):
    return [float(x) for x in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", text)]


def test_every_node_has_an_explanation_and_a_mistake(captured):
    views, pieces = captured
    for name in all_hook_names(preset("tiny")):
        e = explain(name, views, pieces)
        assert e.what and e.mistake and "shape" in e.here


def test_norm_reports_the_token_std_before_and_after(captured):
    views, pieces = captured
    e = explain("trf_blocks.0.norm1", views, pieces)
    before = views["drop_emb"].array[0, -1].std()
    after = views["trf_blocks.0.norm1"].array[0, -1].std()
    assert f"brought token ' you' from std {before:.3g} to {after:.3g}" in e.here


def test_linear_widening_and_ffn_mistake(captured):
    views, pieces = captured
    assert "widened each token from 32 to 128 values" in explain("trf_blocks.1.ff.layers.0", views, pieces).here
    assert "does not change the embedding size" in explain("trf_blocks.1.ff", views, pieces).mistake


def test_add_reports_branch_to_shortcut_ratio(captured):
    views, pieces = captured
    e = explain("trf_blocks.0.add1", views, pieces, position=1)
    branch = views["trf_blocks.0.drop1"].array[0, 1]
    total = views["trf_blocks.0.add1"].array[0, 1]
    ratio = np.linalg.norm(branch) / np.linalg.norm(total - branch)
    assert f"{ratio:.2g}× the shortcut's size" in e.here and "' effort'" in e.here


def test_dropout_in_eval_mode_changed_nothing(captured):
    views, pieces = captured
    assert "changed nothing here (eval mode)" in explain("trf_blocks.1.drop2", views, pieces).here


def test_attention_and_logits_name_real_tokens(captured):
    views, pieces = captured
    e = explain("trf_blocks.0.att.attn_weights", views, pieces)
    weights = views["trf_blocks.0.att.attn_weights"].array[0][:, -1, :].mean(0)
    assert repr(pieces[int(np.argmax(weights))]) in e.here
    top = int(np.argmax(views["out_head"].array[0, -1]))
    from explorer.core.gpt.tokenizer import token_piece
    assert f"{token_piece(top)!r} (id {top})" in explain("out_head", views, pieces).here


def test_without_a_capture_it_says_to_run_a_prompt():
    e = explain("trf_blocks.0.norm1", {}, [])
    assert "Run a prompt" in e.here and e.what.startswith(KIND_LESSONS[node_for_hook("trf_blocks.0.norm1").kind].what[:20])


def test_gelu_reports_the_share_of_negative_inputs(captured):
    views, pieces = captured
    x = views["trf_blocks.1.ff.layers.0"].array
    share = 100 * float((x < 0).mean())
    assert f"{share:.0f}% of its inputs (the 4 tokens × 128 = 512 values) were negative" in \
        explain("trf_blocks.1.ff.layers.1", views, pieces).here


def test_post_ln_norms_read_their_own_inputs():
    model = build_model(preset("tiny", norm_position="post"), seed=5)
    ids = encode("Every effort moves you")
    with torch.inference_mode(), Capture(model, tensors=True) as cap:
        model(torch.tensor([ids]))
    views, pieces = cap.views(), [token_piece(i) for i in ids]
    e = explain("trf_blocks.1.norm1", views, pieces, norm_position="post")
    before = views["trf_blocks.1.add1"].array[0, -1].std()  # Post-LN: norm1 follows add1
    assert f"from std {before:.3g}" in e.here
    e2 = explain("trf_blocks.1.norm1", views, pieces, norm_position="pre")
    assert e2.here != e.here  # the Pre-LN reading would take the previous block's output


@pytest.mark.parametrize("name", ["tiny", "gpt2-small", "gpt2-medium", "gpt2-xl"])
def test_every_number_in_the_texts_comes_from_the_loaded_config(name):
    cfg = preset(name)
    c, hidden = f"{cfg.emb_dim:,}", f"{cfg.hidden_dim:,}"
    ff = explain("trf_blocks.0.ff", {}, [], cfg=cfg, tokenizer=gpt2_tokenizer())
    assert f"{c} in, {c} out, only {hidden} inside" in ff.mistake
    assert f"from {c} to {hidden} values" in ff.what
    att = explain("trf_blocks.0.att", {}, [], cfg=cfg, tokenizer=gpt2_tokenizer())
    assert f"{cfg.n_heads} heads of {cfg.head_dim} values" in att.what
    assert f"({cfg.vocab_size:,} of them)" in explain("out_head", {}, [], cfg=cfg, tokenizer=gpt2_tokenizer()).what
    assert f"({cfg.drop_rate:g})" in explain("trf_blocks.0.drop1", {}, [], cfg=cfg, tokenizer=gpt2_tokenizer()).what
    for node in all_hook_names(cfg)[:20]:
        e = explain(node, {}, [], cfg=cfg, tokenizer=gpt2_tokenizer())
        text = e.what + e.mistake
        assert "{" not in text
        other = {"768", "3,072", "1,024", "4,096"} - {c, hidden, f"{cfg.context_length:,}"}
        assert not [n for n in other if re.search(rf"\b{n}\b", text)], (name, node, text)


def test_the_seeds_analogies_and_dropouts_purpose():
    assert "on one scale" in explain("trf_blocks.0.norm1", {}, []).what
    assert "weighted score" in explain("trf_blocks.0.ff.layers.0", {}, []).what
    dropout = explain("trf_blocks.0.drop1", {}, []).what
    assert "overfitting" in dropout and "does nothing" in dropout


def test_attentions_matrices_say_how_many_queries_meet_how_many_keys():
    """The prompt: T query rows × T keys, the mask's share; a generated step from the KV
    cache: its one query row against every key so far, said so."""
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from explorer.core.lessons.explain import explain
    from explorer.core.run.opened import attention_input, open_attention
    from explorer.core.run.passes import Keep, run_prompt
    model = build_model(preset("tiny"), seed=2).eval()
    ids = [464, 3290, 318, 257, 1310]
    result = run_prompt(model, ids, Keep(inside=True))
    pieces = result.pieces
    said = explain("trf_blocks.0.att.masked_scores", result.views, pieces, cfg=model.cfg, tokenizer=gpt2_tokenizer()).here
    assert "5 query rows × 5 keys per head" in said and "15 of 25 scores" in said
    x = result.views[attention_input(0, "pre")].array
    step = open_attention(model, x, 0, last_only=True)
    said = explain("trf_blocks.0.att.attn_weights", step, pieces, cfg=model.cfg, tokenizer=gpt2_tokenizer()).here
    assert "one query row — its own token — against the 5 keys so far" in said
    assert "attends most to" in said


def test_a_square_projection_keeps_the_width_and_says_so():
    """W_query maps 32 values to 32: it neither widens nor narrows ("narrowed from 32
    to 32" was said)."""
    model = build_model(preset("tiny"), seed=5)
    ids = encode("Every effort moves you")
    with torch.inference_mode(), Capture(model, tensors=True, attention=True, inside=True) as cap:
        model(torch.tensor([ids]))
    here = explain("trf_blocks.0.att.W_query", cap.views(), [token_piece(i) for i in ids]).here
    assert "kept each token at 32 values, each a new mix of all 32" in here
    assert "narrowed" not in here and "widened" not in here


def test_shared_keys_are_said_a_copy_not_the_split_into_heads():
    """Keys shared (repeat_interleave) is explained as a copy for the group's query heads,
    never as the per-head split (a Llama-family block's step: GPT-2's has none)."""
    from explorer.core.gpt.nodes import order_of
    from explorer.core.run.passes import Keep, run_prompt
    model = build_model(preset("llama-tiny"), seed=0)
    order = order_of(model.cfg)
    ids = [5, 6, 7, 8]
    views = run_prompt(model, ids, Keep(inside=True)).views
    shared = explain("trf_blocks.0.att.keys_repeated", views, ["a"] * 4, norm_position=order,
                     cfg=model.cfg, tokenizer=model.tokenizer)
    assert shared.what.startswith("Copies each of the 2 key heads for every query head of its "
                                  "group (query heads 0–1 read key/value head 0, 2–3 head 1)")
    assert "Splits" not in shared.what and "split" not in shared.what.split(".")[0]
    assert "the KV cache keeps only the 2 key heads, not 4" in shared.mistake


@pytest.mark.parametrize("name, norm", [("tiny", "pre"), ("tiny", "post"), ("llama-tiny", "pre")])
def test_masked_scores_statistics_say_the_infinities_they_leave_out(name, norm):
    """On GPT-2 Pre-LN, Post-LN and a Llama block: the masked scores' statistics are of
    the finite values, and the sentence says how many −inf it left out (counted here)."""
    from explorer.core.gpt.nodes import order_of
    from explorer.core.run.passes import Keep, run_prompt
    model = build_model(preset(name, norm_position=norm), seed=0)
    order = order_of(model.cfg)
    views = run_prompt(model, [5, 6, 7, 8], Keep(inside=True)).views
    masked = views["trf_blocks.0.att.masked_scores"].array
    finite, infinite = int(np.isfinite(masked).sum()), int(np.isinf(masked).sum())
    assert infinite == 4 * 6 and finite == 4 * 10  # 4 heads: 6 masked of 16 each
    said = explain("trf_blocks.0.att.masked_scores", views, ["a"] * 4, norm_position=order,
                   cfg=model.cfg, tokenizer=model.tokenizer).here
    assert f"std {masked[np.isfinite(masked)].std():.3g}" in said
    assert f"over its {finite} finite values; its {infinite} −inf (the masked scores) are " \
           "left out" in said


@pytest.mark.parametrize("name", ["tiny", "llama-tiny"])
def test_the_final_norm_says_what_it_did_to_the_token_from_the_last_blocks_output(name):
    """The final norm reads the last block's output: its Explain says the token's std (or
    root mean square) before and after, numbers computed here."""
    from explorer.core.gpt.nodes import block_output, block_hook_name, order_of
    from explorer.core.run.passes import run_prompt
    model = build_model(preset(name), seed=0)
    order = order_of(model.cfg)
    views = run_prompt(model, [5, 6, 7, 8]).views
    said = explain("final_norm", views, ["a", "b", "c", "d"], norm_position=order,
                   cfg=model.cfg, tokenizer=model.tokenizer).here
    before = views[block_hook_name(model.cfg.n_layers - 1, block_output(order))].array[0, -1]
    after = views["final_norm"].array[0, -1]
    if name == "tiny":
        assert f"It brought token 'd' from std {before.std():.3g} to {after.std():.3g}." in said
    else:
        rms = float(np.sqrt(np.mean(before.astype(np.float64) ** 2)))
        assert f"It brought token 'd' from root mean square {rms:.3g} to" in said


@pytest.mark.parametrize("name, norm", [("tiny", "pre"), ("tiny", "post"), ("llama-tiny", "pre")])
def test_the_chapters_points_are_said_on_every_block(name, norm):
    """The chapter's points, said in Explain on GPT-2 Pre-LN, Post-LN and a Llama block:
    the feed-forward's shape comes from its Linear layers' sizes (its forward does nothing
    special), an add keeps the shape so that blocks stack, and the non-linearity must
    give a useful gradient."""
    from explorer.core.gpt.nodes import Role, block_hook_name, order_of, role
    from explorer.core.run.passes import run_prompt
    model = build_model(preset(name, norm_position=norm), seed=0)
    order = order_of(model.cfg)
    views = run_prompt(model, [5, 6, 7]).views

    def mistake(key):
        return explain(block_hook_name(0, key), views, ["a", "b", "c"], norm_position=order,
                       cfg=model.cfg, tokenizer=model.tokenizer).mistake
    assert "the shapes come from" in mistake("ff") and "Linear" in mistake("ff")
    assert "which is what lets blocks stack" in mistake("add2")
    assert "a non-linearity must give a useful gradient" in mistake(role(order, Role.ACTIVATION))
