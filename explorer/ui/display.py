"""Can a window open here? Asked before Qt starts: without a display, or without the
system libraries Qt's X11 plugin needs (minimal Linux installs lack them), Qt aborts the
whole process with a hint that is wrong half the time. Imports no Qt."""

from __future__ import annotations

import ctypes
import os
import sys

# The libraries Qt 6's xcb plugin loads: soname -> (Debian/Ubuntu package, Fedora package)
XCB_LIBRARIES = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
}


def loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
        return True
    except OSError:
        return False


def display_problem(env=None, platform: str | None = None, load=loadable) -> str | None:
    """None when a window can open; otherwise one line saying why not and what to do."""
    env = os.environ if env is None else env
    if (platform or sys.platform) != "linux":
        return None
    qpa = env.get("QT_QPA_PLATFORM", "")
    if qpa and not qpa.startswith("xcb"):
        return None  # offscreen, wayland, vnc…: the user chose; Qt says what it lacks
    if not env.get("DISPLAY"):
        if env.get("WAYLAND_DISPLAY") and not qpa:
            return None  # Qt picks its Wayland plugin
        return ("no display: DISPLAY and WAYLAND_DISPLAY are not set (an SSH session?), so "
                "no window can open. Use `gpt-explorer --screenshot out.png` to render the "
                "window to a file, the commands in `gpt-explorer --help`, `ssh -X`, or Xvfb")
    missing = [soname for soname in XCB_LIBRARIES if not load(soname)]
    if not missing:
        return None
    debian = " ".join(dict.fromkeys(XCB_LIBRARIES[m][0] for m in missing))
    fedora = " ".join(dict.fromkeys(XCB_LIBRARIES[m][1] for m in missing))
    return (f"Qt's X11 support needs system libraries this machine lacks "
            f"({', '.join(missing)}). Install them: sudo apt-get install {debian} "
            f"(Debian, Ubuntu) or sudo dnf install {fedora} (Fedora)")
