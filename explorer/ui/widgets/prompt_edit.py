"""The prompt's text box: a long text is wrapped anywhere, not at word boundaries. Qt
lays out a long word by looking for word boundaries in quadratic time (a 300,000-character
word: 19 s, the window frozen); wrapping anywhere is linear. The mode is set before the
text goes in (a paste, a saved run's prompt), so the slow layout never starts."""

from __future__ import annotations

from PySide6.QtGui import QTextOption
from PySide6.QtWidgets import QPlainTextEdit

LONG_TEXT = 20_000  # characters: far past any prompt the context holds (1,024 tokens)


class PromptEdit(QPlainTextEdit):
    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.textChanged.connect(self._shorter)
        self.setPlainText(text)

    def _wrap_for(self, length: int) -> None:
        mode = (QTextOption.WrapMode.WrapAnywhere if length > LONG_TEXT
                else QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        if self.wordWrapMode() != mode:
            self.setWordWrapMode(mode)

    def setPlainText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        if len(text) > LONG_TEXT:  # before the long text goes in; after the long one went
            self._wrap_for(len(text))
        super().setPlainText(text)  # (a short text: textChanged sets it back to words)

    def insertFromMimeData(self, source) -> None:  # noqa: N802: a paste or a drop
        if source.hasText():
            self._wrap_for(self.document().characterCount() + len(source.text()))
        super().insertFromMimeData(source)

    def _shorter(self) -> None:
        """Back to wrapping at words once the text is short again (cheap to lay out)."""
        if self.document().characterCount() <= LONG_TEXT:
            self._wrap_for(self.document().characterCount())
