"""Getting a trained GPT-2 from the app: File ▸ Get GPT-2… against a stand-in Hub on
127.0.0.1 (real HTTP through huggingface_hub), and the first-run banner."""

import pytest

from explorer.core.weights import download, hub
from explorer.core.weights.checkpoints import save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model
from explorer.ui.window.first_run import SEEN_KEY
from tests.hub_server import serving, tiny_gpt2
from tests.ui.conftest import TRAINING

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

transformers = pytest.importorskip("transformers")

REPO = "openai-community/gpt2"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tiny_gpt2(tmp_path_factory.mktemp("tiny"), n_embd=48, seed=6)[1]


@pytest.fixture
def server(files, hf_cache, monkeypatch):
    with serving(REPO, files, monkeypatch) as srv:
        yield srv


def test_get_gpt2_downloads_and_loads_the_model(qtbot, make_window, server):
    window = make_window()  # an untrained tiny preset
    assert window.banner.isVisible()
    window.get_gpt2_action.trigger()
    dialog = window.models._get_gpt2
    assert dialog.isVisible()
    rows = [[dialog.table.item(r, c).text() for c in range(4)] for r in range(4)]
    assert [r[0] for r in rows] == [m.title for m in hub.GPT2_MODELS]
    assert rows[0][1] == "548 MB" and rows[3][1] == "6.43 GB"
    # loading holds the file's float32 tensors and the model's at once: 2 x 4 bytes a weight
    assert rows[0][2] == f"about {2 * 4 * 124_439_808 / 1e6:.0f} MB" == "about 996 MB"
    assert rows[0][3] == "fits" and dialog.download_button.text() == "Download"
    seen = []
    dialog.table.selectRow(0)
    dialog.download_button.click()
    dialog.job.progress.connect(seen.append)
    qtbot.waitUntil(lambda: window.session.model is not None
                    and window.session.model.label.startswith(REPO), timeout=60_000)
    info = window.session.model
    assert info.trained and info.config.emb_dim == 48
    n = 50257 * 48 + 64 * 48 + 2 * (12 * 48 * 48 + 13 * 48) + 2 * 48  # GPT-2's count, tied head
    assert info.size == f"2 blocks · 48 wide · 4 heads · {n / 1e6:.1f}M parameters"
    assert info.size in window.windowTitle() and info.size in window.model_label.text()
    assert not window.banner.isVisible() and not dialog.isVisible()
    assert server.cdn_ranges() == [None]
    assert seen and seen[-1].done_bytes == len(server.state.repos[REPO].files["model.safetensors"])


def test_cancel_keeps_the_model_and_the_bytes_then_resumes(qtbot, make_window, server, files):
    window = make_window()
    before = window.session.model
    server.state.bytes_per_second = 3e6  # ~6 s for the file
    dialog = window.models.get_gpt2()
    dialog.table.selectRow(0)
    dialog.download_button.click()
    qtbot.waitUntil(lambda: "MB/s" in dialog.status.text(), timeout=60_000)
    qtbot.waitUntil(lambda: dialog.progress.value() > 200, timeout=60_000)
    assert not dialog.download_button.isEnabled() and dialog.cancel_button.isEnabled()
    assert "left" in dialog.status.text()
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: dialog.job is None, timeout=60_000)
    kept = download.partial_bytes("gpt2")
    assert 2_000_000 <= kept < len(files["model.safetensors"])
    assert f"{kept / 1e6:,.0f} MB kept" in dialog.status.text()
    assert "downloaded, resumes" in dialog.table.item(0, 3).text()
    assert window.session.model is before  # nothing else changed
    server.state.bytes_per_second = None
    dialog.download_button.click()
    qtbot.waitUntil(lambda: window.session.model is not before
                    and window.session.model.trained, timeout=60_000)
    assert server.cdn_ranges()[-1] == f"bytes={kept}-"


def test_a_network_error_is_a_line_in_the_dialog_and_the_model_stays(qtbot, make_window, hf_cache,
                                                                     monkeypatch, warnings):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    window = make_window()
    before = window.session.model
    dialog = window.models.get_gpt2()
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.job is None, timeout=60_000)
    assert dialog.status.text().startswith("cannot reach the Hugging Face Hub at http://127.0.0.1:9")
    assert dialog.download_button.isEnabled() and window.session.model is before
    assert not warnings  # no extra message box
    # the ways that need no network, as buttons: training starts at once in the Train tab
    assert dialog.offline.isVisible()
    assert dialog.open_folder_button.text() == "Open a GPT-2 folder you have…"
    panel = window.view("train")
    panel.preset.setCurrentText("tiny")
    panel.batch.setValue(2)  # a small batch: the steps, not their size, are tested
    panel.steps.setValue(2)
    panel.out_dir.setText(str(hf_cache.parent / "run"))
    said = []
    window.session.trainingChanged.connect(said.append)
    dialog.train_button.click()
    assert not dialog.isVisible() and panel.job is not None
    dock = window.docks["train"]
    assert dock.isVisible() and not dock.visibleRegion().isEmpty()
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    assert said[0] == "tiny: measuring…" and said[-1] == "" and "tiny at step 2 of 2: " in said[-2]
    trained = hf_cache.parent / "run" / "model.safetensors"
    assert trained.is_file()
    # the trained model is loaded: the model line names it, the banner has done its work
    qtbot.waitUntil(lambda: window.session.model.spec.checkpoint == str(trained), timeout=60_000)
    assert window.model_label.text().startswith("trained here: tiny, 2 steps, validation loss")
    assert not window.banner.isVisible()


def test_the_banner_offers_three_ways_and_stays_away_after_a_trained_model(qtbot, make_window,
                                                                          tmp_path):
    window = make_window()
    banner = window.banner
    assert banner.isVisible()
    assert banner.download.text() == "Download GPT-2 small (~548 MB)"
    assert [a.text() for a in banner.open.menu().actions()] == [
        "Folder (the book's gpt2/124M, a Hugging Face folder)…",
        "File (.pth, .safetensors, .bin, model.ckpt.index)…"]
    panel = window.view("train")  # a tiny run: the button starts training, not only the tab
    panel.preset.setCurrentText("tiny")
    panel.batch.setValue(2)  # a small batch: the steps, not their size, are tested
    panel.steps.setValue(3)
    panel.out_dir.setText(str(tmp_path / "run"))
    said = []
    window.session.trainingChanged.connect(said.append)
    banner.train.click()
    dock = window.docks["train"]
    assert dock.isVisible() and not dock.visibleRegion().isEmpty() and panel.job is not None
    assert banner.train.text() == "Training tiny: measuring…" and not banner.train.isEnabled()
    qtbot.waitUntil(lambda: panel.job is None, timeout=TRAINING)
    assert banner.train.text() == "Train a small model here"
    assert said[0] == "tiny: measuring…" and "left (" in said[-2]  # measured from the steps timed
    assert panel.status.text().startswith("Done: validation loss ")  # and the honest result
    trained = save_checkpoint(build_model(preset("tiny"), seed=1), tmp_path / "trained.safetensors")
    window.models.load(window.session.model.spec.__class__(checkpoint=str(trained)))
    qtbot.waitUntil(lambda: window.session.model.trained, timeout=60_000)
    assert not banner.isVisible()
    assert str(window.settings.value(SEEN_KEY)).lower() == "true"
    window.models.load(window.session.model.spec.__class__(preset="tiny"))
    qtbot.waitUntil(lambda: not window.session.model.trained, timeout=60_000)
    assert not banner.isVisible()  # once a trained model was loaded, it does not come back


def test_the_books_folder_opens_from_the_app(qtbot, make_window):
    from pathlib import Path
    folder = Path(__file__).resolve().parents[2] / "data" / "openai-tf-tiny"
    window = make_window()
    window.models.load(window.session.model.spec.__class__(checkpoint=str(folder)))
    qtbot.waitUntil(lambda: window.session.model.trained, timeout=60_000)
    info = window.session.model
    assert "OpenAI TensorFlow checkpoint" in info.label
    assert info.size.startswith("3 blocks · 8 wide · 2 heads")
    assert not window.banner.isVisible()
