"""``gpt-explorer view KEY``: every view alone in a window of its own, on the model
loaded and the prompt run once, without the main window."""

import pytest

from explorer.core.gpt.config import preset as preset_config
from explorer.core.sources import ModelSpec
from explorer.ui.views.registry import VIEWS
from explorer.ui.window.view_alone import ViewWindow
from tests.ui.conftest import settle


FAMILY = {"tiny": "gpt2", "llama-tiny": "llama", "qwen3-tiny": "llama", "olmo3-tiny": "olmo",
          "gemma3-tiny": "gemma3", "qwen3moe-tiny": "qwen3moe", "olmoe-tiny": "olmoe"}


@pytest.mark.parametrize("preset", list(FAMILY))
@pytest.mark.parametrize("key", [v.key for v in VIEWS])
def test_every_view_opens_alone_on_the_prompt_run_once(qtbot, key, preset):
    """Every view, on GPT-2's block, the Llama / Qwen block, OLMo's and Gemma's."""
    window = ViewWindow(key, ModelSpec(preset=preset), "Every effort moves", max_new_tokens=2)
    said = []
    window.warn = lambda parent, title, text: said.append(text)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.session.prompt is not None and not window.running,
                    timeout=60_000)
    settle(qtbot, window)
    assert said == []
    assert window.centralWidget() is window.view and window.view.isVisible()
    assert window.session.prompt.ids == [6109, 3626, 6100]  # tiktoken's ids for the prompt
    assert len(window.session.steps) == 2
    assert window.session.model.config.n_layers == preset_config(preset).n_layers  # the preset
    assert window.session.model.config.family.name == FAMILY[preset]
    assert window.status.text().startswith("Generated 2 tokens")


def test_an_unknown_view_is_refused_in_one_line(qtbot):
    with pytest.raises(ValueError, match="unknown view 'nope'; choose one of graph, prompt"):
        ViewWindow("nope")


def test_the_command_renders_one_view(tmp_path, capsys):
    from PySide6.QtGui import QImage

    from explorer.cli import main
    out = tmp_path / "inspector.png"
    assert main(["view", "inspector", "--preset", "tiny", "--screenshot", str(out)]) == 0
    assert QImage(str(out)).size().toTuple() == (900, 700)
    with pytest.raises(SystemExit) as refused:
        main(["view", "nope", "--preset", "tiny"])
    assert refused.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("preset", ["qwen3-tiny", "gemma3-tiny", "olmo3-tiny", "qwen3moe-tiny",
                                    "olmoe-tiny"])
@pytest.mark.parametrize("key", [v.key for v in VIEWS])
def test_every_view_follows_every_node_of_a_rotary_block(qtbot, key, preset):
    """Each view alone on the Qwen3 block (RMSNorm, RoPE, q/k norms, GQA, SwiGLU), Gemma
    3's (four norms, the embedding scale, GeGLU, sliding windows) and OLMo 3's (norms in
    the branches, whole-projection q/k norms): every node of its first block (attention's
    steps too) and the model's own selected in turn, no error, no warning."""
    from explorer.core.gpt.nodes import all_hook_names, layer_of

    window = ViewWindow(key, ModelSpec(preset=preset), "Every effort moves", max_new_tokens=1)
    said = []
    window.warn = lambda parent, title, text: said.append(text)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.session.prompt is not None and not window.running,
                    timeout=60_000)
    names = [n for n in all_hook_names(window.session.model.config, inside=True)
             if layer_of(n) in (None, 0)]
    assert {"trf_blocks.0.norm2", "trf_blocks.0.att.k_norm", "trf_blocks.0.att.keys_rope",
            "trf_blocks.0.att.values_repeated"} <= set(names)
    assert {"gemma3-tiny": "trf_blocks.0.ff.gelu", "qwen3moe-tiny": "trf_blocks.0.ff.routing",
            "olmoe-tiny": "trf_blocks.0.ff.routing"}.get(preset, "trf_blocks.0.ff.silu") in names
    for name in names:
        window.session.set_node(name)
        settle(qtbot, window)
        assert window.session.node == name
    assert said == []
