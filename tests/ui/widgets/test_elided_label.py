"""The model's line in the status bar gives way to the status beside it: cut with an
ellipsis, the whole line in its tooltip, never drawn under the status."""

from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from explorer.ui.widgets.elided_label import ElidedLabel

LINE = ("smollm2-135m · random init (seed 0) · UNTRAINED: output is noise · 30 blocks · 576 wide · "
        "9 heads (3 key/value) · 135.2M parameters · Llama block · cpu · float32")


def test_a_long_line_is_cut_with_an_ellipsis_beside_its_neighbour(qtbot):
    row = QWidget()
    qtbot.addWidget(row)
    layout = QHBoxLayout(row)
    label = ElidedLabel()
    label.setText(LINE)
    status = QLabel("Generated 20 tokens, 15.4 tok/s — reached the token limit")
    layout.addWidget(label, 1)
    layout.addWidget(status)
    row.resize(700, 30)
    row.show()
    qtbot.waitExposed(row)
    assert label.text() == LINE and label.toolTip() == LINE
    assert label.geometry().right() < status.geometry().left()
    drawn = label.elided()
    assert drawn.endswith("…") and LINE.startswith(drawn[:-1])
    assert label.fontMetrics().horizontalAdvance(drawn) <= label.contentsRect().width()
    row.resize(2000, 30)
    qtbot.waitUntil(lambda: label.elided() == LINE, timeout=60_000)
