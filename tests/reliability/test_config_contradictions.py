"""A folder whose config and weights describe different models is refused with both named,
never run as one of them silently: the model_type decides the attention's q/k norms and
biases, the weights must have them; the two rotary layouts must agree; a config key that
makes another model than a causal decoder is refused; the book's config dict states sizes
that are checked against the weights as config.json's are."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

transformers = pytest.importorskip("transformers")


def _qwen3(tmp_path):
    from tests.llama_folder import write_tokenizer
    from tests.test_cli import small_qwen3
    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    return tmp_path


def _qwen2(tmp_path):
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=320, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    transformers.Qwen2ForCausalLM(config).eval().save_pretrained(tmp_path)
    from tests.llama_folder import write_tokenizer
    write_tokenizer(tmp_path, 320)
    return tmp_path


def _edit(folder, config=None, drop=(), **fields):
    path = folder / "config.json"
    data = json.loads(path.read_text())
    data.update(fields)
    for key in config or ():
        data.pop(key, None)
    path.write_text(json.dumps(data))
    if drop:
        weights = load_file(folder / "model.safetensors")
        save_file({k: v for k, v in weights.items() if not k.endswith(drop)},
                  folder / "model.safetensors", metadata={"format": "pt"})


def _refusal(folder) -> str:
    from explorer.core.base.errors import CheckpointError
    from explorer.core.weights.checkpoints import load_checkpoint
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(folder)
    text = str(refused.value)
    assert text.startswith(f"{folder}: ") and text.count(str(folder)) == 1, text
    return text[len(f"{folder}: "):]


@pytest.mark.parametrize("label", ["llama", "qwen2"])
def test_a_qwen3_relabelled_is_refused_naming_its_q_norm(tmp_path, label):
    """transformers runs such a folder as Llama (no q/k norms): neither is picked."""
    _edit(_qwen3(tmp_path), model_type=label)
    assert _refusal(tmp_path) == (
        f"config.json's model_type {label!r} has no norms of queries and keys, but the weights "
        "have layers.0.self_attn.q_norm.weight: the config and the weights describe different "
        "models")


@pytest.mark.parametrize("drop, named", [
    (("q_norm.weight", "k_norm.weight"), "layers.0.self_attn.q_norm.weight"),
    (("layers.1.self_attn.k_norm.weight",), "layers.1.self_attn.k_norm.weight")])
def test_a_qwen3_without_its_q_k_norms_is_refused(tmp_path, drop, named):
    """transformers would run the missing norms with unit weights: still norms, not none."""
    _edit(_qwen3(tmp_path), drop=drop)
    assert _refusal(tmp_path) == (
        "config.json's model_type 'qwen3' normalises queries and keys (q_norm, k_norm), but "
        f"the weights have no {named}: the config and the weights describe different models")


def test_qwen2_weights_under_a_llama_config_without_biases_are_refused(tmp_path):
    _edit(_qwen2(tmp_path), model_type="llama", attention_bias=False)
    assert _refusal(tmp_path) == (
        "config.json's model_type 'llama' with attention_bias false has no biases in q, k and "
        "v, but the weights have layers.0.self_attn.q_proj.bias: the config and the weights "
        "describe different models")


def test_a_qwen2_without_its_biases_is_refused_and_with_them_opens(tmp_path):
    from explorer.core.weights.checkpoints import load_checkpoint
    folder = _qwen2(tmp_path)
    assert load_checkpoint(folder).config.qkv_bias is True
    _edit(folder, drop=("v_proj.bias",))
    assert _refusal(folder) == (
        "config.json's model_type 'qwen2' adds biases to q, k and v, but the weights have no "
        "layers.0.self_attn.v_proj.bias: the config and the weights describe different models")


def test_attention_bias_on_a_qwen3_is_refused(tmp_path):
    """Qwen3's attention_bias adds one to o_proj too, which the block does not have."""
    _edit(_qwen3(tmp_path), attention_bias=True)
    assert "asks for biases in the feed-forward or in out_proj" in _refusal(tmp_path)


@pytest.mark.parametrize("fields, said", [
    ({"rope_theta": 12345.0}, "config.json gives two rotary bases, rope_theta 12345.0 and "
                              "rope_parameters' rope_theta 10000.0: the files do not say which "
                              "one the model was trained with"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
     "config.json's rope_scaling asks for 'llama3' rotary scaling and its rope_parameters for "
     "'default': the files do not say which one the model was trained with"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
      "rope_parameters": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                          "rope_theta": 1e6}},
     "config.json's rope_scaling gives factor 8.0 and its rope_parameters 4.0: the files do "
     "not say which one the model was trained with"),
])
def test_two_rotary_layouts_that_disagree_are_refused(tmp_path, fields, said):
    _edit(_qwen3(tmp_path), **fields)
    assert _refusal(tmp_path) == said


def test_two_rotary_layouts_that_agree_open_with_their_scaling(tmp_path):
    from explorer.core.weights.checkpoints import load_checkpoint
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    _edit(_qwen3(tmp_path), rope_theta=1e6, rope_scaling=scaling,
          rope_parameters={**scaling, "rope_theta": 1e6})
    cfg = load_checkpoint(tmp_path).config
    assert cfg.rope_base == 1e6 and cfg.rope_scaling.factor == 8.0
    assert cfg.rope_scaling.original_context_length == 16


@pytest.mark.parametrize("fields, said", [
    ({"add_cross_attention": True}, "config.json sets add_cross_attention to True: "
                                    "cross-attention to an encoder's states"),
    ({"is_encoder_decoder": True}, "config.json sets is_encoder_decoder to True: an encoder "
                                   "and a decoder"),
    ({"pruned_heads": {"0": [1]}}, "config.json sets pruned_heads to {'0': [1]}: pruned "
                                   "attention heads"),
])
def test_a_config_key_of_another_model_is_refused(tmp_path, fields, said):
    _edit(_qwen3(tmp_path), **fields)
    assert _refusal(tmp_path) == f"{said}, which the explorer's blocks do not compute"


def test_the_same_keys_false_open(tmp_path):
    from explorer.core.weights.checkpoints import load_checkpoint
    _edit(_qwen3(tmp_path), add_cross_attention=False, is_encoder_decoder=False, pruned_heads={})
    assert load_checkpoint(tmp_path).config.n_layers == 2


@pytest.mark.parametrize("key, value, have", [("hidden_dim", 100, 64), ("vocab_size", 50000, 50257),
                                              ("n_layers", 3, 2), ("emb_dim", 64, 32)])
def test_the_books_config_sizes_are_checked_against_the_weights(tmp_path, key, value, have):
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from tests.book_llama import book_config
    cfg = preset("llama-tiny")
    torch.save(build_model(cfg, seed=1).state_dict(), tmp_path / "model.pth")
    book = book_config(cfg)
    (tmp_path / "config.json").write_text(json.dumps({**book, key: value}))
    assert _refusal(tmp_path / "model.pth") == (
        f"config.json says {key} {value:,} but the weights have {have:,}: the folder's files "
        "do not belong together")
    (tmp_path / "config.json").write_text(json.dumps({**book, "qk_norm": True}))
    assert _refusal(tmp_path / "model.pth") == (
        "config.json says qk_norm True but the weights have no q_norm: the folder's files do "
        "not belong together")


@pytest.mark.parametrize("name, key", [("gemma3-tiny", "hidden_dim"), ("qwen3moe-tiny",
                                                                       "moe_intermediate_size")])
def test_the_newer_notebooks_config_sizes_are_checked_too(tmp_path, name, key):
    """The Gemma 3 / OLMo 3 / Qwen3-MoE notebooks' dicts: the same checks."""
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.weights.checkpoints import load_checkpoint
    from tests.book_llama import book_config
    cfg = preset(name)
    sd = build_model(cfg, seed=1).state_dict()
    if name.startswith("gemma3"):  # the Gemma 3 notebook's names
        names = {"trf_blocks.": "blocks.", ".norm1.": ".input_layernorm.",
                 ".post_norm1.": ".post_attention_layernorm.",
                 ".norm2.": ".pre_feedforward_layernorm.",
                 ".post_norm2.": ".post_feedforward_layernorm."}
        for ours, book_name in names.items():
            sd = {k.replace(ours, book_name): v for k, v in sd.items()}
    torch.save(sd, tmp_path / "model.pth")
    book = {**book_config(cfg), "num_experts": cfg.n_experts,
            "num_experts_per_tok": cfg.experts_per_token, "sliding_window": 16,
            "layer_types": ["full_attention"] * cfg.n_layers}
    (tmp_path / "config.json").write_text(json.dumps(book))
    assert load_checkpoint(tmp_path / "model.pth").config.family is cfg.family
    (tmp_path / "config.json").write_text(json.dumps({**book, key: 7}))
    assert _refusal(tmp_path / "model.pth") == (
        f"config.json says {key} 7 but the weights have {cfg.hidden_dim:,}: the folder's "
        "files do not belong together")
