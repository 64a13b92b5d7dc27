import json
import re
import subprocess
import sys

import pytest
import torch

from explorer.core.gpt.node_types import Kind
from explorer.cli import main
from explorer.core.weights.checkpoints import save_checkpoint
from explorer.core.gpt.config import preset
from explorer.core.gpt.build import build_model


def run(capsys, *argv):
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own refusal (an unknown choice): usage and 2
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_tokenize_prints_ids_and_pieces(capsys):
    code, out, _ = run(capsys, "tokenize", "Every effort moves you")
    assert code == 0
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [int(r[1]) for r in rows] == [6109, 3626, 6100, 345]
    assert "' effort'" in out and out.startswith("4 tokens (GPT-2)")


def test_info_prints_config_and_the_book_counts(capsys):
    code, out, _ = run(capsys, "info", "--preset", "tiny")
    assert code == 0 and "UNTRAINED" in out
    assert "emb_dim         32" in out
    total = [line for line in out.splitlines() if line.strip().startswith("total")][0]
    from explorer.core.gpt.sizes import count_parameters
    assert f"{count_parameters(preset('tiny')).total:,}" in total
    assert "Untied (a head of its own)" in out
    code, out, _ = run(capsys, "info", "--preset", "gpt2-small")
    assert "The book's 163,009,536" in out and "621.83 MB" in out and "says 117M" in out


def test_generate_streams_tokens_from_a_checkpoint(capsys, tmp_path):
    model = build_model(preset("tiny"), seed=2)
    path = save_checkpoint(model, tmp_path / "tiny.safetensors")
    code, out, err = run(capsys, "generate", "Every effort moves you", "--checkpoint", str(path),
                         "--max-new-tokens", "6", "--no-stop")
    assert code == 0
    assert out.startswith("Every effort moves you")
    from explorer.core.run.generation import GenerationSettings, generate
    ids = generate(model, [6109, 3626, 6100, 345],
                   GenerationSettings(max_new_tokens=6, stop_at_eot=False)).new_ids
    from explorer.core.gpt.tokenizer import decode
    assert out.rstrip("\n") == "Every effort moves you" + decode(ids)
    assert "6 tokens" in err and "tok/s" in err


def test_generate_sampling_and_top_candidates(capsys):
    code, out, err = run(capsys, "generate", "Hello", "--preset", "tiny", "--temperature", "0.8",
                         "--top-k", "5", "--max-new-tokens", "3", "--show-top", "2", "--no-stop")
    assert code == 0 and out.count("[") == 3 and "UNTRAINED" in err


@pytest.mark.parametrize("argv,message", [
    (["generate", "", "--preset", "tiny"], "prompt is empty"),
    (["generate", "hi", "--preset", "tiny", "--temperature", "0"], "temperature"),
    (["generate", "hi", "--preset", "tiny", "--top-k", "0"], "top-k"),
    (["generate", "hi", "--preset", "tiny", "--max-new-tokens", "0"], "max new tokens"),
    (["info", "--preset", "tiny", "--device", "tpu"], "device"),
    (["info", "--preset", "nope"], "invalid choice: 'nope' (choose from 'gpt2-small'"),
    (["info", "--checkpoint", "/nonexistent/model.bin"], "no such file"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_explained(capsys):
    code, _, err = run(capsys, "info", "--preset", "tiny", "--device", "cuda")
    assert code == 2 and "no usable CUDA" in err


@pytest.mark.slow
def test_python_dash_m_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "explorer", "tokenize", "Hello world"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "15496" in done.stdout and "995" in done.stdout


@pytest.mark.slow  # a fresh process
def test_commands_that_need_no_model_start_without_torch_or_qt(tmp_path):
    """Building the parser (every command does) imports neither torch nor Qt: tokenize
    (with a checkpoint folder's tokenizer too), download and --help answer at once."""
    code = ("import sys\nfrom explorer.cli import main\n"
            f"code = main(['tokenize', 'Hello world']) + main(['tokenize', 'Hi', '--checkpoint', {str(tmp_path)!r}])\n"
            "print(code, 'torch' in sys.modules, 'PySide6' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split()[-3:] == ["0", "False", "False"], done.stdout + done.stderr


def test_inspect_prints_nodes_in_forward_order_and_saves_npz(capsys, tmp_path):
    out_file = tmp_path / "caps.npz"
    code, out, _ = run(capsys, "inspect", "Every effort moves you", "--preset", "tiny",
                       "--layer", "0", "--save", str(out_file))
    assert code == 0
    from explorer.core.gpt.nodes import block_nodes
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("trf_blocks.")]
    assert rows == [f"trf_blocks.0.{n.key}" for n in block_nodes("pre") if n.kind != Kind.PATTERN]
    assert "(1, 4, 128)" in out  # the feed-forward's hidden width for the tiny preset
    import numpy as np
    saved = np.load(out_file)
    assert sorted(saved.files) == sorted(rows)
    assert saved["trf_blocks.0.ff.layers.1"].shape == (1, 4, 128)


@pytest.mark.parametrize("char", ["\r", "\n", "\x1b", "\x7f", "\x85"])
def test_a_name_with_a_control_character_is_refused_in_one_escaped_line(capsys, tmp_path, char):
    """C0 (a carriage return, a line break, an escape), DEL and C1: refused before any
    work, nothing written, and the line that says so stays one readable line (a raw \\r
    would send the cursor back and the rest would overwrite it)."""
    out_file = tmp_path / f"caps{char}x.npz"
    code, _, err = run(capsys, "inspect", "Hello", "--preset", "tiny", "--layer", "0",
                       "--save", str(out_file))
    assert code == 2 and not out_file.exists() and list(tmp_path.iterdir()) == []
    line = err.strip()
    assert "\n" not in line and "\r" not in line and "has a control character" in line
    assert repr(char)[1:-1] in line


def test_inspect_runs_several_prompts_as_a_padded_batch(capsys, tmp_path):
    out_file = tmp_path / "batch.npz"
    code, out, _ = run(capsys, "inspect", "Every effort moves you", "Hello", "--preset", "tiny",
                       "--node", "trf_blocks.1.add2", "--save", str(out_file))
    assert code == 0
    assert "batch: 2 prompts × 4 positions; 3 padding positions kept out" in out
    import numpy as np
    saved = np.load(out_file)
    assert saved["trf_blocks.1.add2"].shape == (2, 4, 32)
    np.testing.assert_array_equal(saved["batch_mask"], [[1, 1, 1, 1], [1, 0, 0, 0]])
    real = saved["trf_blocks.1.add2"][saved["batch_mask"]].astype(np.float64)
    row = next(line for line in out.splitlines() if line.startswith("trf_blocks.1.add2"))
    assert float(row.split()[4]) == pytest.approx(real.mean(), abs=1e-4)  # the mean column
    code, _, err = run(capsys, "inspect", "fine", "", "--preset", "tiny")
    assert code == 2 and "prompt 2 of the batch is empty" in err


def test_inspect_unknown_node_is_an_error(capsys):
    code, _, err = run(capsys, "inspect", "hi", "--preset", "tiny", "--node", "nope")
    assert code == 2 and "no node matches 'nope'" in err


def test_no_command_opens_the_app_on_the_remembered_or_default_model(monkeypatch):
    import explorer.ui.window.app as app
    seen = []
    shown = []
    monkeypatch.setattr(app, "run", lambda spec=None, argv=None, open_run=None, workspace=None:
                        seen.append(spec) or shown.append(workspace) or 0)
    assert main([]) == 0 and seen == [None] and shown == [None]
    assert main(["--workspace", "why"]) == 0 and shown[-1] == "why"
    with pytest.raises(SystemExit):  # a workspace the window has not: argparse's own line
        main(["--workspace", "nowhere"])
    assert main(["gui", "--preset", "tiny", "--device", "cpu"]) == 0
    assert seen[-1].preset == "tiny" and seen[-1].device == "cpu"
    assert main(["--preset", "tiny", "--seed", "3"]) == 0  # as the README's ./start.sh example
    assert seen[-1].preset == "tiny" and seen[-1].seed == 3


def test_compare_ln_prints_both_orders_and_saves_the_figure(capsys, tmp_path):
    plot = tmp_path / "cmp.png"
    code, out, _ = run(capsys, "compare-ln", "Every effort moves you", "--preset", "tiny",
                       "--depths", "2,4", "--depth", "2", "--plot", str(plot))
    assert code == 0
    assert "Pre-LN norm" in out and "Post-LN next tokens" in out
    assert "per layer at depth 2" in out and "Theorem 1" in out
    rows = [line.split() for line in out.splitlines() if line.strip().split(" ")[0] in ("2", "4")
            and len(line.split()) == 3]
    assert [int(r[0]) for r in rows][-2:] == [2, 4]  # last layer against depth
    from PySide6.QtGui import QImage
    assert QImage(str(plot)).width() == 1400


@pytest.mark.slow
def test_train_saves_and_resumes(capsys, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run(capsys, "train", "--preset", "tiny", "--steps", "4", "--eval-every", "2", "--batch-size", "2",
                            "--out", str(out), "--precision", "float32")
    assert "validation tokens in float32 on cpu;" in err
    assert code == 0 and "step 4: train loss" in stdout and "sample: 'Every effort moves you" in stdout
    assert (out / "model.safetensors").is_file() and (out / "optimizer.pt").is_file()
    code, stdout, err = run(capsys, "train", "--resume", "--steps", "6", "--out", str(out),
                            "--plot", str(tmp_path / "loss.png"))
    assert code == 0 and "resuming" in err and "step 6: train loss" in stdout
    code, _stdout, err = run(capsys, "train", "--preset", "tiny", "--steps", "1", "--out",
                             str(tmp_path / "elsewhere"), "--device", "nowhere")
    assert code == 2 and "nowhere" in err and err.count("\n") == 1  # one line, the devices
    from PySide6.QtGui import QImage
    assert QImage(str(tmp_path / "loss.png")).width() == 900
    import json
    saved = json.loads((out / "trainer.json").read_text())
    assert saved["step"] == 6 and saved["settings"]["precision"] == "float32"


def test_train_refuses_unreadable_text(capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00bad")
    code, _, err = run(capsys, "train", "--text", str(bad), "--out", str(tmp_path / "r"))
    assert code == 2 and "UTF-8" in err


@pytest.mark.slow
def test_ctrl_c_during_training_saves_and_says_how_to_resume(capsys, tmp_path, monkeypatch):
    from explorer.core.experiments import training

    original = training.Trainer.run

    def interrupted(self):
        for event in original(self):
            yield event
            if isinstance(event, training.StepEvent) and event.step == 3:
                raise KeyboardInterrupt

    monkeypatch.setattr(training.Trainer, "run", interrupted)
    out = tmp_path / "run"
    code, _, err = run(capsys, "train", "--preset", "tiny", "--steps", "50", "--batch-size", "2", "--out", str(out))
    assert code == 130 and "--resume" in err
    import json
    assert json.loads((out / "trainer.json").read_text())["step"] == 3
    # training again into the same folder without --resume is refused, the run untouched
    monkeypatch.undo()
    kept = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    code, _, err = run(capsys, "train", "--preset", "tiny", "--steps", "2", "--out", str(out))
    assert code == 2 and err.count("error:") == 1 and "Traceback" not in err
    assert f"{out} already holds a training run: continue it with --resume" in err
    assert f"--out {tmp_path / 'run-2'}" in err and not (tmp_path / "run-2").exists()
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == kept


def test_diff_points_at_the_first_diverging_node(capsys, tmp_path):
    code, out, _ = run(capsys, "diff", "Every effort moves you", "--a", "preset:tiny",
                       "--b", "mutation:unbiased-ln", "--layer", "1")
    assert code == 0 and out.strip().endswith("first divergence: trf_blocks.1.norm1")
    marked = [line for line in out.splitlines() if "<- first divergence" in line]
    assert len(marked) == 1 and marked[0].startswith("trf_blocks.1.norm1")
    path = save_checkpoint(build_model(preset("tiny"), seed=0), tmp_path / "same.safetensors")
    code, out, _ = run(capsys, "diff", "Every effort moves you", "--a", "preset:tiny", "--b", str(path))
    assert code == 0 and "no node differs by more than 0.0001" in out


def test_a_screenshot_with_an_empty_prompt_says_so_instead_of_waiting(capsys, tmp_path):
    code = main(["--screenshot", str(tmp_path / "x.png"), "--preset", "tiny", "--prompt", "  "])
    err = capsys.readouterr().err
    assert code == 2 and "the prompt did not run: The prompt is empty" in err
    assert not (tmp_path / "x.png").exists()


def test_gradients_prints_every_node_with_and_without_shortcuts(capsys, tmp_path):
    out_png = tmp_path / "grad.png"
    code, out, err = run(capsys, "gradients", "Every effort moves you", "--preset", "tiny",
                         "--no-shortcut", "--plot", str(out_png))
    assert code == 0 and "with shortcuts" in out and "shortcuts removed" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("trf_blocks.")]
    assert len(rows) == 2 * 11 and all(len(r) == 3 for r in rows)  # every node but the pattern
    assert "first block's gradient norm, with / without shortcuts:" in out
    assert out_png.stat().st_size > 10_000 and f"saved {out_png}" in err
    code, out, _ = run(capsys, "gradients", "Every effort moves you", "--preset", "tiny")
    assert "shortcuts removed" not in out
    code, out, _ = run(capsys, "gradients", "Every effort moves you", "--preset", "tiny",
                       "--no-shortcut", "--no-norm")
    assert "shortcuts removed, blocks' LayerNorms removed" in out
    code, _, err = run(capsys, "gradients", "Hi", "--preset", "tiny")
    assert code != 0 and "at least 2 tokens" in err


def test_gradients_on_a_llama_block_takes_its_own_nodes(capsys):
    code, out, err = run(capsys, "gradients", "Every effort moves you", "--preset", "llama-tiny",
                         "--node", "ff.silu")
    assert code == 0
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("trf_blocks.")]
    assert "trf_blocks.0.ff.silu" in rows and not any(".drop" in r for r in rows)
    code, _, err = run(capsys, "gradients", "Every effort moves you", "--preset", "llama-tiny",
                       "--node", "drop1")
    assert code == 2 and "--node takes a node of this model's block" in err and "ff.silu" in err


def test_the_commands_run_a_qwen3_block(capsys):
    """info, generate, inspect, attribute, heads (with the battery) and diff on a Qwen3
    block, whose heads are 16 wide though its width is 32."""
    code, out, _ = run(capsys, "info", "--preset", "qwen3-tiny")
    assert code == 0 and "4 heads (2 key/value)" in out and "Qwen3 block" in out
    code, out, err = run(capsys, "generate", "Every effort", "--max-new-tokens", "3",
                         "--preset", "qwen3-tiny")
    assert code == 0 and out.startswith("Every effort") and "3 tokens in" in err
    code, out, _ = run(capsys, "inspect", "Every effort", "--layer", "0", "--preset", "qwen3-tiny")
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("trf_blocks.0.")]
    assert code == 0 and rows[:2] == ["trf_blocks.0.norm1", "trf_blocks.0.att"]
    assert rows[-4:] == ["trf_blocks.0.ff.product", "trf_blocks.0.ff.fc3", "trf_blocks.0.ff",
                         "trf_blocks.0.add2"]
    code, out, _ = run(capsys, "attribute", "Every effort moves you", "--preset", "qwen3-tiny")
    assert code == 0 and "RMSNorm takes no mean out" in out
    code, out, _ = run(capsys, "heads", "The cat sat on the mat. The cat", "--induction",
                       "--preset", "qwen3-tiny")
    assert code == 0 and "strongest induction: block" in out
    code, out, _ = run(capsys, "diff", "Every effort", "--a", "preset:qwen3-tiny",
                       "--b", "mutation:no-shortcut")
    assert code == 0 and "first divergence: trf_blocks.0.add1" in out


def test_diff_runs_the_seeds_batch_and_names_a_shape_mismatch(capsys):
    code, out, _ = run(capsys, "diff", "Every effort moves", "Every day holds", "--a", "preset:tiny",
                       "--b", "mutation:ff-1024")
    assert code == 0 and "a batch of 2 prompts × 3 positions" in out
    assert "(2, 3, 1024)" in out and "shape mismatch, A (2, 3, 32) vs B (2, 3, 1024)" in out
    assert " inf" not in out
    code, out, _ = run(capsys, "diff", "Every effort moves you", "--a", "preset:tiny",
                       "--b", "mutation:no-activation", "--layer", "1")
    assert "first divergence: trf_blocks.1.ff.layers.1" in out and "one linear map" in out


def test_patch_prints_the_sweep_and_saves_csv_and_plot(capsys, tmp_path):
    clean = "When Mary and John went to the store, John gave a drink to"
    corrupt = "When Mary and John went to the store, Mary gave a drink to"
    code, out, err = run(capsys, "patch", "--clean", clean, "--corrupt", corrupt, "--answer", " Mary",
                         "--wrong", " John", "--preset", "tiny", "--csv", str(tmp_path / "p.csv"),
                         "--plot", str(tmp_path / "p.png"))
    assert code == 0 and "logit difference ' Mary' − ' John'" in out
    add2 = [line.split() for line in out.splitlines() if line.startswith("add2 ")]
    assert len(add2) == 1 and add2[0][-1] == "1.000"  # the last block's output restores it all
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 1 + 11 * 2
    assert (tmp_path / "p.png").stat().st_size > 5_000
    code, out, _ = run(capsys, "patch", "--clean", clean, "--corrupt", clean, "--answer", " Mary",
                       "--wrong", " John", "--preset", "tiny")
    assert code == 0 and "nothing to restore" in out
    code, _, err = run(capsys, "patch", "--clean", clean, "--corrupt", "When Mary", "--answer",
                       " Mary", "--wrong", " John", "--preset", "tiny")
    assert code == 2 and "same length" in err


def test_generate_applies_an_intervention_file_or_none_at_all(capsys, tmp_path):
    good = tmp_path / "good.json"
    good.write_text('{"interventions": [{"kind": "scale", "node": "trf_blocks.1.add2", "k": -4},'
                    ' {"kind": "heads", "node": "trf_blocks.0.att", "heads": [0, 1, 2, 3]}]}')
    args = ["generate", "Every effort moves you", "--preset", "tiny", "--max-new-tokens", "5", "--no-stop"]
    code, plain, _ = run(capsys, *args)
    code, changed, err = run(capsys, *args, "--intervene", str(good))
    assert code == 0 and changed != plain
    assert "intervention: trf_blocks.1.add2: scale ×-4" in err and "knock out heads [0, 1, 2, 3]" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"interventions": [{"kind": "scale", "node": "trf_blocks.0.att", "k": "x"}]}')
    code, out, err = run(capsys, *args, "--intervene", str(bad))
    assert code == 2 and "k must be a finite number" in err and out == ""
    off = tmp_path / "off.json"
    off.write_text(good.read_text().replace('{"interventions"', '{"enabled": false, "interventions"'))
    code, out, err = run(capsys, *args, "--intervene", str(off))
    assert code == 0 and out == plain and "switched off (\"enabled\": false): none of its 2 applied" in err
    assert "intervention:" not in err


def test_model_options_before_a_command_go_to_it_or_are_refused_in_one_line(capsys):
    """gpt-explorer --preset tiny attribute … explains tiny (the options were ignored);
    one a command does not take, or given twice with two values, is one line and 2."""
    code, out, err = run(capsys, "--preset", "tiny", "--seed", "3", "info")
    assert code == 0 and "emb_dim         32" in out and "seed 3" in out + err
    code, out, err = run(capsys, "--preset", "tiny", "attribute", "Every effort moves", "--target", " you")
    assert code == 0 and err.startswith("model: tiny")
    for argv, words in ((("--preset", "tiny", "download"), "--preset does not apply to download"),
                        (("--preset", "tiny", "info", "--preset", "gpt2-small"), "--preset is given twice"),
                        (("--preset", "tiny", "info", "--checkpoint", "x.pt"), "--checkpoint and --preset together")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (argv, err)
    code, out, err = run(capsys, "--preset", "tiny", "info", "--preset", "tiny")  # the same twice: fine
    assert code == 0


def test_every_preset_choice_in_the_help_is_the_table_of_presets():
    from explorer.cli import build_parser
    from explorer.core.base.devices import DTYPES
    from explorer.core.gpt.config import PRESETS

    parser = build_parser()
    commands = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices
    for name, sub in [("", parser), *commands.items()]:
        for action in sub._actions:
            if "--preset" in action.option_strings:  # train's and every model option's
                assert list(action.choices) == list(PRESETS), name
                assert ", ".join(PRESETS) in action.help, name
            if "--dtype" in action.option_strings:  # what the loader accepts, aliases too
                assert list(action.choices) == list(DTYPES) and ", ".join(DTYPES) in action.help


def test_diff_help_names_every_mutation_the_finder_makes(capsys):
    from explorer.cli import build_parser
    from explorer.core.experiments.divergence import mutate
    from explorer.core.gpt.mutations import MUTATIONS
    from explorer.core.gpt.model import GPTModel
    from explorer.core.gpt.config import preset

    with pytest.raises(SystemExit):
        build_parser().parse_args(["diff", "--help"])
    # argparse wraps the help's lines, at a name's hyphen too
    said = re.sub(r"-\s+", "-", " ".join(capsys.readouterr().out.split()))
    model = GPTModel(preset("tiny"))
    for name in MUTATIONS:  # each one named, and each one made
        assert name in said, name
        assert mutate(model, name, 1) is not model
    assert "ff-inner" in said and "no-norm2" in said and "wrong-shortcut2" in said


def test_train_keeps_snapshots_that_info_lists_and_checkpoint_opens(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = run(capsys, "train", "--preset", "tiny", "--steps", "6", "--eval-every", "3",
                       "--batch-size", "2", "--snapshots", "3", "--out", str(out))
    assert code == 0 and f"snapshot of step 6: {out}/snapshots/step000006.safetensors" in err
    code, stdout, _ = run(capsys, "info", str(out))
    steps = [line.split()[1] for line in stdout.splitlines() if line.strip().startswith("step ")]
    assert code == 0 and "snapshots: 3" in stdout and steps == ["0", "2", "6"]
    assert f"--checkpoint {out}@step6  validation loss" in stdout
    code, stdout, _ = run(capsys, "--checkpoint", f"{out}@step2", "info")
    assert code == 0 and f"model: snapshot at step 2 of {out}" in stdout
    code, _, err = run(capsys, "--checkpoint", f"{out}@step5", "info")
    assert code == 2 and "has no snapshot of step 5; it has @step0, @step2, @step6" in err
    code, _, err = run(capsys, "info", str(tmp_path))
    assert code == 2 and "is not a training run's folder" in err
    state = json.loads((out / "trainer.json").read_text())
    (out / "trainer.json").write_text(json.dumps({**state, "step": 10**9}))  # of 6
    code, stdout, _ = run(capsys, "info", str(out))
    assert code == 0 and "step ? of ? (" in stdout and "past the run's own end at 6 steps" in stdout
    assert "snapshots: 3" in stdout  # what the folder holds is still listed


def small_qwen3(transformers, tie: bool = True):
    """A random Qwen3ForCausalLM of 320 rows, 2 blocks 32 wide (seed 0)."""
    torch.manual_seed(0)
    config = transformers.Qwen3Config(vocab_size=320, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=8,
                                      max_position_embeddings=64, tie_word_embeddings=tie)
    return transformers.Qwen3ForCausalLM(config).eval()


def test_the_commands_read_text_with_a_llama_folders_own_tokenizer(capsys, tmp_path):
    """A Qwen3 folder as the Hub has it (config, weights, a tokenizer.json of 320 tokens):
    every command encodes and shows text with that tokenizer, never GPT-2's."""
    transformers = pytest.importorskip("transformers")
    from explorer.core.weights.tokenizers_files import tokenizer_for
    from tests.llama_folder import write_tokenizer

    small_qwen3(transformers).save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 320)
    tok = tokenizer_for(tmp_path)
    prompt = "Every effort moves you"
    ids = tok.encode(prompt)
    folder = str(tmp_path)
    code, out, err = run(capsys, "tokenize", prompt, "--checkpoint", folder)
    assert code == 0 and out.startswith(f"{len(ids)} tokens (Qwen3 (tokenizer.json))")
    assert "model:" not in err  # its weights were not loaded
    assert [int(line.split()[1]) for line in out.splitlines()[1:]] == ids
    code, out, err = run(capsys, "generate", prompt, "--max-new-tokens", "4", "--no-stop",
                         "--show-top", "2", "--checkpoint", folder)
    assert code == 0 and out.startswith(prompt)
    code, out, _ = run(capsys, "inspect", prompt, "--layer", "0", "--checkpoint", folder)
    assert code == 0 and f"prompt: {len(ids)} tokens" in out
    target = tok.token_piece(ids[1])
    code, out, _ = run(capsys, "attribute", prompt, "--target", target, "--checkpoint", folder)
    assert code == 0 and f"{target!r}" in out
    code, out, err = run(capsys, "attribute", prompt, "--target", prompt, "--checkpoint", folder)
    assert code == 2 and f"is {len(ids)} tokens" in err  # its own pieces, before the model loads
    assert len(err.strip().splitlines()) == 1 and "model:" not in err
    code, out, _ = run(capsys, "heads", prompt, "--checkpoint", folder)
    assert code == 0 and f"{len(ids)} prompt tokens" in out
    code, out, _ = run(capsys, "diff", prompt, "--a", folder, "--b", "mutation:no-shortcut")
    assert code == 0 and f"prompt: {len(ids)} tokens" in out
    saved = tmp_path / "run.gbrun"
    code, out, err = run(capsys, "generate", prompt, "--max-new-tokens", "3", "--no-stop",
                         "--save-run", str(saved), "--checkpoint", folder)
    assert code == 0 and saved.exists()
    from explorer.core.playground.run_file import read_run
    back = read_run(saved)
    assert back.prompt_ids == ids and back.passes[0].pieces == [tok.token_piece(i) for i in ids]
    assert out.strip() == prompt + tok.decode(back.tokens)


def test_a_carriage_return_in_a_name_is_shown_escaped_in_every_line(capsys, tmp_path):
    """A folder named with a carriage return would overwrite its own line on a terminal:
    every line that names it shows \\r instead."""
    out = tmp_path / "run\rx"
    code, _, err = run(capsys, "train", "--resume", "--out", str(out))
    assert code == 2 and "run\\rx: no resumable training run here" in err and "\r" not in err


def test_inspect_reaches_every_step_of_attention_the_graph_shows(capsys, tmp_path):
    """--attention saves every one of attention's steps (11 nodes inside a GPT-2 block's
    attention, the pattern among them); a step named alone needs no flag."""
    import numpy as np
    out = tmp_path / "att.npz"
    code, _, err = run(capsys, "inspect", "Every effort", "--preset", "tiny", "--node",
                       "trf_blocks.0.att*", "--attention", "--save", str(out))
    saved = np.load(out)
    assert code == 0 and "saved 13 tensors" in err
    assert saved["trf_blocks.0.att.keys"].shape == (1, 4, 2, 8)
    assert saved["trf_blocks.0.att.attn_weights"].shape == (1, 4, 2, 2)
    np.testing.assert_allclose(saved["trf_blocks.0.att.attn_weights"].sum(-1), 1.0, rtol=1e-6)
    code, stdout, _ = run(capsys, "inspect", "Every effort", "--preset", "tiny", "--node",
                          "trf_blocks.1.att.keys")
    rows = [line.split()[0] for line in stdout.splitlines() if line.startswith("trf_blocks")]
    assert code == 0 and rows == ["trf_blocks.1.att.keys"]


def test_a_run_saved_with_its_tensors_keeps_attentions_steps(capsys, tmp_path):
    """generate --save-run --save-tensors keeps what the graph can show: the prompt
    pass's queries, keys, values, scores and pattern of every block."""
    from explorer.core.playground.run_file import read_run
    path = tmp_path / "run.gbrun"
    code, _, _ = run(capsys, "generate", "Every effort", "--preset", "tiny", "--max-new-tokens",
                     "1", "--save-run", str(path), "--save-tensors", "5")
    views = read_run(path).passes[0].views
    assert code == 0
    for block in (0, 1):
        for step in ("queries", "keys", "values", "attn_scores", "masked_scores", "attn_weights"):
            assert views[f"trf_blocks.{block}.att.{step}"].array is not None, (block, step)
    assert views["trf_blocks.1.att.keys"].array.shape == (1, 4, 2, 8)


def test_train_says_its_losses_are_estimates(capsys, tmp_path):
    code, out, _ = run(capsys, "train", "--preset", "tiny", "--steps", "1", "--eval-every", "1",
                       "--batch-size", "1", "--snapshots", "0", "--out", str(tmp_path / "r"))
    assert code == 0 and "(estimates on 4 batches each)" in out


def test_norm_places_a_presets_norms_and_is_refused_where_it_cannot(capsys, tmp_path):
    code, out, err = run(capsys, "inspect", "Every effort", "--preset", "tiny", "--norm", "peri",
                         "--layer", "1")
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("trf_blocks.")]
    assert code == 0 and "Peri-LN" in err
    assert rows[:4] == ["trf_blocks.1.norm1", "trf_blocks.1.att", "trf_blocks.1.post_norm1",
                        "trf_blocks.1.drop1"]
    code, _, err = run(capsys, "info", "--norm", "dyt")
    assert code == 2 and "--norm dyt places a preset's norms: give it with --preset" in err
    code, _, err = run(capsys, "inspect", "x", "--preset", "tiny", "--norm", "sandwich")
    assert code == 2 and "invalid choice: 'sandwich'" in err
    code, _, err = run(capsys, "train", "--out", str(tmp_path / "none"), "--resume", "--norm", "post")
    assert code == 2 and "a run's norms stay where it started" in err


def test_compare_ln_measures_every_placement_and_writes_them_as_json(capsys, tmp_path):
    import json
    out_file = tmp_path / "placements.json"
    code, out, _ = run(capsys, "compare-ln", "Every effort", "--preset", "tiny", "--depths", "2",
                       "--depth", "3", "--norms", "branch,dyt", "--json", str(out_file))
    assert code == 0 and "every placement at depth 3" in out
    lines = [line for line in out.splitlines() if line.startswith(("Branch norm", "DyT"))]
    assert len(lines) == 2 and all("gradient last/first block" in line for line in lines)
    data = json.loads(out_file.read_text())
    assert list(data) == ["branch", "dyt"]
    assert all(len(v["grad_norms"]) == len(v["residual_norms"]) == 3 for v in data.values())
    assert "losses" not in data["dyt"]
    code, _, err = run(capsys, "compare-ln", "x", "--preset", "tiny", "--norms", "pre,pre")
    assert code == 2 and "--norms takes placements separated by commas, each once" in err


@pytest.mark.parametrize("name,placement", [("gemma3-tiny", "Peri-LN"), ("olmo2-tiny", "Branch norm")])
def test_compare_ln_on_a_family_with_one_placement_says_so_and_measures_the_rest(
        capsys, tmp_path, name, placement):
    """OLMo's and Gemma's blocks have no Pre-LN or Post-LN twin: the prompt's part is a
    note, not a traceback, and the experiments (on GPT-2's block) still run and draw."""
    code, out, err = run(capsys, "compare-ln", "Every effort", "--preset", name, "--depths", "2",
                         "--depth", "2", "--norms", "pre,peri", "--plot", str(tmp_path / "c.png"))
    title = "Gemma 3" if name.startswith("gemma") else "OLMo 2 / 3"
    assert code == 0, err
    assert f"note: The {title} block has its norms in one place only ({placement})" in err
    assert "residual stream after each block" not in out and "Pre-LN next tokens" not in out
    assert "every placement at depth 2" in out and (tmp_path / "c.png").stat().st_size > 0


def test_compare_ln_draws_one_picture_per_experiment(capsys, tmp_path):
    from PySide6.QtGui import QImage
    code, out, err = run(capsys, "compare-ln", "Every effort", "--preset", "tiny", "--depths", "2",
                         "--depth", "2", "--norms", "pre,post,dyt", "--train", "2",
                         "--figures", str(tmp_path))
    assert code == 0, err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["placements-gradient.png", "placements-loss.png", "placements-stream.png"]
    for name in names:
        image = QImage(str(tmp_path / name))
        assert (image.width(), image.height()) == (1000, 620)
        colours = {image.pixelColor(x, y).name() for x in range(0, 1000, 2) for y in range(0, 620, 2)}
        assert {"#1f4e8c", "#d2691e", "#6d4c41"} <= colours  # pre, post and DyT drawn
    code, _, err = run(capsys, "compare-ln", "x", "--preset", "tiny",
                       "--figures", str(tmp_path / "nowhere"))
    assert code == 2 and "--figures takes a folder that exists" in err


@pytest.mark.parametrize("name,mib", [("smollm2-135m", "360.0"), ("llama3.2-1b", "8,192.0"),
                                      ("qwen2.5-0.5b", "768.0"), ("gpt2-small", "72.0")])
def test_info_counts_the_kv_cache_of_the_key_value_heads(capsys, name, mib):
    """Grouped-query attention caches its key/value heads only: 2 × layers × kv heads ×
    head_dim × context × 4 bytes, as the Blocks view counts it per token."""
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.sizes import kv_cache_bytes
    from explorer.core.lessons.compare_blocks import cache_cost
    cfg = preset(name)
    want = 2 * cfg.n_layers * cfg.kv_heads * cfg.head_dim * cfg.context_length * 4
    assert f"{want / 2**20:,.1f}" == mib
    code, out, _ = run(capsys, "info", "--preset", name)
    assert code == 0 and f"KV cache at full context {mib} MiB" in out
    small = build_model(preset(name, n_layers=1, vocab_size=50257, emb_dim=cfg.emb_dim), seed=0)
    cost = cache_cost(small, torch.float32)
    assert cost.per_token == kv_cache_bytes(small.cfg, 1)  # the Blocks view counts the same


def test_info_on_a_checkpoint_says_the_model_once(capsys, tmp_path):
    from explorer.core.gpt.build import build_model
    from explorer.core.gpt.config import preset
    from explorer.core.weights.checkpoints import save_checkpoint
    path = tmp_path / "m.safetensors"
    save_checkpoint(build_model(preset("tiny"), seed=0), path)
    code, out, err = run(capsys, "info", "--checkpoint", str(path))
    assert code == 0 and (out + err).count("model: ") == 1 and out.startswith("model: ")


def test_ids_past_the_tokenizer_are_chosen_shown_saved_and_read_back(capsys, tmp_path):
    """A Qwen3 folder of 320 rows with a tokenizer of 300 tokens (as Qwen pads 151,665 to
    151,936): the model's most likely token is a padded row; generate chooses it and
    writes <id N>; --save-run keeps the run, which reads back with the same tokens and the
    probability over all 320 rows."""
    transformers = pytest.importorskip("transformers")
    from explorer.core.playground.run_file import read_run
    from tests.llama_folder import write_tokenizer
    model = small_qwen3(transformers, tie=False)
    with torch.no_grad():  # row 310 leads: every hidden state pushed along its weights
        model.lm_head.weight[310] = model.model.norm.weight * 40
    model.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, 300)
    prompt = "Every effort moves you"
    with torch.no_grad():
        from explorer.core.weights.tokenizers_files import tokenizer_for
        ids = tokenizer_for(tmp_path).encode(prompt)
        probs = torch.softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1)
    assert int(probs.argmax()) == 310
    saved = tmp_path / "run.gbrun"
    code, out, err = run(capsys, "generate", prompt, "--max-new-tokens", "2", "--no-stop",
                         "--save-run", str(saved), "--checkpoint", str(tmp_path))
    assert code == 0, err
    assert out.startswith(prompt + "<id 310>")
    assert "ids 300–319 have no token in the tokenizer (Qwen3 (tokenizer.json)): 20 of the " \
           "model's 320 rows, shown as <id N>" in err and "not its own" not in err
    back = read_run(saved)
    assert back.tokens[0] == 310 and back.passes[0].top_pieces[0] == "<id 310>"
    assert back.passes[0].top_probs[0] == pytest.approx(float(probs[310]), rel=1e-4)
