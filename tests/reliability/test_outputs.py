"""One output rule for everything the explorer writes: a folder, a FIFO, a device or a
missing folder is refused with one line before any work starts; a write goes to a
temporary name and becomes the target only when complete."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.core.base.outputs import OutputError, atomic_output, check_output


def test_the_rule_refuses_what_is_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="is a FIFO, not a file"):
        check_output(fifo)
    link = tmp_path / "link.png"
    link.symlink_to(fifo)
    with pytest.raises(OutputError, match="is a FIFO"):
        check_output(link)
    with pytest.raises(OutputError, match="is a folder"):
        check_output(tmp_path)
    with pytest.raises(OutputError, match="is a device"):
        check_output("/dev/null")
    # a suffix the writer would add (numpy's .npz) does not turn a device into a new file
    with pytest.raises(OutputError, match="/dev/full is a device, not a file"):
        check_output("/dev/full", ".npz")
    with pytest.raises(OutputError, match="is a FIFO"):
        check_output(fifo, ".npz")
    assert check_output(tmp_path / "arrays", ".npz") == tmp_path / "arrays.npz"
    with pytest.raises(OutputError, match="does not exist"):
        check_output(tmp_path / "no" / "such" / "out.png")
    with pytest.raises(OutputError, match="empty"):
        check_output("  ")
    assert check_output(tmp_path / "runs", ".npz") == tmp_path / "runs.npz"
    assert check_output(tmp_path / "a.npz", ".npz") == tmp_path / "a.npz"
    (tmp_path / "old.csv").write_text("old")
    assert check_output(tmp_path / "old.csv") == tmp_path / "old.csv"  # replaced when written


def test_a_failed_write_leaves_nothing_that_looks_complete(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("the previous, complete file")
    with pytest.raises(RuntimeError):
        with atomic_output(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("the disk filled up")
    assert target.read_text() == "the previous, complete file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temporary left
    with atomic_output(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".csv" and tmp != target
        tmp.write_text("new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
    with pytest.raises(OutputError, match="nothing was written"):
        with atomic_output(tmp_path / "empty.png"):
            pass
    assert not (tmp_path / "empty.png").exists()


def _cli(*argv, timeout=240):
    return subprocess.run([sys.executable, "-m", "explorer", *argv], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})


@pytest.mark.parametrize("argv", [
    ("gradients", "Every effort", "--preset", "tiny", "--plot", "{fifo}"),
    ("compare-ln", "Every effort", "--preset", "tiny", "--plot", "{fifo}"),
    ("patch", "--clean", "a b", "--corrupt", "a c", "--answer", " b", "--wrong", " c",
     "--preset", "tiny", "--csv", "{fifo}"),
    ("inspect", "Every effort", "--preset", "tiny", "--save", "{fifo}"),
    ("inspect", "Every effort", "--preset", "tiny", "--save", "{folder}"),
    ("train", "--text", "{text}", "--preset", "tiny", "--steps", "2", "--batch-size", "2", "--out", "{out}",
     "--plot", "{fifo}"),
    ("--preset", "tiny", "--screenshot", "{fifo}"),
])
def test_every_writer_refuses_a_fifo_or_a_folder_before_any_work(tmp_path, argv, capsys):
    """Through the command's own entry point (as `python -m explorer` calls it)."""
    from explorer.cli import main
    fifo = tmp_path / "target.npz"
    os.mkfifo(fifo)
    (tmp_path / "text.txt").write_text("Every effort moves you. " * 200)
    values = {"fifo": str(fifo), "folder": str(tmp_path), "text": str(tmp_path / "text.txt"),
              "out": str(tmp_path / "run")}
    code = main([a.format(**values) for a in argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and re.match(r"gpt-explorer( [\w-]+)?: error: ", lines[0]), err
    assert ("is a FIFO" in lines[0]) or ("is a folder" in lines[0])
    assert not (tmp_path / "run").exists()  # training did not start
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target.npz", "text.txt"]
    assert Path(fifo).exists()


@pytest.mark.slow
def test_a_closed_or_broken_standard_output_never_ends_in_a_traceback(tmp_path):
    py = f"{sys.executable} -m explorer"
    closed = subprocess.run(f'{py} tokenize "Every effort moves you" >&-', shell=True,
                            capture_output=True, text=True, timeout=120)
    assert closed.returncode == 0 and "Traceback" not in closed.stderr and closed.stderr == ""
    both = subprocess.run(f'{py} tokenize "" --bogus >&- 2>&-', shell=True, capture_output=True,
                          text=True, timeout=120)
    assert both.returncode == 2  # argparse's usage error, written nowhere
    broken = subprocess.run(f'{py} tokenize "{"word " * 3000}" | head -c 10', shell=True,
                            capture_output=True, text=True, timeout=120)
    assert broken.stdout == "3001 token" and "Traceback" not in broken.stderr
    assert "BrokenPipe" not in broken.stderr and "Exception ignored" not in broken.stderr


def test_small_inputs_that_meant_something_else_are_refused(capsys, tmp_path):
    """A seed past torch's range, an empty --checkpoint (silently the default model),
    heads given as true (taken as head 1)."""
    from explorer.cli import main
    from explorer.core.gpt.config import preset
    from explorer.core.experiments.interventions import load_file
    for argv, said in ((["info", "--preset", "tiny", "--seed", str(2 ** 64 + 5)], "between 0 and 2**63"),
                       (["info", "--preset", "tiny", "--seed", "-1"], "between 0 and 2**63"),
                       (["info", "--checkpoint", ""], "--checkpoint needs a path")):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2 and said in capsys.readouterr().err
    bad = tmp_path / "iv.json"
    bad.write_text('{"interventions": [{"kind": "heads", "node": "trf_blocks.0.att", "heads": [true]}]}')
    with pytest.raises(ValueError, match="heads must be numbers 0..3"):
        load_file(bad, preset("tiny"))


def test_weights_that_are_not_finite_in_the_loaded_dtype_are_refused(tmp_path):
    """A weight of 1e5 overflows float16 (inf there, NaN logits); an inf in the file is
    refused in any dtype; the message names the tensor, the count and what to do."""
    import torch
    from explorer.core.weights.checkpoints import save_checkpoint
    from explorer.core.gpt.config import preset
    from explorer.core.gpt.build import build_model
    from explorer.core.sources import ModelSpec, open_model
    model = build_model(preset("tiny"), seed=1)
    with torch.no_grad():
        model.trf_blocks[1].ff.layers[0].weight[0, :3] = 1e5
    big = save_checkpoint(model, tmp_path / "big.safetensors")
    assert open_model(ModelSpec(checkpoint=str(big))).model is not None  # fine in float32
    with pytest.raises(ValueError, match=r"3 weight values are not finite in float16, the first 3 "
                                         r"in trf_blocks\.1\.ff\.layers\.0\.weight; .*load it in float32"):
        open_model(ModelSpec(checkpoint=str(big), dtype="float16"))
    with torch.no_grad():
        model.final_norm.scale[5] = float("inf")
    inf = save_checkpoint(model, tmp_path / "inf.safetensors")
    with pytest.raises(ValueError, match=r"'final_norm\.scale' contains 1 NaN/Inf value"):
        open_model(ModelSpec(checkpoint=str(inf)))  # the file's own check, before the dtype
