"""One module per view; registry.py lists them, and the window builds from it."""
