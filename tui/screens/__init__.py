"""Textual screens and the widgets that know the core's snapshot types."""
