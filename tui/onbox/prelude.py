"""What every program of tui/onbox shares: packed ahead of each one for the box.

tui.remote.programs.program_source puts this text first and the program after
it, without the program's `from tui.onbox.prelude import ...` line, so on the
box both run as one namespace; here (tests, the panel reading a program's
pure functions) that import line is what binds the names. Standard library
only and Python 3.6 syntax, as every program here.

- the frame writer: `frame` (tui/remote/framing.py's format), `send` one
  payload, `emit` one JSON object, `stage`; the frames go to the real stdout,
  taken before a program sends library chatter to stderr, with the nonce in
  `_NONCE[0]` (the loader's NONCE, or the one a program is given);
- `alive` / `start_ticks`: whether a recorded process is still that process;
- `read_json` / `write_json`: capped reads, atomic writes;
- `scrub`: the secrets a program holds (`_SECRETS`) blanked out of its words;
- `Heartbeat`: a beat every BEAT_SECONDS while a long step runs, and the program's
  end when a beat cannot be written (the client went away).
"""

import json
import os
import sys
import threading

CLIENT_GONE = 141  # the exit status when the client went away (as a SIGPIPE death reads)
BEAT_SECONDS = 2.0
JSON_CAP = 1 << 20

_OUT = getattr(sys.stdout, "buffer", sys.stdout)
_LOCK = threading.Lock()
_NONCE = [str(globals().get("NONCE", ""))]  # set by the loader before this source runs
_SECRETS = []  # type: list[str]
_WROTE = [0]  # bytes of frames written to stdout (a push tells its own I/O from its work)


def frame(nonce, payload):
    """One frame: a marker line with the nonce and the payload's length, the payload."""
    return ("\n--gpurent-%s %d\n" % (nonce, len(payload))).encode("ascii") + payload


def send(payload):
    """One frame on the frames' stream, whole (threads report progress too)."""
    data = frame(_NONCE[0], payload)
    with _LOCK:
        _OUT.write(data)
        _OUT.flush()
        _WROTE[0] += len(data)


def emit(obj):
    """One JSON object as a frame, compact."""
    send(json.dumps(obj, separators=(",", ":")).encode("utf-8"))


def stage(name):
    emit({"stage": name})


def scrub(text):
    """The text with every secret this program holds replaced: its words leave the box."""
    text = str(text)
    for secret in _SECRETS:
        if secret:
            text = text.replace(secret, "***")
    return text


def start_ticks(pid):
    """(state, start time in clock ticks since boot) of `pid` from /proc, or (None, None)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError, ValueError):
        return None, None


def alive(pid, ticks):
    """Whether `pid` is still the process that was recorded (a zombie is dead; a reused
    pid, with another start time, is not ours)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except (OSError, OverflowError):
        return False
    state, now_ticks = start_ticks(pid)
    if state in ("Z", "X"):
        return False
    return ticks is None or now_ticks is None or now_ticks == ticks


def read_json(path, cap=JSON_CAP):
    """A JSON object from a file of at most `cap` bytes; None for anything else."""
    try:
        with open(path, "rb") as f:
            data = f.read(cap + 1)
    except OSError:
        return None
    if len(data) > cap:
        return None
    try:
        value = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path, obj, mode=0o600):
    """Atomically (tmp + rename): a reader sees the old or the new document, never half."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, separators=(",", ":"), sort_keys=True)
    os.replace(tmp, path)


class Heartbeat(threading.Thread):
    """Calls `beat(n)` every BEAT_SECONDS, so the client reads silence as trouble. A beat
    that cannot be written means the client is gone (cancelled, interrupted, its link
    dropped: sshd closes our stdout with the channel): `gone` ends what the program
    started, and the program exits, rather than working on for nobody."""

    def __init__(self, beat, gone=None):
        threading.Thread.__init__(self, daemon=True)
        self.stopped = threading.Event()
        self.beat = beat
        self.gone = gone

    def run(self):
        beats = 0
        while not self.stopped.wait(BEAT_SECONDS):
            beats += 1
            try:
                self.beat(beats)
            except (OSError, ValueError):  # a closed pipe, or a closed file
                if self.gone is not None:
                    self.gone()
                os._exit(CLIENT_GONE)
