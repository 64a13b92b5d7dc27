"""The desktop app: PySide6 + pyqtgraph views over explorer.core. The core never imports
this package."""
