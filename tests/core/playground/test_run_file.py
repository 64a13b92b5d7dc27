"""Runs saved to a file: the round trip keeps every statistic bit for bit, and a damaged
or foreign file is refused with one line."""

import dataclasses
import struct

import numpy as np
import pytest
import torch

from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.core.gpt.tokenizer import encode
from explorer.core.playground.run_file import (RunFileError, SavedRun, read_run, save_run,
                                               weights_sha256)
from explorer.core.run.generation import GenerationSettings
from explorer.core.run.passes import EVERYTHING, prompt_then_generate
from tests.core.playground.run_edit import opened, written

PROMPT = "Every effort moves you"


def make_run(model, tokens=3):
    s = GenerationSettings(max_new_tokens=tokens, greedy=False, temperature=0.9, top_k=40, seed=4)
    passes = []
    prompt_then_generate(model, encode(PROMPT), s, passes.append, keep=EVERYTHING)
    passes = [p for p in passes if hasattr(p, "views")]
    return SavedRun(PROMPT, encode(PROMPT), {"label": "tiny", "source": {"preset": "tiny"},
                                            "sha256": weights_sha256(model),
                                            "config": model.cfg.to_dict()},
                    s, passes, [{"node": "trf_blocks.0.att", "kind": "zero"}])


@pytest.fixture(scope="module")
def model():
    return build_model(preset("tiny"), seed=2)


def test_a_saved_run_reads_back_with_every_statistic_bit_for_bit(model, tmp_path):
    run = make_run(model)
    path = save_run(tmp_path / "run.gbx", run, tensor_bytes=10**6)
    back = read_run(path)
    assert back.prompt == PROMPT and back.prompt_ids == run.prompt_ids
    assert back.tokens == [p.token_id for p in run.passes[1:]] and len(back.tokens) == 3
    assert back.settings == run.settings and back.model["sha256"] == weights_sha256(model)
    assert back.interventions == run.interventions
    for a, b in zip(run.passes, back.passes):
        assert (a.step, a.token_id, a.top_ids, a.top_probs) == (b.step, b.token_id, b.top_ids, b.top_probs)
        assert np.array_equal(a.next_logits, b.next_logits)
        assert list(a.views) == list(b.views)
        for name, view in a.views.items():
            x, y = view.stats, b.views[name].stats
            for f in ("count", "mean", "std", "min", "max", "absmax", "rms", "kurtosis",
                      "frac_neg", "frac_zero", "n_nan", "n_inf", "under", "over"):
                assert getattr(x, f) == getattr(y, f), (name, f)
            for f in ("hist", "top_dims", "top_values", "token_l2"):
                assert np.array_equal(getattr(x, f), getattr(y, f)), (name, f)
            assert x.hist_range == y.hist_range and b.views[name].shape == view.shape
    kept = [v for v in back.passes[0].views.values() if v.array is not None]
    assert kept and sum(v.array.size * 2 for v in kept) <= 10**6  # float16, within the budget
    first = kept[0]
    np.testing.assert_allclose(first.array, run.passes[0].views[first.name].array, rtol=1e-3, atol=1e-3)


def test_without_a_budget_no_tensor_is_kept(model, tmp_path):
    back = read_run(save_run(tmp_path / "run.gbx", make_run(model, 1)))
    assert all(v.array is None for p in back.passes for v in p.views.values())


def test_the_sha256_names_the_weights(model):
    other = build_model(preset("tiny"), seed=3)
    assert weights_sha256(model) == weights_sha256(model) != weights_sha256(other)


def rewrite(path, change):
    """The file with its run description changed by ``change(run, header)`` (each pass's
    nodes listed in it, as version 1 did), packed again with its checksum written again
    (as anyone can: it finds damage, it is not a signature), so that the reader's other
    rules are what refuses it."""
    meta, run, tensors = opened(path.read_bytes())
    change(run, {"__metadata__": meta})
    written(path, meta, run, tensors)


@pytest.mark.parametrize("change, words", [
    (lambda r, h: r["passes"][1].update(token_id="x"), "token must be a token id"),
    (lambda r, h: r["passes"][0]["nodes"][0].__setitem__(0, "trf_blocks.0.nope"), "unknown node"),
    (lambda r, h: r["settings"].update(temperature=-1), "generation settings are wrong"),
    # a greedy run's sampling settings are checked too
    (lambda r, h: r["settings"].update(greedy=True, seed="abc"), "the sampling seed must be"),
    (lambda r, h: r["settings"].update(greedy=True, top_k=1e25), "top-k must be between"),
    # the int32 edge: what the window's boxes cannot hold, the reader refuses
    (lambda r, h: r["settings"].update(top_k=2**31), "top-k must be between 1 and 50,257"),
    (lambda r, h: r["settings"].update(seed=2**31), "the sampling seed must be between 0 and 2,147,483,647"),
    (lambda r, h: r["settings"].update(top_p=1e-7), "top-p must be a finite number in [1e-06, 1]"),
    (lambda r, h: r["settings"].update(greedy="no"), "greedy must be true or false"),
    (lambda r, h: r["settings"].update({"x\ny": 1}), "unknown: 'x\\ny'"),
    (lambda r, h: r.update(interventions_on="false"), "interventions_on must be true or false"),
    (lambda r, h: r["passes"][1].update(token_id=50257), "token id below 50,257"),
    (lambda r, h: r["passes"][0].update(step=0), "not the prompt's then steps 0, 1, 2"),
    (lambda r, h: r["model"].update(config=[1, 2]), "damaged: a field of its description is of the wrong kind"),
    (lambda r, h: r["passes"][0].pop("top_ids"), "damaged: its description lacks the field 'top_ids'"),
    (lambda r, h: r["passes"][0]["nodes"][0].__setitem__(0, "trf_blocks.40.att"),
     "'trf_blocks.40.att', a node the saved 2-block model does not have"),
    (lambda r, h: r["passes"][0]["nodes"][1].__setitem__(0, r["passes"][0]["nodes"][0][0]),
     "twice"),
    (lambda r, h: r["passes"][1].update(step=None), "not the prompt's then steps 0, 1, 2"),
    (lambda r, h: r["passes"][1].update(step=3), "not the prompt's then steps 0, 1, 2"),
    (lambda r, h: r["passes"][0].update(ids=[1, 2**40]), "token ids below 50,257"),
    (lambda r, h: r.update(prompt_ids=[50257]), "token ids below 50,257"),
    (lambda r, h: r["passes"][1].update(prob=-5.0), "prob must be a probability"),
    (lambda r, h: r["passes"][1].update(prob="high"), "prob must be a probability"),
    (lambda r, h: r["passes"][1].update(top_probs=[0.9] * len(r["passes"][1]["top_probs"])),
     "adding up to at most 1"),
    (lambda r, h: r.update(interventions=[{"kind": "melt", "node": "trf_blocks.0.att"}]),
     "intervention 1: unknown intervention 'melt'"),
    (lambda r, h: r.update(interventions=[{"kind": "zero", "node": "trf_blocks.40.att"}]),
     "intervention 1: intervention on 'trf_blocks.40.att': no such node"),
    (lambda r, h: r.update(interventions=[{"kind": "zero", "node": "trf_blocks.0.att"}] * 300),
     "300 interventions; at most 256"),
    (lambda r, h: r.update(passes=[]), "0 passes"),
    (lambda r, h: r.update(passes=r["passes"] * 2501), "5,002 passes; a run has 1 to 1,025"),
    (lambda r, h: h["__metadata__"].update(version="9"), "version '9'"),
    (lambda r, h: h["__metadata__"].update(format="other"), "not a run file"),
    (lambda r, h: r["passes"][0]["nodes"][0].__setitem__(1, [1, 2, 3, 4, 5, 6, 7, 8, 9]), "p0.nodes row 0 is not a node's row"),
    # what a pass keeps and the shapes it names are the saved model's
    (lambda r, h: r["passes"][0]["nodes"][0].__setitem__(3, [4, 32, 1]), "keeps a tensor of shape (4, 32, 1)"),
    (lambda r, h: r["passes"][0]["nodes"][0].__setitem__(1, [1, 4, 64]), "the saved model gives (1, 4, 32)"),
    (lambda r, h: r["passes"][1]["nodes"][0].__setitem__(1, [1, 4, 32]), "the saved model gives (1, 1, 32)"),
    (lambda r, h: r["model"]["config"].update(context_length=3), "the saved model reads at most 3"),
    (lambda r, h: h["__metadata__"].update(extra="1"), "its header names 'extra'"),
    (lambda r, h: r.update(token_bytes={"70000": "41"}), "token ids below the vocabulary"),
    (lambda r, h: r.update(token_bytes={"5": "zz"}), "damaged: a field of its description is of the wrong kind"),
    (lambda r, h: r.update(token_bytes=[1]), "token_bytes must be an object"),
    # fields that contradict each other
    (lambda r, h: r.update(prompt="Something else entirely"), "its prompt_ids are not its prompt's text"),
    (lambda r, h: r.update(prompt_ids=[6109, 3626, 6100, 100]), "its prompt pass reads other tokens"),
    (lambda r, h: r["passes"][1].update(ids=[1, 2, 3, 4, 5]), "step 0 reads ids that are not the prompt"),
    (lambda r, h: r["model"].pop("config"), "its model has no config"),
    # a prompt the box could not show whole (a re-sealed 15 MB one)
    (lambda r, h: r.update(prompt="x" * 1_000_001), "at most 1,000,000 characters"),
])
def test_a_tampered_run_file_is_refused_in_one_line(model, tmp_path, change, words):
    path = save_run(tmp_path / "run.gbx", make_run(model, 1))
    rewrite(path, change)
    with pytest.raises(ValueError) as caught:
        read_run(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert str(path) in str(caught.value)


def retensor(path, change):
    """The file with its tensors (under version 1's names) changed by
    ``change(tensors)``, its description kept, packed again with its checksum."""
    meta, run, tensors = opened(path.read_bytes())
    change(tensors)
    written(path, meta, run, tensors)


def scalar(name, value):
    from explorer.core.playground.run_checks import SCALARS

    def change(t):
        t["p0.n0.scalars"][SCALARS.index(name)] = value
    return change


def put(key, value):
    return lambda t: t.__setitem__(key, value)


@pytest.mark.parametrize("change, words", [
    (put("p0.n0.top_dims", torch.tensor([-1, 2, 3, 4, 5])), "top_dims must be distinct positions below 32"),
    (put("p0.n0.top_dims", torch.tensor([10**12, 2, 3, 4, 5])), "top_dims must be distinct positions below 32"),
    (put("p0.n0.top_dims", torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])), "p0.top_dims is missing or not int64"),
    (put("p0.n0.top_dims", torch.tensor([1, 1, 3, 4, 5])), "top_dims must be distinct positions"),
    (put("p0.n0.top_values", torch.tensor([1.0, 2.0])), "p0.top_values holds fewer values than its nodes' rows say"),
    (scalar("count", float("nan")), "count is nan; a count from 0 to 128"),
    (scalar("count", float("inf")), "count is inf"),
    (scalar("count", 127.0), "counts 127 values; its node has 128"),
    (scalar("n_nan", 1e300), "n_nan is 1e+300"),
    (scalar("n_inf", -1.0), "n_inf is -1.0"),
    (scalar("under", 2.5), "under is 2.5"),
    (scalar("over", 100.0), "add up to more than its 128 values"),
    (put("p0.n0.hist", torch.zeros(20_000, dtype=torch.int64)), "20,000 bins; at most 10,000"),
    (put("p0.n0.tensor", torch.zeros(1, 4, 31, dtype=torch.float16)), "p0.tensors holds fewer values"),
    (put("p1.logits", torch.zeros(3)), "must be a float32 vector of 50,257 logits"),
    (put("p1.logits", torch.full((50257,), float("nan"))), "pass 1's logits hold NaN"),
    (scalar("min", 1e9), "statistics contradict each other (min 1e+09"),
    (scalar("std", -1.0), "statistics contradict each other"),
])
def test_a_run_whose_numbers_lie_is_refused_in_one_line(model, tmp_path, change, words):
    """Each rule on the tensors, one at a time, from a genuine run (its checksum written
    again, so that the rule is what refuses it)."""
    path = save_run(tmp_path / "run.gbx", make_run(model, 1), tensor_bytes=10**6)
    read_run(path)  # genuine: opens
    retensor(path, change)
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def test_a_byte_changed_anywhere_is_refused(model, tmp_path):
    """One byte changed at a time — in the header, the description, the statistics and the
    kept tensors, the checksum itself — and every copy is refused in one line."""
    import random
    path = save_run(tmp_path / "run.gbx", make_run(model, 1), tensor_bytes=10**6)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    rng = random.Random(5)
    at = data.index(b'"checksum"')
    places = ([rng.randrange(8, 8 + n) for _ in range(40)]  # the header and its description
              + [rng.randrange(8 + n, len(data)) for _ in range(60)]  # every tensor's bytes
              + [at + 12, at + 40, 8 + n - 1])  # the checksum's own digits; the padding
    refused = 0
    for place in places:
        damaged = bytearray(data)
        damaged[place] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(damaged))
        with pytest.raises(ValueError) as caught:
            read_run(path)
        assert "\n" not in str(caught.value) and str(path) in str(caught.value)
        refused += 1
    assert refused == len(places) == 103


def test_a_run_saved_without_a_checksum_opens_with_a_notice(model, tmp_path):
    path = save_run(tmp_path / "run.gbx", make_run(model, 1))
    assert read_run(path).notice == ""
    rewrite(path, lambda r, h: h["__metadata__"].pop("checksum"))
    back = read_run(path)
    assert back.notice.startswith("saved without a checksum") and len(back.tokens) == 1


def test_a_description_changed_without_its_checksum_is_refused(model, tmp_path):
    path = save_run(tmp_path / "run.gbx", make_run(model, 1))
    raw = bytearray(path.read_bytes())
    at = raw.index(b"Every effort")
    raw[at:at + 5] = b"Evary"  # still valid JSON, still a run: only the checksum sees it
    path.write_bytes(bytes(raw))
    with pytest.raises(RunFileError, match="the checksum does not match"):
        read_run(path)


def test_a_checkpoint_or_a_truncated_file_is_not_a_run(model, tmp_path):
    from explorer.core.weights.checkpoints import save_checkpoint
    checkpoint = save_checkpoint(model, tmp_path / "model.safetensors")
    with pytest.raises(RunFileError, match="not a run file"):
        read_run(checkpoint)
    path = save_run(tmp_path / "run.gbx", make_run(model, 1))
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError) as caught:
        read_run(path)
    assert "\n" not in str(caught.value)
    torch.manual_seed(0)


def test_a_run_saved_with_attention_opened_reads_back_with_its_steps(model, tmp_path):
    from explorer.core.run.opened import attention_input, inside_names, open_attention
    run = make_run(model, tokens=1)
    prompt = run.passes[0]
    prompt.views.update(open_attention(model, prompt.views[attention_input(1, "pre")].array, 1))
    back = read_run(save_run(tmp_path / "open.gbx", run, tensor_bytes=10**7))
    for name in inside_names(1):
        assert back.passes[0].views[name].shape == prompt.views[name].shape
        assert back.passes[0].views[name].stats.n_inf == prompt.views[name].stats.n_inf
    masked = back.passes[0].views["trf_blocks.1.att.masked_scores"].array
    assert np.isneginf(masked).sum() == 4 * 4 * 3 // 2  # the mask's −inf kept as −inf


def test_a_saved_run_replays_token_for_token_with_its_interventions(model, tmp_path):
    """A run is a record: replayed with its tokens forced (a branch's chosen token among
    them), the same model and its interventions give every step's token and probability
    again; without the interventions, or with another model, the first step that departs
    is named."""
    from explorer.core.experiments.interventions import applied, from_dict, resolve
    from explorer.core.playground.run_agrees import replay_difference
    s = GenerationSettings(max_new_tokens=4, greedy=False, temperature=0.9, top_k=40, seed=4)
    ids = encode(PROMPT)
    specs = [from_dict({"node": "trf_blocks.0.att", "kind": "zero"})]

    def run(m, forced, interventions=()):
        passes = []
        with applied(m, resolve(m, list(interventions), ids)) if interventions else _nothing():
            prompt_then_generate(m, ids, s, passes.append, keep=EVERYTHING, forced=forced)
        return [p for p in passes if hasattr(p, "views")]

    # a run whose third token was chosen by the user (a branch), made with the intervention
    sampled = [p.token_id for p in run(model, None, specs)[1:]]
    tokens = sampled[:2] + [13] + sampled[3:]
    made = run(model, tokens, specs)
    saved = SavedRun(PROMPT, ids, {"label": "tiny", "sha256": weights_sha256(model),
                                  "config": model.cfg.to_dict()}, s, made,
                     [i.to_dict() for i in specs])
    back = read_run(save_run(tmp_path / "branch.gbrun", saved))
    assert back.tokens == tokens
    again = [from_dict(d) for d in back.interventions]
    assert replay_difference(back, run(model, back.tokens, again)) is None  # token for token
    missing = replay_difference(back, run(model, back.tokens))  # the intervention left out
    assert missing.startswith("step 0: the token") and "not the same model, settings or interventions" in missing
    other = build_model(preset("tiny"), seed=9)
    assert replay_difference(back, run(other, back.tokens, again)).startswith("step 0")


def _nothing():
    import contextlib
    return contextlib.nullcontext()


@pytest.mark.parametrize("greedy, tensor_bytes", [(True, 0), (True, 10**6), (False, 10**6)])
def test_a_genuine_run_reopens_token_for_token(model, tmp_path, greedy, tensor_bytes):
    """Greedy or sampled, with or without its tensors: read back whole (its checksum
    good, no notice) and replayed with its tokens forced, every step agrees."""
    from explorer.core.playground.run_agrees import replay_difference
    s = GenerationSettings(max_new_tokens=5, greedy=greedy, temperature=0.8, top_k=20, seed=11)
    ids = encode(PROMPT)
    made = []
    prompt_then_generate(model, ids, s, made.append, keep=EVERYTHING)
    made = [p for p in made if hasattr(p, "views")]
    saved = SavedRun(PROMPT, ids, {"label": "tiny", "sha256": weights_sha256(model),
                                  "config": model.cfg.to_dict()}, s, made)
    back = read_run(save_run(tmp_path / "run.gbrun", saved, tensor_bytes))
    assert back.notice == "" and back.tokens == [p.token_id for p in made[1:]]
    assert any(v.array is not None for v in back.passes[0].views.values()) == bool(tensor_bytes)
    again = []
    prompt_then_generate(model, ids, back.settings, again.append, keep=EVERYTHING,
                         forced=back.tokens)
    assert replay_difference(back, [p for p in again if hasattr(p, "views")]) is None


def test_a_qwen3_run_with_its_own_vocabulary_reads_back_with_its_block_and_its_pieces(tmp_path):
    """A Qwen3 block with a tokenizer of its own (320 tokens): the file keeps the bytes of
    the ids it holds, so it reads back with the block's own nodes and its own pieces,
    without the tokenizer; an id beyond its vocabulary is refused."""
    from explorer.core.weights.tokenizers_files import tokenizer_for
    from tests.llama_folder import write_tokenizer

    write_tokenizer(tmp_path, 320)
    cfg = preset("qwen3-tiny", vocab_size=320)
    model = build_model(cfg, seed=1)
    model.tokenizer = tok = tokenizer_for(tmp_path)
    ids = tok.encode("Every effort moves you, and the picture")
    assert max(ids) < 320 and ids != encode("Every effort moves you, and the picture")
    s = GenerationSettings(max_new_tokens=3, stop_at_eot=False)
    passes = []
    prompt_then_generate(model, ids, s, passes.append, keep=EVERYTHING)
    passes = [p for p in passes if hasattr(p, "views")]
    run = SavedRun("Every effort moves you, and the picture", ids,
                   {"label": "qwen3", "source": {"preset": "qwen3-tiny"},
                    "sha256": weights_sha256(model), "config": cfg.to_dict()},
                   s, passes, tokenizer=tok)
    back = read_run(save_run(tmp_path / "run.gbrun", run))
    assert back.config.family.name == "llama" and back.config.qk_norm
    assert "trf_blocks.0.ff.silu" in back.passes[0].views
    assert back.passes[0].pieces == [tok.token_piece(i) for i in ids]
    assert back.passes[1].top_pieces == tuple(tok.token_piece(i) for i in passes[1].top_ids)
    assert back.tokenizer.decode(back.tokens) == tok.decode(back.tokens)
    with pytest.raises(ValueError, match="reads no text"):
        back.tokenizer.encode("anything")
    gpt2 = read_run(save_run(tmp_path / "gpt2.gbrun", make_run(build_model(preset("tiny")), 1)))
    assert gpt2.tokenizer.encode(PROMPT) == encode(PROMPT)  # GPT-2's: no bytes kept

    path = tmp_path / "beyond.gbrun"
    save_run(path, run)
    rewrite(path, lambda r, h: r["passes"][0]["ids"].__setitem__(0, 320))
    with pytest.raises(RunFileError, match="token ids below 320"):
        read_run(path)


def test_the_header_grows_by_a_few_entries_a_pass_not_by_its_nodes(model, tmp_path):
    """A generated step adds eight tensors to the header, however many nodes it has
    (every node of the tiny block, 50 with attention's steps): a long run's header stays
    far under the reader's limit."""
    def header(tokens):
        path = save_run(tmp_path / f"{tokens}.gbrun", make_run(model, tokens), 10**6)
        n, = struct.unpack("<Q", path.read_bytes()[:8])
        return n, len(read_run(path).passes[-1].views)

    (short, nodes), (long, _) = header(2), header(6)
    per_pass = (long - short) / 4
    assert nodes >= 28 and per_pass < 1_500, per_pass  # ~63 bytes a node before: 5 entries each


def test_a_recomputed_run_reopens_with_each_step_whole_and_replays(model, tmp_path):
    """Recompute all: each step is the whole pass over its context, (1, T + k, C); saved
    and read back, every step keeps its whole shape and the run replays token for token."""
    from explorer.core.playground.run_agrees import replay_difference
    s = GenerationSettings(max_new_tokens=3, recompute=True)
    made = []
    prompt_then_generate(model, encode(PROMPT), s, made.append, keep=EVERYTHING)
    made = [p for p in made if hasattr(p, "views")]
    saved = SavedRun(PROMPT, encode(PROMPT), {"label": "tiny", "sha256": weights_sha256(model),
                                             "config": model.cfg.to_dict()}, s, made)
    back = read_run(save_run(tmp_path / "whole.gbrun", saved, 10**6))
    t = len(encode(PROMPT))
    assert [p.whole for p in back.passes] == [False, True, True, True]
    assert [p.views["trf_blocks.1.att.attn_weights"].shape for p in back.passes[1:]] == \
        [(1, 4, t + k, t + k) for k in range(3)]
    again = []
    prompt_then_generate(model, encode(PROMPT), back.settings, again.append, keep=EVERYTHING,
                         forced=back.tokens)
    assert replay_difference(back, [p for p in again if hasattr(p, "views")]) is None


def test_a_kept_attention_pattern_that_looks_ahead_is_refused(model, tmp_path):
    path = save_run(tmp_path / "run.gbrun", make_run(model, 1), tensor_bytes=10**6)
    meta, run, tensors = opened(path.read_bytes())
    j = [n[0] for n in run["passes"][0]["nodes"]].index("trf_blocks.0.att.attn_weights")
    tensors[f"p0.n{j}.tensor"][0, 0, 0, 3] = 0.5  # the first token attends to the fourth
    written(path, meta, run, tensors)
    with pytest.raises(RunFileError, match="trf_blocks.0.att.attn_weights gives weight to "
                                           "later tokens: not a causal attention pattern"):
        read_run(path)


def test_a_prompt_longer_than_a_run_keeps_is_not_saved(model, tmp_path):
    run = make_run(model, 1)
    run.prompt = "x" * 1_000_001
    with pytest.raises(RunFileError, match="not saved: the prompt has 1,000,001 characters"):
        save_run(tmp_path / "long.gbrun", run)
    assert not (tmp_path / "long.gbrun").exists()
