"""Starting the window where none can open: one line and exit 2, never Qt's abort."""

import os
import subprocess
import sys

from explorer.ui.display import XCB_LIBRARIES, display_problem


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
    problem = display_problem({"DISPLAY": ":0"}, "linux", load=lambda so: so not in missing)
    assert "libxcb-cursor.so.0, libxkbcommon-x11.so.0" in problem
    assert "sudo apt-get install libxcb-cursor0 libxkbcommon-x11-0" in problem
    assert "sudo dnf install xcb-util-cursor libxkbcommon-x11" in problem
    assert display_problem({"DISPLAY": ":0"}, "linux", load=lambda so: True) is None
    assert display_problem({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert display_problem({"WAYLAND_DISPLAY": "wayland-0"}, "linux") is None
    assert display_problem({}, "darwin") is None
    assert len(XCB_LIBRARIES) == 10
