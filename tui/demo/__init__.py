"""The built-in demo fleet: SSH boxes on 127.0.0.1 that replay recorded LibreYOLO runs.

I/O only (asyncssh servers, files, child processes); nothing here imports
Textual, so the fleet can be started and checked headless by the tests.
"""
