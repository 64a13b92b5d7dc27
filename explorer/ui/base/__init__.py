"""The window's machinery without widgets of its own: jobs and the engine, the
shared session, lazy redraws, runs, the display check."""
