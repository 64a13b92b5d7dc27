"""The window's settings file: a FIFO (or a folder) where it should be would block Qt's
reader before any window shows; the window remembers nothing this time and says so."""

import os

import pytest

from explorer.ui.window.settings_file import open_settings, settings_path


@pytest.fixture
def config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert settings_path() == tmp_path / "GPT Block Explorer" / "gpt-block-explorer.conf"
    settings_path().parent.mkdir()
    return tmp_path


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_settings_path_that_is_not_a_file_is_set_aside_with_a_notice(config_home, kind):
    path = settings_path()
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    settings, notice = open_settings()  # returns: nothing opened the FIFO
    assert notice == (f"{path} is {'a FIFO (named pipe)' if kind == 'fifo' else 'a folder'}, "
                      "not a settings file: the window's settings are not remembered this time")
    assert settings.fileName() != str(path)
    settings.setValue("prompt/text", "kept for the session")
    assert settings.value("prompt/text") == "kept for the session"


def test_a_regular_settings_file_is_read_and_written_in_place(config_home):
    settings, notice = open_settings()
    assert notice is None and settings.fileName() == str(settings_path())
    settings.setValue("window/geometry", "x")
    settings.sync()
    again, _ = open_settings()
    assert again.value("window/geometry") == "x"
