"""File ▸ Save run… and Open run… in the window, and the command line's --save-run and
--open-run: the same model runs again and its tokens are checked; another model shows
the saved statistics read-only and says so; a damaged file is one line."""

import pytest

from explorer.cli import main
from tests.ui.conftest import run_and_wait, settle, wait_rerun


def test_saved_then_opened_with_the_same_model_runs_again_and_checks(qtbot, make_window, tmp_path):
    window = make_window()
    window.prompt.sample.setChecked(True)
    window.prompt.seed.setValue(7)
    run_and_wait(qtbot, window, max_tokens=3)
    tokens = [p.token_id for p in window.session.steps]
    stats = window.session.prompt.views["trf_blocks.0.att"].stats.std
    path = tmp_path / "run.gbrun"
    window.run_files.save(str(path), tensor_mb=1)
    qtbot.waitUntil(lambda: "Saved the run" in window.status_text.text(), timeout=60_000)
    window.prompt.prompt.setPlainText("something else")
    window.prompt.sample.setChecked(False)
    window.run_files.open(str(path))
    qtbot.waitUntil(lambda: "its 3 tokens replayed" in window.status_text.text(), timeout=60_000)
    assert [p.token_id for p in window.session.steps] == tokens
    assert window.prompt.prompt.toPlainText() == "Every effort moves you"
    assert window.prompt.sample.isChecked() and window.prompt.seed.value() == 7
    assert window.session.prompt.views["trf_blocks.0.att"].stats.std == stats
    from explorer.core.playground.run_file import read_run
    saved = read_run(path)  # 1 MB of tensors kept, in float16
    kept = [v.array.size * 2 for p in saved.passes for v in p.views.values() if v.array is not None]
    assert kept and sum(kept) <= 2**20


def test_another_model_shows_the_saved_run_read_only(qtbot, make_window, tmp_path, capsys):
    path = tmp_path / "run.gbrun"
    assert main(["generate", "Every effort moves you", "--preset", "tiny", "--max-new-tokens",
                 "2", "--save-run", str(path), "--save-tensors", "2"]) == 0
    assert "saved" in capsys.readouterr().err
    window = make_window(seed=9)
    qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
    window.run_files.open(str(path))
    qtbot.waitUntil(lambda: window.session.prompt is not None, timeout=60_000)
    assert "Read-only" in window.status_text.text() and len(window.session.steps) == 2
    assert window.session.prompt.views["trf_blocks.0.add2"].stats.count > 0
    assert all(v.device == "saved" for v in window.session.prompt.views.values())
    assert window.session.prompt.views["trf_blocks.0.add2"].array is not None  # --save-tensors 2


def test_a_damaged_run_is_one_line_in_a_dialog(qtbot, make_window, tmp_path):
    window = make_window()
    qtbot.waitUntil(lambda: window.session.model is not None, timeout=60_000)
    bad = tmp_path / "bad.gbrun"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}" + b" " * 14)
    said = []
    window.warn = lambda parent, title, text: said.append((title, text))
    window.run_files.open(str(bad))
    qtbot.waitUntil(lambda: bool(said), timeout=60_000)
    assert said[0][0] == "Open run" and "not a run file" in said[0][1] and "\n" not in said[0][1]
    assert window.session.prompt is None


@pytest.mark.parametrize("seed, code", [(0, 0), (5, 0)])
def test_open_run_with_screenshot_renders_it(tmp_path, capsys, seed, code):
    path = tmp_path / "run.gbrun"
    main(["generate", "Every effort moves you", "--preset", "tiny", "--max-new-tokens", "2",
          "--save-run", str(path)])
    shot = tmp_path / "open.png"
    assert main(["--preset", "tiny", "--seed", str(seed), "--open-run", str(path),
                 "--screenshot", str(shot)]) == code
    from PySide6.QtGui import QImage
    assert QImage(str(shot)).width() == 1600
    capsys.readouterr()


def test_open_run_refuses_a_foreign_file_with_one_line(tmp_path, capsys):
    bad = tmp_path / "notes.gbrun"
    bad.write_text("hello")
    code = main(["--preset", "tiny", "--open-run", str(bad), "--screenshot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("gpt-explorer: error:") and "not a run file" in err[-1]
    assert not (tmp_path / "x.png").exists()


def test_a_branched_run_with_interventions_reopens_token_for_token(qtbot, make_window, tmp_path):
    """A sampled run, branched at step 1 with a token of the user's, with an intervention
    on: saved, the window changed, opened again — the branch's tokens replayed with the
    intervention; the same file with the intervention's effect faked away departs and the
    saved run stays shown."""
    from explorer.core.experiments.interventions import from_dict
    window = make_window()
    session = window.session
    session.set_interventions([from_dict({"node": "trf_blocks.0.att", "kind": "scale", "k": 0.5})])
    window.prompt.sample.setChecked(True)
    window.prompt.seed.setValue(3)
    run_and_wait(qtbot, window, max_tokens=3)
    run_tokens = [p.token_id for p in session.steps]
    session.show_step(0)
    window.services.branch(13)  # continue from step 0 with '.' instead
    qtbot.waitUntil(lambda: len(session.branches) == 2 and not window.running, timeout=60_000)
    tokens = [p.token_id for p in session.steps]
    assert 13 in tokens
    path = tmp_path / "branch.gbrun"
    window.run_files.save(str(path), tensor_mb=0)
    qtbot.waitUntil(lambda: "Saved the run" in window.status_text.text(), timeout=60_000)
    session.set_interventions([])  # the window changed since (and ran again without it)
    wait_rerun(qtbot, window)
    window.prompt.prompt.setPlainText("something else")
    said = []
    window.warn = lambda parent, title, text: said.append(text)
    window.run_files.open(str(path))
    qtbot.waitUntil(lambda: "tokens replayed" in window.status_text.text() or bool(said), timeout=60_000)
    assert not said
    assert [p.token_id for p in session.steps] == tokens
    assert [i.to_dict() for i in session.interventions][0]["kind"] == "scale"
    # both lines back, the branch shown as it was, parting from the run at step 0
    qtbot.waitUntil(lambda: len(session.branches) == 2, timeout=60_000)
    assert [label for label, _ in session.branches] == ["the run", "'.' at step 0"]
    assert session.branch == 1 and session.branches[1][1] is session.steps
    assert [p.token_id for p in session.branches[0][1]] == run_tokens
    from explorer.ui.widgets.branch_box import BranchBox
    box = window.prompt.findChild(BranchBox)
    assert box.isVisibleTo(window) and box.currentText() == "'.' at step 0"
    branches = window.view("branches")
    assert branches.note.text().startswith("They part at step 0: ")
    assert branches.table.rowCount() > 5  # candidates, then every node's std, both ways
    # the replayed line keeps its cache: it continues as a branch of its own
    assert 1 in window.prompt.runs.streams and 0 not in window.prompt.runs.streams


def test_a_branched_run_opened_under_another_model_shows_both_lines_read_only(
        qtbot, make_window, tmp_path):
    window = make_window()
    run_and_wait(qtbot, window, max_tokens=3)
    session = window.session
    session.show_step(1)
    window.services.branch(13)
    qtbot.waitUntil(lambda: len(session.branches) == 2 and not window.running, timeout=60_000)
    session.select_branch(0)  # the run shown when saved; its branch beside it
    lines = [[p.token_id for p in steps] for _, steps in session.branches]
    path = tmp_path / "branched.gbrun"
    window.run_files.save(str(path), tensor_mb=0)
    qtbot.waitUntil(lambda: "Saved the run" in window.status_text.text(), timeout=60_000)
    other = make_window(seed=9)
    other.run_files.open(str(path))
    qtbot.waitUntil(lambda: other.session.record and len(other.session.branches) == 2,
                    timeout=60_000)
    shown = other.session
    assert [label for label, _ in shown.branches] == ["the run", "'.' at step 1"]
    assert shown.branch == 0 and [[p.token_id for p in s] for _, s in shown.branches] == lines
    assert shown.branches[1][1][0] is shown.steps[0]  # one pass, shared before they part
    assert other.view("branches").note.text().startswith("They part at step 1: ")


@pytest.mark.slow
def test_a_run_generated_with_interventions_reopens_from_the_command_line(tmp_path, capsys):
    """generate --intervene … --save-run, then --open-run with --screenshot: the run
    replayed with its interventions, exit 0 (it was refused: 4 against 4, exit 2)."""
    import json
    iv = tmp_path / "iv.json"
    iv.write_text(json.dumps([{"node": "trf_blocks.1.ff", "kind": "scale", "k": 0.25}]))
    path = tmp_path / "iv.gbrun"
    assert main(["generate", "Every effort moves you", "--preset", "tiny", "--max-new-tokens", "4",
                 "--temperature", "0.9", "--intervene", str(iv), "--save-run", str(path)]) == 0
    capsys.readouterr()
    shot = tmp_path / "shot.png"
    assert main(["--preset", "tiny", "--open-run", str(path), "--screenshot", str(shot)]) == 0
    assert shot.stat().st_size > 10_000


def test_a_run_of_another_model_is_drawn_with_its_own_blocks_and_computes_nothing(
        qtbot, make_window, tmp_path, capsys):
    """A 4-block, 192-wide run opened under a 12-block, 768-wide model: the strip, the
    block box and every arrow are the saved model's; a view's job on it refuses in words;
    Ctrl+Enter runs the loaded 12-block model again."""
    path = tmp_path / "mini.gbrun"
    assert main(["generate", "Every effort moves you", "--preset", "mini", "--max-new-tokens",
                 "2", "--save-run", str(path)]) == 0
    capsys.readouterr()
    window = make_window(preset="gpt2-small")
    session = window.session
    session.set_layer(6)
    window.run_files.open(str(path))
    qtbot.waitUntil(lambda: session.prompt is not None, timeout=60_000)
    assert session.record and session.model.config.n_layers == 4
    assert session.loaded.config.n_layers == 12
    assert session.layer == 3  # block 7 of 12 becomes the last of the run's 4
    graph = window.view("graph")
    assert graph.layer_box.suffix() == " of 4" and graph.layer_box.maximum() == 3  # blocks 0–3
    assert graph.strip.caption.text() == "All 4 blocks:"
    assert len(graph.strip._values()) == 4 and None not in graph.strip._values()
    shapes = {label.text() for label in graph.edge_labels.values() if label.text()}
    assert shapes == {"(1, 4, 192)", "(1, 4, 768)"}  # 768: the 4× wider feed-forward inside
    assert "read-only" in window.windowTitle() and "4 blocks" in window.windowTitle()
    from explorer.ui.base.jobs import JobContext
    ctx = JobContext(None, None, window.engine.loaded, window.engine.record)
    with pytest.raises(ValueError, match="saved run of .* not loaded"):
        ctx.model
    from explorer.ui.views.registry import VIEWS
    for spec in VIEWS:  # every view drawn over the 4-block run, none on the 12-block model
        window.show_view(spec.key)
        settle(qtbot, window)
    assert session.record and session.model.config.n_layers == 4
    said = []
    window.warn = lambda parent, title, text: said.append((title, text))
    window.run_files.save(str(tmp_path / "again.gbrun"))
    assert said and "read-only" in said[0][1]
    window.prompt.max_tokens.setValue(1)
    window.prompt.request_run()  # back to the loaded model
    qtbot.waitUntil(lambda: not window.running and bool(session.steps), timeout=60_000)
    assert not session.record and session.model.config.n_layers == 12
    assert window.engine.record is None and graph.layer_box.suffix() == " of 12"
    assert session.prompt.views["trf_blocks.11.add2"].shape == (1, 4, 768)


def test_a_run_past_the_context_reopens_with_its_own_cropping(tmp_path, capsys):
    """70 tokens from a 64-token model, made without leave-room (the window's default is
    on): replayed with the run's own setting, every step agrees (it departed at step 0);
    more tokens than a saved run holds are refused before anything is generated."""
    path = tmp_path / "long.gbrun"
    assert main(["generate", "Every effort moves you", "--preset", "tiny", "--max-new-tokens",
                 "70", "--no-stop", "--save-run", str(path)]) == 0
    capsys.readouterr()
    assert main(["--preset", "tiny", "--open-run", str(path), "--screenshot",
                 str(tmp_path / "shot.png")]) == 0
    assert "departs" not in capsys.readouterr().err
    assert main(["generate", "x", "--preset", "tiny", "--max-new-tokens", "1025", "--save-run",
                 str(tmp_path / "big.gbrun")]) == 2
    err = capsys.readouterr().err
    assert "between 1 and 1,024, got 1,025" in err and not (tmp_path / "big.gbrun").exists()



def test_a_qwen3_run_with_its_own_vocabulary_opens_read_only_with_its_block_and_pieces(
        qtbot, make_window, tmp_path, capsys):
    """A Qwen3 folder's run (its own 320-token tokenizer) opened under GPT-2 tiny: the
    graph draws the Qwen3 block, the chips and the title read the run's own pieces, every
    view draws over it, and Ctrl+Enter goes back to the loaded GPT-2."""
    transformers = pytest.importorskip("transformers")
    import torch

    from explorer.core.weights.tokenizers_files import tokenizer_for
    from tests.llama_folder import write_tokenizer

    torch.manual_seed(0)
    folder = tmp_path / "qwen3"
    transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=320, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64,
        tie_word_embeddings=True)).save_pretrained(folder)
    write_tokenizer(folder, 320)
    tok = tokenizer_for(folder)
    path = tmp_path / "qwen3.gbrun"
    assert main(["generate", "Every effort moves you", "--checkpoint", str(folder),
                 "--max-new-tokens", "2", "--no-stop", "--save-run", str(path)]) == 0
    capsys.readouterr()
    window = make_window(preset="tiny")
    session = window.session
    window.run_files.open(str(path))
    qtbot.waitUntil(lambda: session.prompt is not None and session.record, timeout=60_000)
    assert session.model.config.family.name == "llama" and session.model.config.qk_norm
    ids = tok.encode("Every effort moves you")
    assert session.prompt.ids == ids
    assert session.prompt.pieces == [tok.token_piece(i) for i in ids]
    assert session.tokenizer.token_piece(session.steps[0].token_id) == tok.token_piece(
        session.steps[0].token_id)
    graph = window.view("graph")
    assert graph.texts["title"].text().endswith("Llama / Qwen")
    assert "trf_blocks.0.ff.silu" in graph.edge_labels and "trf_blocks.0.drop1" not in graph.edge_labels
    from explorer.ui.views.registry import VIEWS
    for spec in VIEWS:  # every view drawn over the Qwen3 run
        window.show_view(spec.key)
        settle(qtbot, window)
    window.prompt.max_tokens.setValue(1)
    window.prompt.request_run()  # back to the loaded model, GPT-2's tokenizer again
    qtbot.waitUntil(lambda: not window.running and bool(session.steps) and not session.record,
                    timeout=60_000)
    assert session.model.config.family.name == "gpt2" and session.prompt.ids == [6109, 3626, 6100, 345]
