"""The pure core: config, runs, boxes and the status document. No I/O, no Textual."""
