import logging

import pytest

from explorer.log import log_dir, setup_logging


def test_rotating_log_file_in_the_chosen_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GPT_EXPLORER_LOG_DIR", str(tmp_path / "logs"))
    path = setup_logging("WARNING")
    assert path == tmp_path / "logs" / "explorer.log" and log_dir() == tmp_path / "logs"
    logging.getLogger("explorer.test").info("hello from the test")
    for h in logging.getLogger("explorer").handlers:
        h.flush()
    assert "hello from the test" in path.read_text()
    with pytest.raises(ValueError, match="log level"):
        setup_logging("LOUD")
    setup_logging("WARNING", to_file=False)


def test_exceptions_in_slots_are_logged_and_shown_not_fatal(qtbot, tmp_path, monkeypatch, caplog):
    import sys

    from PySide6.QtCore import QObject, Signal

    from explorer.ui.window.app import install_excepthook

    class Window:
        shown = []

        def warn(self, parent, title, text):
            self.shown.append(text)

    class Emitter(QObject):
        fire = Signal()

    def broken_slot():
        raise RuntimeError("a bug in a slot")

    window = Window()
    install_excepthook(window)
    try:
        emitter = Emitter()
        emitter.fire.connect(broken_slot)
        with caplog.at_level(logging.ERROR, logger="explorer"):
            emitter.fire.emit()
        assert window.shown and "a bug in a slot" in window.shown[0]
        assert "uncaught exception" in caplog.text
    finally:
        sys.excepthook = sys.__excepthook__


def test_a_log_file_that_is_a_fifo_is_not_opened(tmp_path, monkeypatch, capsys):
    import os
    monkeypatch.setenv("GPT_EXPLORER_LOG_DIR", str(tmp_path))
    os.mkfifo(tmp_path / "explorer.log")
    try:
        assert setup_logging("WARNING") is None  # opening it would wait for a reader forever
        err = capsys.readouterr().err
        assert f"no log file: {tmp_path / 'explorer.log'} is not a regular file" in err
    finally:
        setup_logging("WARNING", to_file=False)
