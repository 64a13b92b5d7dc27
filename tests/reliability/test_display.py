"""Starting the window where none can open: one line and exit 2, never Qt's abort."""

import pytest

import os
import subprocess
import sys

from explorer.ui.base.display import XCB_LIBRARIES, display_problem

pytestmark = pytest.mark.slow  # the whole module: ./test.sh -m "not slow" leaves it out


def test_without_a_display_the_app_says_so_and_exits_2():
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run([sys.executable, "-m", "explorer", "--preset", "tiny"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "no display: DISPLAY and WAYLAND_DISPLAY are not set" in done.stderr
    assert "--screenshot" in done.stderr and "Aborted" not in done.stderr


def test_missing_x11_libraries_are_named_with_the_packages_that_install_them():
    missing = {"libxcb-cursor.so.0", "libxkbcommon-x11.so.0"}
    answers = dict(x_answers=lambda d: True, wayland=lambda e: True)  # as if a server ran
    problem = display_problem({"DISPLAY": ":0"}, "linux", load=lambda so: so not in missing, **answers)
    assert "libxcb-cursor.so.0, libxkbcommon-x11.so.0" in problem
    assert "sudo apt-get install libxcb-cursor0 libxkbcommon-x11-0" in problem
    assert "sudo dnf install xcb-util-cursor libxkbcommon-x11" in problem
    assert display_problem({"DISPLAY": ":0"}, "linux", load=lambda so: True, **answers) is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux", **answers) is None
    assert display_problem({}, "darwin") is None
    assert len(XCB_LIBRARIES) == 10


def test_a_display_that_points_nowhere_or_a_platform_qt_lacks_is_said_before_qt_starts(tmp_path):
    """DISPLAY=:4242 with no server, a garbage QT_QPA_PLATFORM, a WAYLAND_DISPLAY without a
    compositor: Qt aborts the process on each; the app says one line and exits 2."""
    nowhere = display_problem({"DISPLAY": ":4242"}, "linux", load=lambda so: True)
    assert "DISPLAY=':4242' names no X server that answers" in nowhere
    garbage = display_problem({"QT_QPA_PLATFORM": "banana", "DISPLAY": ":0"}, "linux")
    assert "QT_QPA_PLATFORM='banana' names no platform this Qt has" in garbage
    assert "offscreen" in garbage and "xcb" in garbage
    ghost = display_problem({"WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": str(tmp_path)}, "linux")
    assert "no Wayland compositor answers at WAYLAND_DISPLAY='wayland-9'" in ghost
    for env_change, said in (({"DISPLAY": ":4242"}, "names no X server that answers"),
                             ({"QT_QPA_PLATFORM": "banana"}, "names no platform this Qt has"),
                             ({"WAYLAND_DISPLAY": "wayland-9", "XDG_RUNTIME_DIR": str(tmp_path)},
                              "no Wayland compositor answers")):
        env = {k: v for k, v in os.environ.items()
               if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
        env.update(env_change)
        done = subprocess.run([sys.executable, "-m", "explorer", "--preset", "tiny"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert "Aborted" not in done.stderr and "Fatal Python error" not in done.stderr
