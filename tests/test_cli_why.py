"""gpt-explorer attribute and heads: the numbers printed and written are the core's."""

import csv

import pytest
from PySide6.QtGui import QImage

from explorer.cli import main
from explorer.core.attribution.why import why_token
from explorer.core.gpt.tokenizer import encode
from explorer.core.run.generation import GenerationSettings, generate
from explorer.core.sources import random_model


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_attribute_prints_the_parts_and_writes_the_table_and_figure(capsys, tmp_path):
    table, figure = tmp_path / "layers.csv", tmp_path / "why.png"
    code, out, err = run(capsys, "attribute", "I don't", "--preset", "tiny", "--target", " know",
                         "--vs", " say", "--csv", str(table), "--plot", str(figure), "--top", "3")
    assert code == 0, err
    model = random_model("tiny", seed=0).model
    ids = encode("I don't")
    why = why_token(model, ids, len(ids) - 1, encode(" know")[0], encode(" say")[0])
    assert f"logit difference {why.attribution.logit:.3f}" in out
    assert "Why ' know' rather than ' say' at position 2" in out
    assert out.count("block ") >= 6  # three heads and three neurons
    rows = list(csv.DictReader(table.open()))
    assert [int(r["block"]) for r in rows] == [0, 1]
    assert float(rows[1]["contribution"]) == pytest.approx(why.layers[1].contribution, rel=1e-4)
    assert QImage(str(figure)).width() == 1400


def test_attribute_at_a_generation_step_explains_the_token_it_chose(capsys):
    code, out, err = run(capsys, "attribute", "Every effort moves you", "--preset", "tiny",
                         "--step", "3")
    assert code == 0, err
    model = random_model("tiny", seed=0).model
    ids = encode("Every effort moves you")
    chosen = generate(model, ids, GenerationSettings(max_new_tokens=3, stop_at_eot=False)).new_ids
    why = why_token(model, ids + list(chosen[:2]), len(ids) + 1, chosen[2])
    assert f"logit {why.attribution.logit:.3f}" in out
    assert f"at position {len(ids) + 1}" in out


def test_a_step_beyond_the_context_is_refused_before_generating(capsys):
    """The tiny model holds 64 tokens: --step 64 or 1000 is one line, at once (no token
    generated first), and --step 63 works."""
    for step in ("64", "1000"):
        code, out, err = run(capsys, "attribute", "Hi", "--preset", "tiny", "--step", step)
        assert code == 2 and out == ""
        assert f"--step {step}: this model's context holds 64 tokens" in err
        assert "give --step 0..63" in err and err.count("error:") == 1
    code, out, err = run(capsys, "attribute", "Hi", "--preset", "tiny", "--step", "63")
    assert code == 0, err


def test_a_target_of_two_tokens_is_one_line(capsys):
    code, out, err = run(capsys, "attribute", "I don't", "--preset", "tiny", "--target", " two words")
    assert code == 2 and "--target ' two words' is 2 tokens" in err and len(err.strip().splitlines()) == 1


def test_heads_scores_every_head_and_runs_the_battery(capsys, tmp_path):
    table, figure = tmp_path / "heads.csv", tmp_path / "heads.png"
    code, out, err = run(capsys, "heads", "The cat sat on the mat. The cat", "--preset", "tiny",
                         "--induction", "--csv", str(table), "--plot", str(figure))
    assert code == 0, err
    assert "battery 4/4" in err and "strongest induction: block" in out
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == 2 * 4 and {"induction", "copying", "previous-token"} <= set(rows[0])
    assert QImage(str(figure)).width() == 5 * 330


def test_attributes_layer_table_puts_every_value_under_its_header(capsys):
    """Each row has a value in every column, right-aligned to its header's end: the lens's
    token id included."""
    from explorer.core.attribution.layer_table import COLUMNS
    code, out, _ = run(capsys, "attribute", "Every effort moves you", "--preset", "tiny")
    lines = out.splitlines()
    header = lines.index("  ".join(COLUMNS))
    model = random_model("tiny", seed=0).model
    ids = encode("Every effort moves you")
    why = why_token(model, ids, len(ids) - 1)
    ends = [len("  ".join(COLUMNS[:i + 1])) for i in range(len(COLUMNS))]
    for row, line in zip(why.layers, lines[header + 1:header + 3]):
        assert len(line) == ends[-1]
        for end, value in ((ends[0], str(row.block)), (ends[-2], str(row.lens_top_id)),
                           (ends[-1], f"{row.contribution:+.3f}")):
            assert line[:end].endswith(value)
