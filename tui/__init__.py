"""gpurent-tui: a keyboard-driven control panel for LibreYOLO runs on rented GPU boxes."""

__version__ = "0.1.0"
