"""A kept probe holds exactly the request the client would have sent in full: the delta
the client sends, applied by the probe, rebuilds it, whatever changed."""

from __future__ import annotations

import copy
import json
import random

from tui.onbox.probe import apply_delta
from tui.remote.session import request_delta

FIELDS = ("s_sig", "w_sig", "m_off", "m_id", "m_head", "l_off", "pid", "started_at")


def random_request(rng: random.Random) -> dict[str, object]:
    runs = {}
    for index in rng.sample(range(12), rng.randint(0, 8)):
        runs[f"/runs/r{index}"] = {f: rng.choice([1, 2, "a", "b"]) for f in FIELDS
                                   if rng.random() < 0.7}
    request: dict[str, object] = {"roots": ["/runs"], "runs": runs,
                                  "log_cap": rng.choice([16384, 4096])}
    if rng.random() < 0.5:
        request["gpu_timeout"] = rng.choice([1.5, 10.0])
    return request


def test_the_delta_rebuilds_the_request_on_the_box() -> None:
    rng = random.Random(7)
    held: dict[str, object] = {}
    for _ in range(500):
        request = random_request(rng)
        delta = request_delta(held, request)
        line = json.loads(json.dumps({"nonce": "abc12345", **delta}))  # the wire
        apply_delta(held, line)
        assert held == request
        held = copy.deepcopy(held)


def test_an_unchanged_request_costs_nothing_but_the_nonce() -> None:
    request = random_request(random.Random(1))
    held: dict[str, object] = {}
    apply_delta(held, request_delta(held, request))
    assert request_delta(held, request) == {}
    moved = copy.deepcopy(request)
    (path, cursor), *_ = moved["runs"].items()  # type: ignore[union-attr]
    cursor["m_off"] = 123456
    assert request_delta(held, moved) == {"runs": {path: {"m_off": 123456}}}
