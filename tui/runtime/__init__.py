"""The fleet's life, once for every front end (no Textual here).

`Runtime` (tui/runtime/fleet.py) watches every box, polls the providers, folds
and judges the money, pushes at milestones, applies `on_budget`, sends alerts
and runs every action on a box, one at a time. What happens goes to a sink as
typed events (tui/runtime/events.py): the panel turns them into its reactives
and toasts, `gpurent-tui watch` into log lines (tui/runtime/watch_sink.py).
"""
