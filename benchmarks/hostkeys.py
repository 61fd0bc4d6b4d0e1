"""How long a box's host-key lookup takes in a big known_hosts: each connection of a
1,000-box fleet asks `HostKeyStore.judge` for its host and port.

Why: the 1,000-box benchmark (scale.py) spent about half its cold load scanning every
known_hosts line for every connection (O(N) each, O(N^2) for the fleet). Plain host names
are now looked up in an index; wildcard, negated and hashed lines are still matched one by
one, as ssh does.

    python benchmarks/hostkeys.py [--lines 1000] [--hashed 0] [--patterns 0]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tui

import asyncssh
from _fleet import code_line, code_under_test, machine, machine_line, print_json

from tui.remote.hostkeys import HostKeyStore


def hashed_line(name: str, key: str) -> str:
    """A line as `HashKnownHosts yes` writes it (Debian's default)."""
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()} {key}"


def write_known_hosts(path: Path, lines: int, hashed: int, patterns: int,
                      hash_boxes: bool = False) -> list[int]:
    """`lines` plain [127.0.0.1]:PORT entries (one key, as many boxes behind one address
    have), plus hashed and wildcard lines; the ports looked up."""
    key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    ports = [20000 + i for i in range(lines)]
    text = [hashed_line(f"[127.0.0.1]:{port}", key) if hash_boxes
            else f"[127.0.0.1]:{port} {key}" for port in ports]
    text += [hashed_line(f"[10.0.{i // 250}.{i % 250}]:22", key) for i in range(hashed)]
    text += [f"*.example{i}.org {key}" for i in range(patterns)]
    path.write_text("\n".join(text) + "\n")
    return ports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--hashed", type=int, default=0)
    parser.add_argument("--hash-boxes", action="store_true",
                        help="the boxes' own lines hashed too (HashKnownHosts yes)")
    parser.add_argument("--patterns", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        known = Path(tmp) / "known_hosts"
        ports = write_known_hosts(known, args.lines, args.hashed, args.patterns,
                                  args.hash_boxes)
        store = HostKeyStore(known, Path(tmp) / "pinned", accept_new=False)
        start = time.perf_counter()
        store.judge("127.0.0.1", ports[0])
        first_ms = (time.perf_counter() - start) * 1000
        each = []
        for port in ports:
            start = time.perf_counter()
            trusted, _, _ = store.judge("127.0.0.1", port)
            each.append((time.perf_counter() - start) * 1000)
            assert trusted, port
    info, code = machine("asyncssh"), code_under_test()
    print(machine_line(info, "asyncssh"))
    print(code_line(code))
    print(f"known_hosts: {args.lines} box lines ({'hashed' if args.hash_boxes else 'plain'}), "
          f"{args.hashed} other hashed, {args.patterns} wildcard")
    print(f"first lookup (parses the file): {first_ms:.1f} ms")
    print(f"lookup per connection: median {statistics.median(each):.3f} ms, "
          f"max {max(each):.3f} ms; the whole fleet {sum(each):.0f} ms")
    print_json({"machine": info, "code": code, "lines": args.lines,
                "hashed": args.hashed, "hash_boxes": args.hash_boxes,
                "patterns": args.patterns, "first_ms": first_ms,
                "median_ms": statistics.median(each), "fleet_ms": sum(each)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
