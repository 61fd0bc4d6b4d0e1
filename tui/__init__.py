"""gpurent-tui: a keyboard-driven control panel for LibreYOLO runs on rented GPU boxes."""

import warnings

__version__ = "0.1.0"

# asyncssh 2.24 names cryptography's DSA types when it is imported, and cryptography 51
# warns of each on stderr: some fifteen lines on every command a fresh install runs.
# gpurent-tui never offers or accepts DSA itself; the warning says nothing to its user.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
