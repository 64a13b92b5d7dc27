"""No plot is wider or taller than its widget: a title or axis text wider than the room
makes pyqtgraph lay the plot out past its widget's edge, which then cuts it off (the
next-token chart lost its bars' ends and half its axis label at 1728 px). Every view's
plots are checked with their data in tests/ui/window/test_room.py; here the next-token
chart's labels."""

import pyqtgraph as pg
import pytest

from tests.ui.conftest import run_and_wait


FONT_SLACK = 1.1


def overflowing(widget) -> list[str]:
    found = []
    for view in widget.findChildren(pg.GraphicsView):
        central = view.centralWidget
        if central is None or not view.isVisible():
            continue
        port = view.viewport()
        rect = central.geometry()
        least = central.minimumWidth() * FONT_SLACK  # another machine's fonts may be wider
        if rect.width() > port.width() + 1 or rect.height() > port.height() + 1 or \
                least > port.width():
            owner = view.parent()
            found.append(f"{type(owner).__name__}: {rect.width():.0f}x{rect.height():.0f} "
                         f"(at least {least:.0f} wide) in {port.width()}x{port.height()}")
    return found


@pytest.mark.slow
def test_every_next_token_label_fits_its_axis(qtbot, make_window):
    """A tick label wider than its axis is not drawn at all (' restraints 0.00013' left
    a blank row): long pieces are cut to fit, the probability always shows."""
    from PySide6.QtGui import QFontMetrics

    from explorer.ui.plots.plot_axes import nice_below

    window = make_window("gpt2-small")
    run_and_wait(qtbot, window, max_tokens=1)
    window.show_view("next_token")
    panel, current = window.view("next_token"), window.session.current
    qtbot.waitUntil(lambda: panel.what.text() == "Next token after the prompt", timeout=60_000)
    axis = panel.plot.getAxis("left")
    metrics = QFontMetrics(axis.font())
    labels = [text for _, text in axis._tickLevels[0]]
    assert len(labels) == len(current.top_ids) == 10
    for text, prob in zip(labels, current.top_probs):
        assert text.endswith(f" {prob:.2g}") and len(text) > len(f" {prob:.2g}")
        assert metrics.horizontalAdvance(text) <= panel.axis_width - 8
    bottom = panel.plot.getAxis("bottom")  # two labels that cannot run together
    (zero, (mark, text)), = bottom._tickLevels
    top = max(current.top_probs)
    assert zero == (0.0, "0") and 0.28 * top < mark <= 0.7 * top and float(text) == mark
    assert [nice_below(x) for x in (0.000126, 0.7, 0.35, 3e-5, 0.2)] == [1e-4, 0.5, 0.2, 2e-5, 0.2]
    long = panel.label(" internationalisation", 0.000123)
    assert long.startswith("·intern") and "…" in long and long.endswith(" 0.00012")
    window.prompt.select(0)
    qtbot.waitUntil(lambda: panel.what.text() == "Next token at step 0", timeout=60_000)
