"""A token's chip never breaks across lines: its piece and its number (the token id, or
the probability of a generated token) stay on one line however narrow the pane."""

from PySide6.QtGui import QTextDocument

from explorer.core.gpt.tokenizer import encode
from explorer.ui.widgets.token_chips import chip_row
from tests.ui.alone import Alone


def lines_split(document: QTextDocument, width: float) -> list[str]:
    """The chips laid out over more than one line (a chip ends in a no-break space and
    the next begins after a plain one)."""
    document.setTextWidth(width)
    document.documentLayout().documentSize()  # lay it out
    split = []
    block = document.begin()
    while block.isValid():
        layout, text = block.layout(), block.text()
        start = 0
        ends = [i for i, ch in enumerate(text) if ch == " " and text[i - 1:i] == "\u00a0"]
        for end in ends + [len(text)]:
            chip = text[start:end]
            if chip.strip("\u00a0"):
                first = layout.lineForTextPosition(start).lineNumber()
                last = layout.lineForTextPosition(max(start, end - 1)).lineNumber()
                if first != last:
                    split.append(chip)
            start = end + 1
        block = block.next()
    return split


def test_prompt_chips_keep_each_piece_with_its_id(qapp):
    ids = encode("Every effort moves you, and the model predicts what comes next in the text")
    document = QTextDocument()
    document.setHtml(chip_row(ids))
    for width in (150, 230, 330):
        assert lines_split(document, width) == []
    # a line's width holds several chips: lines do break, between chips
    assert document.documentLayout().documentSize().height() > 3 * document.defaultFont().pointSize()


def test_generated_chips_keep_each_token_with_its_probability(qtbot):
    alone = Alone(qtbot)
    alone.run("Every effort moves you", max_tokens=24)
    view = alone.prompt
    document = view.output.document().clone()
    probs = [f"{s.prob:.2g}" for s in alone.session.steps]
    assert all(p in document.toPlainText() for p in probs) and len(probs) == 24
    for width in (150, 200, 330):
        assert lines_split(document, width) == []
