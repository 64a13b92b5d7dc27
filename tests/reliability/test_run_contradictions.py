"""A saved run of any family is held to its own model config and to the numbers it kept,
field by field, as GPT-2's are: a context its cached steps overrun, q/k norms its config
has and its attention steps lack (or the reverse), a rotary base or head size its kept
queries were not turned by, a probability that is not its token's under the logits it
kept, a prompt pass that predicts another token than its most probable. Each is the
genuine run with one field changed and the file sealed again; the genuine run opens."""

import dataclasses

import pytest

from explorer.core.gpt.build import build_model
from explorer.core.gpt.config import preset
from explorer.core.gpt.tokenizer import encode
from explorer.core.playground.run_file import RunFileError, SavedRun, read_run, save_run, weights_sha256
from explorer.core.run.generation import GenerationSettings
from explorer.core.run.passes import EVERYTHING, prompt_then_generate
from tests.core.playground.test_run_file import rewrite

PROMPT = "Every effort moves you"


def _run(name: str, recompute: bool = False) -> SavedRun:
    model = build_model(preset(name), seed=2)
    settings = GenerationSettings(max_new_tokens=3, greedy=True, recompute=recompute)
    passes = []
    prompt_then_generate(model, encode(PROMPT), settings, passes.append,
                         keep=dataclasses.replace(EVERYTHING, inside=True))
    return SavedRun(PROMPT, encode(PROMPT), {"label": name, "source": {"preset": name},
                                             "sha256": weights_sha256(model),
                                             "config": model.cfg.to_dict()},
                    settings, [p for p in passes if hasattr(p, "views")], [])


@pytest.fixture(scope="module", params=["llama-tiny", "qwen3-tiny", "gemma3-tiny", "olmo3-tiny"])
def saved(request):
    return request.param, _run(request.param)


def _refused(tmp_path, run, change) -> str:
    path = save_run(tmp_path / "run.gbx", run, tensor_bytes=10**7)
    read_run(path)  # genuine: opens
    rewrite(path, change)
    with pytest.raises(RunFileError) as refused:
        read_run(path)
    text = str(refused.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    return text[len(f"{path}: "):]


def test_a_run_whose_steps_slide_past_its_context_opens(tmp_path):
    """Past the context each step reads its last context_length tokens (the window
    slides): a run's steps may hold more ids than its context, on every family."""
    for name in ("llama-tiny", "qwen3-tiny", "tiny"):
        model = build_model(preset(name, context_length=5), seed=2)
        passes = []
        prompt_then_generate(model, encode(PROMPT), GenerationSettings(max_new_tokens=4, greedy=True),
                             passes.append, keep=EVERYTHING)
        run = SavedRun(PROMPT, encode(PROMPT), {"label": name, "sha256": weights_sha256(model),
                                                "config": model.cfg.to_dict()},
                       GenerationSettings(max_new_tokens=4, greedy=True),
                       [p for p in passes if hasattr(p, "views")], [])
        back = read_run(save_run(tmp_path / f"{name}.gbx", run, tensor_bytes=10**7))
        assert len(back.passes[-1].ids) == 8 and back.config.context_length == 5


def test_a_steps_keys_are_the_tokens_it_read_up_to_the_context(tmp_path):
    """A step that keeps its attention pattern reads every token so far, or the last
    context's worth: fewer keys than that is refused."""
    from tests.core.playground.test_long_runs import long_run

    def fewer(r, h):
        for node in r["passes"][3]["nodes"]:  # the scores and the pattern: one row of 6 keys
            if len(node[1]) == 4 and node[1][2:] == [1, 6]:
                node[1] = [*node[1][:3], 5]
    path = save_run(tmp_path / "run.gbx", long_run("tiny", 5, kept=False))
    read_run(path)
    rewrite(path, fewer)
    with pytest.raises(RunFileError) as refused:
        read_run(path)
    assert "has the shape (1, 4, 1, 5); the saved model gives (1, 4, 1, 6)" in str(refused.value)


def test_q_k_norms_the_config_has_and_the_steps_lack_are_refused(tmp_path):
    said = _refused(tmp_path, _run("llama-tiny"),
                    lambda r, h: r["model"]["config"].update(qk_norm=True))
    assert said == ("pass 0 keeps attention's steps of block 0 without "
                    "'trf_blocks.0.att.k_norm', which its saved model (qk_norm True) computes")
    said = _refused(tmp_path, _run("qwen3-tiny"),
                    lambda r, h: r["model"]["config"].update(qk_norm=False))
    assert "'trf_blocks.0.att.k_norm', a node the saved 2-block model does not have" in said


def test_another_rotary_base_is_refused_from_the_kept_queries(tmp_path, saved):
    name, run = saved
    said = _refused(tmp_path, run, lambda r, h: r["model"]["config"].update(rope_base=12345.0))
    block = 2 if name == "gemma3-tiny" else 0  # Gemma's sliding blocks turn by their own θ
    assert said.startswith(f"pass 0's trf_blocks.{block}.att.")
    assert said.endswith("is not its input turned by its saved model's rotation (θ 12345, "
                         f"head size {preset(name).head_dim})")


def test_another_head_size_is_refused(tmp_path, saved):
    _name, run = saved
    said = _refused(tmp_path, run, lambda r, h: r["model"]["config"].update(head_size=4))
    assert said.startswith("pass 0's trf_blocks.0.att.W_query has the shape")


def test_a_probability_that_is_not_its_tokens_is_refused(tmp_path, saved):
    _name, run = saved
    said = _refused(tmp_path, run, lambda r, h: r["passes"][1].update(prob=0.5))
    assert said.startswith("pass 1's probability 0.5 is not its token's under its own logits (")


def test_a_prompt_pass_that_predicts_another_token_is_refused(tmp_path):
    """Its probability kept as the top one's, its token another: the logits tell."""
    run = _run("llama-tiny")
    first = run.passes[0]
    other = first.top_ids[1]

    def change(r, h):
        r["passes"][0].update(token_id=other)
    said = _refused(tmp_path, run, change)
    assert said.startswith("pass 0's probability ") and "under its own logits" in said


def test_top_tokens_that_are_not_the_most_probable_are_refused(tmp_path):
    run = _run("qwen3-tiny")

    def change(r, h):
        p = r["passes"][0]
        p["top_ids"] = [p["top_ids"][1], p["top_ids"][0], *p["top_ids"][2:]]
        p["top_probs"] = [p["top_probs"][1], p["top_probs"][0], *p["top_probs"][2:]]
    said = _refused(tmp_path, run, change)
    assert said == "pass 0's top tokens are not the most probable under its own logits"


def test_a_recomputed_run_past_its_context_opens_and_its_whole_steps_are_checked(tmp_path):
    """A run whose steps slide the window (recomputed whole) is genuine at every length."""
    run = _run("olmo3-tiny", recompute=True)
    read_run(save_run(tmp_path / "run.gbx", run, tensor_bytes=10**7))
    said = _refused(tmp_path, run, lambda r, h: r["model"]["config"].update(context_length=4))
    assert said == "its step 1 has 5 tokens; the saved model reads at most 4"


def _patched_run(tmp_path, checkpoint: list[str]):
    import json

    from explorer.cli import main
    (tmp_path / "iv.json").write_text(json.dumps([{"kind": "patch", "node": "trf_blocks.0.att",
                                                   "prompt": "Hello there"}]))
    path = tmp_path / "r.gbrun"
    assert main(["generate", PROMPT, *checkpoint, "--max-new-tokens", "2", "--intervene",
                 str(tmp_path / "iv.json"), "--save-run", str(path)]) == 0
    rewrite(path, lambda r, h: r["interventions"][0].update(prompt="word " * 100))
    return path


def test_a_patch_prompt_past_the_context_is_refused_when_read(tmp_path, capsys):
    path = _patched_run(tmp_path, ["--preset", "tiny"])
    with pytest.raises(RunFileError) as refused:
        read_run(path)
    assert str(refused.value) == (f"{path}: intervention 1's prompt has 101 tokens; the saved "
                                  "model reads at most 64")


@pytest.mark.slow  # the window offscreen, a model folder written
def test_a_replay_that_cannot_run_shows_the_run_as_saved_without_a_traceback(tmp_path, capsys):
    """A run of a vocabulary of its own keeps no tokenizer that reads text: its patch
    prompt is measured when the replay runs it, and the replay's refusal is one line."""
    transformers = pytest.importorskip("transformers")
    from explorer.cli import main
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    folder = tmp_path / "qwen3"
    small_qwen3(transformers).save_pretrained(folder)
    write_tokenizer(folder, 320)
    path = _patched_run(tmp_path, ["--checkpoint", str(folder)])
    assert read_run(path).interventions[0]["prompt"] == "word " * 100
    capsys.readouterr()
    code = main(["--checkpoint", str(folder), "--open-run", str(path), "--screenshot",
                 str(tmp_path / "shot.png")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "an intervention's prompt has " in err and "the model reads at most 64" in err
