"""Reusable Textual widgets that take plain data and never import tui."""
