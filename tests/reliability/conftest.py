from tests.ui.conftest import _long_close_wait, make_window, warnings  # noqa: F401  (the app fixtures)
