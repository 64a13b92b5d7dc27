"""A model folder's files are untrusted input. Its tokenizer.json is run by a library of
its own: a pre-tokenizer whose regex backtracks past its limit makes the library panic (a
Rust panic, which is no Python Exception) — the commands say so in one line naming the
file, the window under the prompt, staying up with what was typed kept. Its config.json
may name a family the explorer does not open, or carry a byte-order mark; its weights
may hold one parameter under two names."""

import json

import pytest

transformers = pytest.importorskip("transformers")

BACKTRACKS = "a" * 40 + "b"


def panicking_folder(tmp_path):
    from tests.llama_folder import _trained
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    spec = json.loads(_trained(320))
    spec["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a|a)*(a|a)*(a|a)*$"},
                             "behavior": "Isolated", "invert": False}
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return tmp_path


def test_a_panicking_tokenizer_is_one_line_in_every_command(tmp_path, capsys):
    from explorer.cli import main
    folder = panicking_folder(tmp_path)
    for command in (["tokenize", BACKTRACKS], ["generate", BACKTRACKS, "--max-new-tokens", "1"],
                    ["inspect", BACKTRACKS]):
        assert main([*command, "--checkpoint", str(folder)]) == 2, command
        err = [line for line in capsys.readouterr().err.splitlines()
               if line.startswith("gpt-explorer")]
        assert len(err) == 1 and f"{folder / 'tokenizer.json'}: its tokenizer failed on this " \
            "text (Onig: Regex search error: retry-limit-in-match over)" in err[0], err
    assert main(["tokenize", "hello", "--checkpoint", str(folder)]) == 0  # other text: fine


def test_the_window_says_it_under_the_prompt_and_stays_up(qtbot, tmp_path):
    from explorer.core.sources import ModelSpec, open_model
    from tests.ui.alone import Alone
    folder = panicking_folder(tmp_path)
    alone = Alone(qtbot, loaded=open_model(ModelSpec(checkpoint=str(folder))))
    panel = alone.prompt
    panel.prompt.setPlainText(BACKTRACKS)
    panel.update_chips()
    assert "its tokenizer failed on this text" in panel.token_count.text()
    assert panel.request_run() is False and panel.prompt.toPlainText() == BACKTRACKS
    panel.prompt.setPlainText("hello")
    panel.update_chips()
    assert panel.token_count.text().startswith(f"{len(panel.token_ids)} tokens")


def test_swish_is_silu_and_one_token_says_no_rate(tmp_path, capsys):
    """hidden_act "swish" (transformers computes it as SiLU) opens as SiLU, its logits
    transformers' own; one new token reports no "nan tok/s"."""
    import torch
    from explorer.cli import main
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    model = small_qwen3(transformers)
    model.config.hidden_act = "swish"
    model.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    ours = load_checkpoint(tmp_path)
    ids = torch.tensor([[5, 9, 2, 7]])
    with torch.no_grad():
        assert (ours.model(ids) - model(ids).logits).abs().max() <= 1e-5
    assert main(["generate", "Every effort", "--max-new-tokens", "1", "--checkpoint",
                 str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "nan" not in err and "1 token in" in err and "(the prompt pass made it)" in err


@pytest.mark.parametrize("kind", ["mistral", "gemma", "olmo", "cohere", "granite", "bert\x1b[2J"])
def test_a_folder_of_a_family_not_opened_names_its_model_type(tmp_path, kind):
    """A folder whose config.json names a model_type the explorer does not open is refused
    naming that model_type (printed safely) and the ones it opens — not told that its
    config.json is missing; a config.json written with a byte-order mark opens."""
    from explorer.core.base.errors import CheckpointError
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(config, model_type=kind)))
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path)
    said = str(refused.value)
    assert said.startswith(f"{tmp_path / 'config.json'}: model_type '") and "\x1b" not in said
    assert "a model the explorer does not open (it opens gpt2, llama, qwen2, qwen3" in said
    (tmp_path / "config.json").write_text("\ufeff" + json.dumps(config), encoding="utf-8")
    assert load_checkpoint(tmp_path).label.startswith("2-layer Qwen3 (32-dim)")


def test_one_parameter_under_two_names_is_refused(tmp_path):
    """embed_tokens.weight beside model.embed_tokens.weight (other values): refused, in
    either order of the header, naming both — never whichever comes last."""
    import torch
    from safetensors.torch import load_file, save_file
    from explorer.core.base.errors import CheckpointError
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    weights = load_file(tmp_path / "model.safetensors")
    other = torch.randn_like(weights["model.embed_tokens.weight"])
    for tensors in ({**weights, "embed_tokens.weight": other},
                    {"embed_tokens.weight": other, **weights}):
        save_file(tensors, tmp_path / "model.safetensors")
        with pytest.raises(CheckpointError, match="'embed_tokens.weight' and "
                                                  "'model.embed_tokens.weight' are one parameter "
                                                  "under two names"):
            load_checkpoint(tmp_path)


@pytest.mark.parametrize("where", ["config.json", "generation_config.json"])
def test_an_end_of_text_id_past_the_tokenizer_is_refused_naming_its_file(tmp_path, capsys, where):
    from explorer.cli import main
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    path = tmp_path / where
    data = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**data, "eos_token_id": 999999}))
    capsys.readouterr()  # transformers' own lines while saving
    assert main(["generate", "Hi", "--max-new-tokens", "1", "--checkpoint", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gpt-explorer generate: error: {path}: eos_token_id 999,999 is not one of "
                   "the tokenizer's 320 ids (Qwen3 (tokenizer.json))"]


@pytest.mark.parametrize("field, value, said", [
    ("rope_scaling", "abc", "rope_scaling in config.json must be an object of settings, got text"),
    ("rope_scaling", [1, 2], "rope_scaling in config.json must be an object of settings, got a list"),
    ("rope_scaling", 3, "rope_scaling in config.json must be an object of settings, got a number"),
    ("rope_parameters", "x", "rope_parameters in config.json must be an object of settings, got text"),
    ("rope_scaling", {"rope_type": "llama3", "factor": "x", "low_freq_factor": 1,
                      "high_freq_factor": 4, "original_max_position_embeddings": 16},
     "rope scaling's factor in config.json must be a number, got 'x'"),
    ("rope_scaling", {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                      "high_freq_factor": 4, "original_max_position_embeddings": 16.5},
     "rope scaling's original_max_position_embeddings in config.json must be a whole number, "
     "got 16.5"),
    ("rope_scaling", {"rope_type": "llama3", "factor": 8},
     "config.json's Llama 3 rope scaling is incomplete: it lacks low_freq_factor, "
     "high_freq_factor, original_max_position_embeddings"),
    ("num_attention_heads", "abc", "num_attention_heads in config.json must be a whole number, "
                                   "got 'abc'"),
])
def test_a_config_field_of_the_wrong_type_is_named_in_one_line(tmp_path, field, value, said):
    """Each field's type is checked and named (no AttributeError, no Python's own words
    such as "could not convert string to float"); the folder is named once."""
    from explorer.core.base.errors import CheckpointError
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    config = json.loads((tmp_path / "config.json").read_text())
    if field == "rope_scaling":  # the older layout alone, as transformers 4 saved it
        config["rope_theta"] = config.pop("rope_parameters")["rope_theta"]
    (tmp_path / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(tmp_path)
    assert str(refused.value) == f"{tmp_path}: {said}"


def test_every_mutation_diffs_a_padded_batch_on_a_vocabulary_smaller_than_gpt2s(tmp_path, capsys):
    """A batch of unequal prompts is padded with an id of every vocabulary (0), never
    GPT-2's 50,256: each mutation's diff runs on a model of 320 rows."""
    from explorer.cli import main
    from explorer.core.gpt.mutations import MUTATIONS
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    ran = []
    for name in MUTATIONS:
        capsys.readouterr()
        code = main(["diff", "Every effort moves", "Every day holds the most", "--a",
                     str(tmp_path), "--b", f"mutation:{name}"])
        out, err = capsys.readouterr()
        if code == 2:  # a GPT-2 exercise, refused on this block in one line
            assert err.count("\n") == 1 and "one of the book's GPT-2 exercises" in err, err
            continue
        assert code == 0 and "(2, 16, 320)" in out and "out_head" in out, (name, err)
        ran.append(name)
    assert {"no-shortcut", "wrong-shortcut2"} <= set(ran), ran
