"""Stop, start and destroy a box, and say exactly what happened and what still bills.

An action counts as done only when its effect is observed: after stop the
provider reads the instance stopped, after start running (re-read: the GPUs
may not have come back), after destroy it no longer has it or reads it
destroyed. When the effect cannot be observed (the API went down, the key
was refused, the time ran out, the request's answer was lost) the outcome is
"unknown" and the words say what may still be billing; a request whose fate
is unknown is never sent again. A manual box runs its own stop_command or
destroy_command over SSH; a zero exit only says the command ran, so the
effect is then watched for (tui.actions.observe: the user's observe_command,
or the box no longer answering SSH); unseen, the outcome is "unknown:
command ran; effect not observed", and the meter keeps billing.

One action per box at a time, in this process: a second press while one is
in flight is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tui.actions.box_command import run_box_command
from tui.actions.observe import observe_manual
from tui.model.config import BoxConfig, FleetConfig
from tui.model.cost import Rate, box_rates, usd
from tui.model.instance import InstanceInfo, InstanceState, PowerAction, PowerOutcome, PowerResult
from tui.providers import PowerClient, ProviderError, make_client
from tui.remote.hostkeys import host_key_store
from tui.remote.session import BoxSession

_TARGET: dict[PowerAction, InstanceState] = {
    "stop": "stopped", "start": "running", "destroy": "destroyed"}
_PAST: dict[PowerAction, str] = {"stop": "stopped", "start": "started", "destroy": "destroyed"}
# Read errors that another poll will not cure: stop polling at once.
_BLIND = ("auth", "no_key", "not_found")

Sleep = Callable[[float], Awaitable[Any]]
Clock = Callable[[], float]

_IN_FLIGHT: dict[str, PowerAction] = {}  # box name -> the action in progress on it


def in_flight(box: str) -> str | None:
    """The action in progress on `box` in this process, if any."""
    return _IN_FLIGHT.get(box)


async def stop_box(box: BoxConfig, fleet: FleetConfig, *, client: PowerClient | None = None,
                   ssh: BoxSession | None = None, observe_timeout: float = 180.0,
                   poll_interval: float = 3.0, sleep: Sleep = asyncio.sleep,
                   clock: Clock = time.monotonic) -> PowerOutcome:
    """Stop the box: the GPU stops billing, the disk does not (and the GPU may not come back)."""
    return await _power("stop", box, fleet, client, ssh, observe_timeout, poll_interval,
                        sleep, clock)


async def start_box(box: BoxConfig, fleet: FleetConfig, *, client: PowerClient | None = None,
                    ssh: BoxSession | None = None, observe_timeout: float = 180.0,
                    poll_interval: float = 3.0, sleep: Sleep = asyncio.sleep,
                    clock: Clock = time.monotonic) -> PowerOutcome:
    """Start a stopped box, then re-read it: it may come back with fewer GPUs."""
    return await _power("start", box, fleet, client, ssh, observe_timeout, poll_interval,
                        sleep, clock)


async def destroy_box(box: BoxConfig, fleet: FleetConfig, *, client: PowerClient | None = None,
                      ssh: BoxSession | None = None, observe_timeout: float = 180.0,
                      poll_interval: float = 3.0, sleep: Sleep = asyncio.sleep,
                      clock: Clock = time.monotonic) -> PowerOutcome:
    """Destroy the box and its disk. The unpushed-weights guard is the caller's to ask first."""
    return await _power("destroy", box, fleet, client, ssh, observe_timeout, poll_interval,
                        sleep, clock)


async def _power(action: PowerAction, box: BoxConfig, fleet: FleetConfig,
                 client: PowerClient | None, ssh: BoxSession | None, observe_timeout: float,
                 poll_interval: float, sleep: Sleep, clock: Clock) -> PowerOutcome:
    # Check and claim before the first await, so a second press cannot slip in between.
    busy = _IN_FLIGHT.get(box.name)
    if busy is not None:
        return PowerOutcome(action, box.name, "refused",
                            f"a {busy} of box {box.name} is already in progress: wait for its "
                            f"outcome; this {action} was not sent")
    _IN_FLIGHT[box.name] = action
    try:
        if box.provider == "manual":
            return await _by_command(action, box, fleet, ssh, observe_timeout, poll_interval,
                                     sleep, clock)
        if not box.instance_id:
            return PowerOutcome(action, box.name, "refused",
                                f"box {box.name} has no instance_id in the config, so the panel "
                                f"cannot tell {box.provider} what to {action}: nothing was sent")
        own = client is None
        try:
            api = make_client(box.provider, fleet, sleep=sleep) if client is None else client
        except ValueError as exc:
            return PowerOutcome(action, box.name, "refused", f"box {box.name}: {exc}; nothing "
                                "was sent")
        try:
            return await _ByProvider(action, box, api, observe_timeout, poll_interval,
                                     sleep, clock).run()
        finally:
            if own:
                await api.aclose()
    finally:
        del _IN_FLIGHT[box.name]


def _rate(rate: Rate | None) -> str:
    return f"{usd(rate.usd_per_hr)}/hr" if rate is not None else "at a rate the panel does not know"


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


class _ByProvider:
    """One action through a provider's API: read, send once, then watch for the effect."""

    def __init__(self, action: PowerAction, box: BoxConfig, client: PowerClient,
                 observe_timeout: float, poll_interval: float, sleep: Sleep, clock: Clock) -> None:
        self.action = action
        self.box = box
        self.client = client
        self.iid = str(box.instance_id)
        self.observe_timeout = observe_timeout
        self.poll_interval = poll_interval
        self.sleep = sleep
        self.clock = clock
        self.target = _TARGET[action]
        noun = "pod" if box.provider == "runpod" else "instance"
        self.where = f"box {box.name} ({box.provider} {noun} {self.iid})"
        self.before: InstanceInfo | None = None

    def outcome(self, outcome: PowerResult, message: str, after: InstanceInfo | None = None,
                state_after: str | None = None) -> PowerOutcome:
        before = self.before
        return PowerOutcome(
            self.action, self.box.name, outcome, message,
            state_before=before.state if before else None,
            state_after=after.state if after else state_after,
            gpus_before=before.num_gpus if before else None,
            gpus_after=after.num_gpus if after else None, info_after=after)

    def billing(self, info: InstanceInfo | None) -> str:
        """What the box bills in the state it reads, in a few words."""
        rates = box_rates(self.box.provider, self.box.pricing, info)
        if info is not None and info.state in ("stopped", "stopping"):
            return f"stopped; its disk bills {_rate(rates.stopped)}"
        if info is not None and info.state == "destroyed":
            return "destroyed; nothing is billed"
        state = info.state if info is not None else "as it was"
        return f"{state} and billing {_rate(rates.running)}"

    def may_bill(self) -> str:
        """What the box may be billing while an action's outcome is unknown."""
        rates = box_rates(self.box.provider, self.box.pricing, self.before)
        still = "be billing" if self.action == "start" else "still be billing"
        return f"It may {still} {_rate(rates.running)}"

    async def run(self) -> PowerOutcome:
        if self.action != "destroy" and not self.client.can_stop:
            try:
                await self.send()  # the adapter refuses without a request
            except ProviderError as exc:
                return self.outcome("refused", f"cannot {self.action} {self.where}: "
                                    f"{exc.message}. Nothing was sent; it bills as long as it "
                                    "runs.")
        else:
            try:
                self.before = await self.client.get(self.iid)
            except ProviderError as exc:
                hint = (" If it was destroyed already, nothing is billed; otherwise check the "
                        "box's instance_id." if exc.kind == "not_found" else "")
                return self.outcome("failed", f"could not read {self.where} before the "
                                    f"{self.action}: {exc.message}. Nothing was sent; the box "
                                    f"is as it was.{hint}")
            if self.before.state == self.target:
                return self.outcome("done", f"{self.where} is already {self.target}: nothing "
                                    f"was sent. {self.done_words(self.before)}", self.before)
            try:
                await self.send()
            except ProviderError as exc:
                return await self.after_error(exc)
        return await self.observe()

    async def send(self) -> None:
        action = {"stop": self.client.stop, "start": self.client.start,
                  "destroy": self.client.destroy}[self.action]
        await action(self.iid)

    async def after_error(self, exc: ProviderError) -> PowerOutcome:
        """A refused request changed nothing; one whose answer was lost may have: look once."""
        if exc.maybe_applied:
            return await self.observe(once=True, why=exc.message)
        return self.outcome("failed", f"could not {self.action} {self.where}: {exc.message}. "
                            f"Nothing was changed; the box is still "
                            f"{self.billing(self.before)}.", self.before)

    async def observe(self, once: bool = False, why: str | None = None) -> PowerOutcome:
        """Poll until the effect reads back, or time runs out (then: unknown)."""
        deadline = self.clock() + (0.0 if once else self.observe_timeout)
        last: InstanceInfo | None = None
        read_error: str | None = None
        wait = self.poll_interval
        while True:
            await self.sleep(wait)
            wait = self.poll_interval
            try:
                info = await self.client.get(self.iid)
            except ProviderError as exc:
                if exc.gone and self.action == "destroy":  # HTTP 404 for this instance
                    return self.outcome("done", f"destroyed {self.where}: the provider no "
                                        "longer has it. Nothing is billed any more; its disk "
                                        "is gone.", state_after="destroyed")
                read_error = exc.message
                wait = max(wait, exc.retry_after or 0.0)
                if exc.kind in _BLIND:
                    break
            else:
                last, read_error = info, None
                if info.state == self.target:
                    return self.outcome("done", self.done_words(info, fresh=True), info)
            if self.clock() >= deadline:
                break
        words = [why] if why else []
        if read_error is not None:
            words.append(read_error + (f" (it last read {last.state})" if last else ""))
        elif last is not None:
            watched = "" if once else f" after {self.observe_timeout:g} s"
            words.append(f"it still reads {last.state}{watched}")
        return self.outcome("unknown", f"{self.action} sent to {self.where} but not confirmed: "
                            f"{'; '.join(words)}. {self.may_bill()}: check the provider's "
                            "console.", last)

    def done_words(self, info: InstanceInfo, fresh: bool = False) -> str:
        """What a done action leaves behind: what bills now, what to watch for."""
        head = f"{_PAST[self.action]} {self.where}: it reads {info.state}. " if fresh else ""
        if self.action == "destroy":
            return f"{head}Nothing is billed any more; its disk is gone."
        rates = box_rates(self.box.provider, self.box.pricing, info)
        if self.action == "stop":
            return (f"{head}The GPU no longer bills; the disk still bills "
                    f"{_rate(rates.stopped)}. A start may not get the same GPUs back.")
        was = self.before.num_gpus if self.before is not None else None
        now = info.num_gpus
        if fresh and was is not None and now is not None and now != was:
            return (f"{_PAST[self.action]} {self.where}, but now {_gpus(now)} instead of "
                    f"{was}: it bills {_rate(rates.running)}; check a run can use it, or stop "
                    "it again.")
        gpus = f" with {_gpus(now)}" if now is not None else ""
        return f"{head}Running{gpus}, billing {_rate(rates.running)}."


async def _by_command(action: PowerAction, box: BoxConfig, fleet: FleetConfig,
                      ssh: BoxSession | None, timeout: float, poll_interval: float, sleep: Sleep,
                      clock: Clock) -> PowerOutcome:
    """A manual box: its own command over SSH, given `timeout` (observe_timeout) to finish,
    then the effect watched for as long again. Done only when the effect is seen."""
    if action == "start":
        return PowerOutcome(action, box.name, "refused",
                            f"box {box.name} is a manual box: the panel has no way to start it; "
                            "start it from its own console")
    key = f"{action}_command"
    command = box.stop_command if action == "stop" else box.destroy_command
    if not command:
        return PowerOutcome(action, box.name, "refused",
                            f"no {key} configured for box {box.name}: {action} it from its "
                            "own console (nothing was run)")
    session = ssh if ssh is not None else BoxSession(box, fleet, host_key_store(fleet))
    try:
        result = await run_box_command(session, command, timeout)
    finally:
        if ssh is None:
            await session.close()
    running = box_rates(box.provider, box.pricing, None).running
    billing = f"billing {_rate(running)}" if running is not None else "billing"
    if result.ended == "not_started":
        return PowerOutcome(action, box.name, "failed",
                            f"could not run the {key} of box {box.name}: {result.reason}. "
                            f"Nothing was run; the box is still running and {billing}.")
    if result.ended == "exited" and result.exit_status != 0:
        return PowerOutcome(action, box.name, "failed",
                            f"the {key} of box {box.name} exited {result.exit_status}: "
                            f"{result.stderr_tail or 'no error output'}. The box is probably "
                            f"still running and {billing}.")
    ran = ("its command exited 0" if result.ended == "exited"
           else f"its command was sent but {result.reason}")
    seen = await observe_manual(action, box, fleet, observe_timeout=timeout,
                                poll_interval=poll_interval, sleep=sleep, clock=clock)
    target = _TARGET[action]
    if seen.seen:
        return PowerOutcome(action, box.name, "done",
                            f"{_PAST[action]} box {box.name}: {ran}, and {seen.how}. "
                            + ("Nothing is billed any more, if its provider bills by the "
                               "machine." if action == "destroy" else
                               "Its disk may still bill."),
                            state_after=target)
    said = f" Its error output: {result.stderr_tail}." if result.stderr_tail else ""
    how = ("set observe_command for box " + box.name + " to tell the panel how to see it"
           if not box.observe_command else "check it from its own console")
    return PowerOutcome(action, box.name, "unknown",
                        f"{action} of box {box.name}: command ran; effect not observed ({ran}, "
                        f"but {seen.how}). It may still be running and {billing}: {how}."
                        f"{said}")
