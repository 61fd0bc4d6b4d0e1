"""The provider stand-ins: the demo's own (tui.demo.providers over tui.demo.api_server).

One implementation for the demo and the tests; the tests import it from here.
"""

from tui.demo.api_server import Fault, Handler, ProviderServer, Recorded, Reply
from tui.demo.providers import (
    VAST_TOO_FREQUENT,
    LambdaServer,
    RunPodServer,
    VastServer,
    lambda_instance,
    runpod_pod,
    runpod_too_many,
    vast_instance,
)

__all__ = ["VAST_TOO_FREQUENT", "Fault", "Handler", "LambdaServer", "ProviderServer",
           "Recorded", "Reply", "RunPodServer", "VastServer", "lambda_instance", "runpod_pod",
           "runpod_too_many", "vast_instance"]
