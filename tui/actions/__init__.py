"""Actions on boxes and runs: push, stop, start, destroy, and their journal. No Textual."""
