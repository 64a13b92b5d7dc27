"""Every plot reads right at a glance: axes of counted things (blocks, layers, tokens,
positions, heads, ids) tick at whole numbers only, no two tick labels of an axis stand
on each other, and no button sits over an axis."""

import re

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage, QPainter

from explorer.ui.views.registry import BY_KEY
from tests.ui.conftest import run_and_wait, settle

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out

# a label that counts: 'block', 'position', 'depth (layers)' — not 'ff.layers.2.weight'
COUNTED = re.compile(r"(?<![\w.])(layer|block|token|position|head|vector|depth|query|key)s?(?![\w.])", re.I)


def plots_in(widget):
    for view in widget.findChildren(pg.GraphicsView):
        if not view.isVisible():
            continue
        for item in view.scene().items():
            if isinstance(item, pg.PlotItem) and item.isVisible():
                yield item


def tick_texts(axis):
    """(text, rectangle) of every tick label the axis draws now."""
    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    if specs is None:
        return []
    return [(text, rect) for rect, _flags, text in specs[2]]


def axis_faults(plot, where: str) -> list[str]:
    faults = []
    if not plot.buttonsHidden:  # it appears on hover, over the bottom axis
        faults.append(f"{where}: the auto-range button can show over the axis")
    for side in ("bottom", "left"):
        axis = plot.getAxis(side)
        if not axis.isVisible():
            continue
        texts = tick_texts(axis)
        label = axis.labelText or ""
        for i, (text, rect) in enumerate(texts):
            for other, rect2 in texts[i + 1:]:
                if rect.adjusted(1, 1, -1, -1).intersects(rect2.adjusted(1, 1, -1, -1)):
                    faults.append(f"{where} {side} ('{label}'): '{text}' overlaps '{other}'")
        if COUNTED.search(label):
            for text, _ in texts:
                try:
                    value = float(text.replace("−", "-"))
                except ValueError:
                    continue  # a token's text, a node's name: a label, not a number
                if value != int(value):
                    faults.append(f"{where} {side} ('{label}'): tick '{text}' is not whole")
    return faults


@pytest.mark.parametrize("preset,size", [("tiny", (1366, 740)), ("tiny", (1920, 1050)),
                                         ("gpt2-small", (1366, 740))])
def test_every_plot_has_whole_counted_ticks_and_no_overlapping_labels(qtbot, make_window, preset, size):
    window = make_window(preset=preset)
    window.resize(*size)
    window._default_dock_sizes()
    run_and_wait(qtbot, window, max_tokens=3)
    window.view("ln_compare")._compare()
    window.view("gradients").run_button.click()
    # the gradient experiment builds twins at several depths, the patching sweep runs the
    # model once per node and block: on tiny only (the axes are the same code)
    experiment = preset == "tiny"
    if experiment:
        window.view("patching").request()
        window.view("ln_compare").depths.setText("2, 3, 12")
        window.view("ln_compare").run_button.click()
    qtbot.waitUntil(lambda: bool(window.view("ln_compare").runs) and window.view("gradients").report is not None
                    and (window.view("patching").sweep is not None or not experiment) and
                    (window.view("ln_compare").result is not None or not experiment), timeout=240_000)
    faults = []
    for key in [k for k in BY_KEY if k != "graph"]:  # every docked view, built as it comes
        window.show_view(key)
        settle(qtbot, window)
        if not list(plots_in(window.docks[key].widget())):
            continue  # a table, text or form: no axes
        for node in ("trf_blocks.0.ff.layers.1", "trf_blocks.1.att.attn_weights", "out_head"):
            window.session.set_node(node)
            settle(qtbot, window)
            for i, plot in enumerate(plots_in(window.docks[key].widget())):
                faults += axis_faults(plot, f"{key} plot {i} at {node}")
    window.session.show_step(1)  # a generated step: one position
    settle(qtbot, window)
    for key in ("inspector", "attention", "distributions"):
        window.show_view(key)
        settle(qtbot, window)
        for i, plot in enumerate(plots_in(window.docks[key].widget())):
            faults += axis_faults(plot, f"{key} plot {i} at a step")
    assert not sorted(set(faults)), "\n".join(sorted(set(faults)))
