"""``gpt-explorer view KEY``: every view alone in a window of its own, on the model
loaded and the prompt run once, without the main window."""

import pytest

from explorer.core.sources import ModelSpec
from explorer.ui.views.registry import VIEWS
from explorer.ui.window.view_alone import ViewWindow
from tests.ui.conftest import settle


@pytest.mark.parametrize("preset", ["tiny", "llama-tiny", "qwen3-tiny"])
@pytest.mark.parametrize("key", [v.key for v in VIEWS])
def test_every_view_opens_alone_on_the_prompt_run_once(qtbot, key, preset):
    """Every view, on GPT-2's block and on the Llama / Qwen block."""
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
    assert window.session.model.config.n_layers == 2  # the preset, loaded
    assert window.session.model.config.family == ("gpt2" if preset == "tiny" else "llama")
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
