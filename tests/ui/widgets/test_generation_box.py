"""The generation settings' boxes hold exactly what the command line and a saved run's
reader accept (one table, generation.BOUNDS): a setting at the edge of the range comes
back from the boxes unchanged, and one past it is refused before it reaches them."""

import pytest

from explorer.core.run.generation import BOUNDS, GenerationSettings
from explorer.ui.widgets.generation_box import GenerationBox


def test_each_box_holds_the_range_the_readers_accept(qtbot):
    box = GenerationBox()
    qtbot.addWidget(box)
    assert (box.temperature.minimum(), box.temperature.maximum()) == BOUNDS["temperature"]
    assert (box.top_p.minimum(), box.top_p.maximum()) == BOUNDS["top_p"]
    assert (box.seed.minimum(), box.seed.maximum()) == BOUNDS["seed"] == (0, 2**31 - 1)
    assert box.top_k.maximum() == BOUNDS["top_k"][1] and box.top_k.minimum() == 0  # 0: off


@pytest.mark.parametrize("edge", ["low", "high"])
def test_settings_at_the_edges_come_back_from_the_boxes_unchanged(qtbot, edge):
    box = GenerationBox()
    qtbot.addWidget(box)
    at = 0 if edge == "low" else 1
    s = GenerationSettings(greedy=False, temperature=BOUNDS["temperature"][at],
                           top_k=BOUNDS["top_k"][at], top_p=BOUNDS["top_p"][at] if at == 0 else None,
                           seed=BOUNDS["seed"][at])
    s.validate(BOUNDS["top_k"][1])
    box.apply(s)
    box.seed.setValue(s.seed)
    back = box.settings()
    assert (back.temperature, back.top_k, back.top_p, back.seed) == (s.temperature, s.top_k, s.top_p, s.seed)


@pytest.mark.parametrize("change, words", [
    (dict(top_k=2**31), "top-k must be"), (dict(seed=2**31), "the sampling seed must be"),
    (dict(temperature=101.0), "temperature must be"), (dict(top_p=1e-7), "top-p must be")])
def test_one_past_the_edge_is_refused_before_any_box_sees_it(change, words):
    with pytest.raises(ValueError, match=words):
        GenerationSettings(greedy=False, **change).validate(BOUNDS["top_k"][1])


def test_a_setting_finer_than_its_box_shows_comes_back_exact_until_changed(qtbot):
    """A saved run's temperature 0.015 and top-p 0.1234567 (legal on the command line)
    are shown rounded (0.02, 0.123457) and replayed exact; a value the user types is the
    box's own."""
    box = GenerationBox()
    qtbot.addWidget(box)
    box.apply(GenerationSettings(greedy=False, temperature=0.015, top_p=0.1234567))
    assert box.temperature.text() in ("0.01", "0.02") and box.top_p.value() == 0.123457
    s = box.settings()
    assert (s.temperature, s.top_p) == (0.015, 0.1234567)
    box.temperature.setValue(0.5)
    box.top_p.setValue(0.25)
    assert (box.settings().temperature, box.settings().top_p) == (0.5, 0.25)
