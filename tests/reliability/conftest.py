from tests.ui.conftest import make_window, warnings  # noqa: F401  (the app fixtures)
