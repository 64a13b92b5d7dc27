"""The prompt box lays out a long word in linear time: a saved run's (or a pasted) one
word of 300,000 characters wraps anywhere, set before the text goes in; a short prompt
still wraps at word boundaries."""

from PySide6.QtCore import QMimeData
from PySide6.QtGui import QTextOption

from explorer.ui.widgets.prompt_edit import LONG_TEXT, PromptEdit

WORD = QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere
ANYWHERE = QTextOption.WrapMode.WrapAnywhere


def test_a_long_word_is_wrapped_anywhere_and_a_short_prompt_at_words(qtbot):
    edit = PromptEdit("Every effort moves you")
    qtbot.addWidget(edit)
    edit.resize(400, 90)
    edit.show()
    assert edit.wordWrapMode() == WORD
    modes = []
    edit.document().contentsChange.connect(lambda *a: modes.append(edit.wordWrapMode()))
    edit.setPlainText("x" * 300_000)  # a saved run's prompt
    assert modes and modes[-1] == ANYWHERE and edit.wordWrapMode() == ANYWHERE
    qtbot.waitExposed(edit)
    assert edit.toPlainText() == "x" * 300_000  # nothing cut
    edit.setPlainText("a short prompt again")
    assert edit.wordWrapMode() == WORD


def test_a_paste_that_makes_the_text_long_switches_before_it_goes_in(qtbot):
    edit = PromptEdit("start ")
    qtbot.addWidget(edit)
    seen = []
    edit.document().contentsChange.connect(lambda *a: seen.append(edit.wordWrapMode()))
    data = QMimeData()
    data.setText("y" * (LONG_TEXT + 1))
    edit.insertFromMimeData(data)
    assert seen[0] == ANYWHERE  # already so when the document changed
    edit.selectAll()
    edit.insertPlainText("short")  # typed over: back to words
    assert edit.wordWrapMode() == WORD
