"""The main window and what it opens: dialogs, help, the first-run banner,
placement on the screen, and the app's entry point."""
