"""Can a window open here? Asked before Qt starts: without a display, or without the
system libraries Qt's X11 plugin needs (minimal Linux installs lack them), Qt aborts the
whole process with a hint that is wrong half the time. Imports no Qt."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import socket
import sys
from pathlib import Path

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


def qt_platforms() -> set[str] | None:
    """The platform plugins this Qt has (xcb, wayland, offscreen, …), read from its
    plugin folder without starting Qt; None when the folder cannot be found."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "Qt" / "plugins" / "platforms"
    if not folder.is_dir():
        return None
    names = {p.name.partition(".")[0] for p in folder.iterdir()}
    return {n[len("libq"):] if n.startswith("libq") else n.lstrip("q") for n in names}


def x_server_answers(display: str, timeout: float = 2.0) -> bool:
    """Whether an X server listens where DISPLAY points (':0', 'unix:1', 'host:10.0')."""
    host, _, rest = display.rpartition(":")
    number = rest.partition(".")[0]
    if not number.isdigit():
        return False
    if host in ("", "unix"):
        path = f"/tmp/.X11-unix/X{number}"
        for address in (path, "\0" + path):  # the file, or Linux's abstract socket
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                try:
                    s.connect(address)
                    return True
                except OSError:
                    continue
        return False
    try:
        socket.create_connection((host, 6000 + int(number)), timeout=timeout).close()
        return True
    except OSError:
        return False


def wayland_answers(env) -> bool:
    name = env.get("WAYLAND_DISPLAY", "")
    path = Path(name) if name.startswith("/") else Path(env.get("XDG_RUNTIME_DIR", "/run/user")) / name
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def display_problem(env=None, platform: str | None = None, load=loadable,
                    x_answers=x_server_answers, platforms=qt_platforms,
                    wayland=wayland_answers) -> str | None:
    """None when a window can open; otherwise one line saying why not and what to do —
    asked the way Qt will use the environment: a platform it has, a display that
    answers. (Qt itself aborts the process on each of these.)"""
    env = os.environ if env is None else env
    if (platform or sys.platform) != "linux":
        return None
    qpa = env.get("QT_QPA_PLATFORM", "")
    if qpa:
        name = qpa.split(":")[0].split(";")[0]
        known = platforms()
        if known is not None and name not in known:
            return (f"QT_QPA_PLATFORM={qpa!r} names no platform this Qt has (it has "
                    f"{', '.join(sorted(known))}): unset it, or choose one of those")
    if qpa and not qpa.startswith("xcb"):
        if qpa.startswith("wayland") and not wayland(env):
            return (f"no Wayland compositor answers at WAYLAND_DISPLAY="
                    f"{env.get('WAYLAND_DISPLAY', '')!r}: no window can open")
        return None  # offscreen, vnc…: the user chose
    if not env.get("DISPLAY"):
        if env.get("WAYLAND_DISPLAY") and not qpa:
            if wayland(env):
                return None  # Qt picks its Wayland plugin
            return (f"no Wayland compositor answers at WAYLAND_DISPLAY="
                    f"{env['WAYLAND_DISPLAY']!r}, and DISPLAY is not set: no window can open. "
                    "Use `gpt-explorer --screenshot out.png`, or Xvfb")
        return ("no display: DISPLAY and WAYLAND_DISPLAY are not set (an SSH session?), so "
                "no window can open. Use `gpt-explorer --screenshot out.png` to render the "
                "window to a file, the commands in `gpt-explorer --help`, `ssh -X`, or Xvfb")
    if not x_answers(env["DISPLAY"]):
        return (f"DISPLAY={env['DISPLAY']!r} names no X server that answers (it stopped, or "
                "the display number is wrong), so no window can open. Use `gpt-explorer "
                "--screenshot out.png`, start Xvfb, or set DISPLAY to a running server")
    missing = [soname for soname in XCB_LIBRARIES if not load(soname)]
    if not missing:
        return None
    debian = " ".join(dict.fromkeys(XCB_LIBRARIES[m][0] for m in missing))
    fedora = " ".join(dict.fromkeys(XCB_LIBRARIES[m][1] for m in missing))
    return (f"Qt's X11 support needs system libraries this machine lacks "
            f"({', '.join(missing)}). Install them: sudo apt-get install {debian} "
            f"(Debian, Ubuntu) or sudo dnf install {fedora} (Fedora)")
