"""What every provider adapter shares: the instance record, the error, and one careful request.

The request helper is where the contracts of all three APIs meet: a Bearer
key that must never leak, retries on 429 and 5xx (honouring `Retry-After`,
else backing off like Vast's own CLI), a hard deadline per try, and error
words that name the provider and the instance so a person can act on them.

Actions (stop, start, destroy) go through the same helper with one rule more:
only an answer that says the request was refused (429, a 4xx) is safe to act
on. A timeout, a 5xx or a connection lost after sending may or may not have
changed the instance; such an error is marked `maybe_applied` and is never
retried, so a destroy is never sent twice blindly.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, Protocol, get_args

import httpx2

from tui.model.config import plain_http_allowed
from tui.model.fanout import DEFAULT_PER_PROVIDER
from tui.model.instance import InstanceInfo
from tui.model.redact import redact as redact_text
from tui.model.text import clean
from tui.store.secrets import held_secrets

ErrorKind = Literal["rate_limited", "not_allowed", "not_found", "auth", "timeout", "server",
                   "bad_answer", "unreachable", "no_key"]
KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)

BACKOFF_FIRST_SECONDS = 0.15  # Vast's CLI: 0.15 s, then x1.5 per try
BACKOFF_FACTOR = 1.5
# A Retry-After longer than this is not slept through inside one refresh: the
# error carries it (retry_after) and the caller's own schedule waits instead.
MAX_RETRY_AFTER_SECONDS = 30.0
EXCERPT_CHARS = 200

Sleep = Callable[[float], Awaitable[Any]]


class ProviderError(Exception):
    """A provider call that gave no usable answer: a kind to branch on, words to show."""

    def __init__(self, kind: ErrorKind, message: str, status: int | None = None, *,
                 provider: str | None = None, instance_id: str | None = None,
                 retry_after: float | None = None, maybe_applied: bool = False,
                 gone: bool = False) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown ProviderError kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.provider = provider
        self.instance_id = instance_id
        self.retry_after = retry_after
        # An action whose fate is unknown (timeout, 5xx, connection lost after
        # sending): the instance may have changed; only a fresh read can tell.
        self.maybe_applied = maybe_applied
        # The provider answered HTTP 404 for this very instance: the only error that proves
        # a destroy. "not found" words in a 200 or a 401 body prove nothing (Vast answers
        # {"success": false, "msg": "API key not found"} with 200).
        self.gone = gone

    def __repr__(self) -> str:
        return (f"ProviderError(kind={self.kind!r}, status={self.status!r}, "
                f"message={self.message!r})")


class ProviderClient(Protocol):
    """The read side every adapter offers."""

    @property
    def name(self) -> str: ...

    async def get(self, instance_id: str) -> InstanceInfo: ...

    async def list(self) -> list[InstanceInfo]: ...

    async def aclose(self) -> None: ...


class PowerClient(ProviderClient, Protocol):
    """The action side: each returns once the provider accepted the request (not its effect)."""

    @property
    def can_stop(self) -> bool: ...

    async def stop(self, instance_id: str) -> None: ...

    async def start(self, instance_id: str) -> None: ...

    async def destroy(self, instance_id: str) -> None: ...


class Secret:
    """An API key that prints as stars, so no repr, log or traceback can show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def key_from(env: Mapping[str, str], var: str, files: tuple[Path, ...] = ()) -> Secret | None:
    """The key from `var`, else the first readable non-empty file; never from the config."""
    value = env.get(var, "").strip()
    if value:
        return Secret(value)
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text:
            return Secret(text)
    return None


def backoff_seconds(failures: int) -> float:
    """Our own wait after `failures` refusals in a row when the server names none."""
    return BACKOFF_FIRST_SECONDS * BACKOFF_FACTOR ** (failures - 1)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds (delta-seconds or an HTTP date); None when absent or garbled."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


# --- lenient field readers: a provider's odd value becomes None, never a crash ---


def iso_epoch(value: object) -> float | None:
    """An ISO 8601 time as epoch seconds (no zone given means UTC)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def ident(obj: Mapping[str, Any], fallback: str | None) -> str:
    """The object's own id as text, else the one it was asked for."""
    value = obj.get("id")
    return str(value) if value is not None and value != "" else str(fallback)


def frozen_raw(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(obj))


def _excerpt(body: str) -> str:
    words = " ".join(body.split())
    return words if len(words) <= EXCERPT_CHARS else words[:EXCERPT_CHARS - 3] + "..."


_KIND_BY_STATUS: dict[int, ErrorKind] = {401: "auth", 403: "auth", 404: "not_found",
                                         409: "not_allowed", 429: "rate_limited"}
_WHAT: dict[ErrorKind, str] = {"auth": "the API key was refused", "not_found": "not found",
         "not_allowed": "not allowed now", "rate_limited": "rate limited",
         "server": "server error", "bad_answer": "unexpected answer"}
_NOT_JSON = object()
# Failures that happen before a byte of the request left: nothing can have changed.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout,
             httpx2.UnsupportedProtocol, httpx2.ProxyError)


class HttpProvider:
    """One provider's API over httpx2: the key, retries, deadlines and error words."""

    name: ClassVar[str]
    title: ClassVar[str]          # how people write the provider's name
    default_url: ClassVar[str]
    key_var: ClassVar[str]        # the environment variable that holds the key
    can_stop: ClassVar[bool] = True  # False: stop and start refuse without a request

    def __init__(self, base_url: str, key: Secret | None, *, timeout: float = 10.0,
                 sleep: Sleep = asyncio.sleep, max_tries: int = 5,
                 at_once: int = DEFAULT_PER_PROVIDER) -> None:
        if not plain_http_allowed(base_url):
            raise ValueError(f"{self.title} base_url {base_url!r}: plain http:// only for a "
                             "loopback address; the API key would cross the network "
                             "unencrypted: use https://")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_tries = max(1, max_tries)
        self._key = key
        self._sleep = sleep
        # Requests in flight at once ([connect] per_provider): a poll of a thousand boxes
        # queues here rather than opening a thousand connections to the API at once.
        self.at_once = max(1, at_once)
        self._slots = asyncio.Semaphore(self.at_once)
        self.in_flight = 0
        self.most_in_flight = 0
        self._http = httpx2.AsyncClient(
            base_url=self.base_url, timeout=timeout, follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": "gpurent-tui"})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, key={self._key!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> HttpProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- hooks an adapter overrides ---

    @classmethod
    def find_key(cls, env: Mapping[str, str]) -> Secret | None:
        """The API key: from the environment only, never from the config file."""
        return key_from(env, cls.key_var)

    @classmethod
    def url_from(cls, env: Mapping[str, str]) -> str:
        """The base URL when the config names none."""
        return cls.default_url

    @property
    def key_words(self) -> str:
        """Where the key is looked for, for the no_key message."""
        return f"set {self.key_var}"

    def said(self, data: Any, body: str) -> str:
        """What the provider said in an error body, in a few words."""
        return _excerpt(body) or "empty body"

    def kind_from_body(self, data: Any) -> ErrorKind | None:
        """A kind read from an error body, for statuses the table does not cover."""
        return None

    def failure_in(self, data: Any) -> tuple[ErrorKind, str] | None:
        """A failure hidden in a 2xx answer (Vast: success false): (kind, words)."""
        return None

    # --- the shared machinery ---

    def redact(self, text: str) -> str:
        """The text redacted (tui/model/redact.py) of the API key and every other secret in
        play: a server may echo the key anywhere in a body, wrapped across lines too. Done
        before any whitespace is folded or any of it cut for a message."""
        own = [self._key.reveal()] if self._key is not None else []
        return redact_text(text, [*own, *held_secrets()])

    def _starred(self, text: str) -> str:
        """A 2xx body with the key starred, and nothing else touched: the data the panel
        reads (the full redaction is for words that become a message)."""
        return text.replace(self._key.reveal(), "***") if self._key is not None else text

    def error(self, kind: ErrorKind, subject: str, what: str, status: int | None = None, *,
              instance_id: str | None = None, retry_after: float | None = None,
              maybe_applied: bool = False, gone: bool = False) -> ProviderError:
        # `what` may quote the server, which may echo the key: starred (the bodies it
        # quotes were starred whole before they were cut). The subject is ours (an
        # instance id), left intact even if a short key occurs in it. A provider's
        # words may hold control sequences: they never reach a terminal.
        what = clean(self.redact(what))
        return ProviderError(kind, f"{self.title} {subject}: {what}", status,
                             provider=self.name, instance_id=instance_id, retry_after=retry_after,
                             maybe_applied=maybe_applied, gone=gone)

    async def act(self, method: str, path: str, *, subject: str, instance_id: str,
                  body: Any = None) -> Any:
        """One action request: retried only while the provider says it refused it (429)."""
        return await self.call(method, path, subject=subject, instance_id=instance_id,
                               body=body, action=True)

    async def call(self, method: str, path: str, *, subject: str,
                   instance_id: str | None = None, params: Mapping[str, Any] | None = None,
                   body: Any = None, action: bool = False) -> Any:
        """One API call with retries; the decoded JSON, or ProviderError.

        With `action`, a 5xx is not retried, and every failure after the request
        may have been sent carries maybe_applied.
        """
        if self._key is None:
            raise self.error("no_key", subject, f"no API key: {self.key_words}",
                             instance_id=instance_id)
        headers = {"Authorization": f"Bearer {self._key.reveal()}"}
        waited = 0.0
        for attempt in range(1, self.max_tries + 1):
            try:
                async with self._slots:  # the deadline counts from the request, not the queue
                    self.in_flight += 1
                    self.most_in_flight = max(self.most_in_flight, self.in_flight)
                    try:
                        async with asyncio.timeout(self.timeout):
                            response = await self._http.request(
                                method, path, params=params, json=body, headers=headers)
                    finally:
                        self.in_flight -= 1
            except (TimeoutError, httpx2.TimeoutException) as exc:
                raise self.error("timeout", subject, f"no answer from {self.base_url} within "
                                 f"{self.timeout:g} s", instance_id=instance_id,
                                 maybe_applied=action and not isinstance(exc, _NOT_SENT)
                                 ) from None
            except httpx2.DecodingError as exc:
                raise self.error("bad_answer", subject, f"an answer that cannot be decoded "
                                 f"({exc})", instance_id=instance_id,
                                 maybe_applied=action) from None
            except (httpx2.RequestError, httpx2.InvalidURL) as exc:
                reason = str(exc) or type(exc).__name__
                sent = not isinstance(exc, (*_NOT_SENT, httpx2.InvalidURL))
                raise self.error("unreachable", subject, f"cannot reach {self.base_url} "
                                 f"({reason})", instance_id=instance_id,
                                 maybe_applied=action and sent) from None
            status = response.status_code
            if status != 429 and status < 500:
                return self._decode(response, subject, instance_id, action)
            kind: ErrorKind = "rate_limited" if status == 429 else "server"
            what = f"{_WHAT[kind]} (HTTP {status}: {self._said(response)})"
            if action and kind == "server":
                raise self.error(kind, subject, f"{what}; not retried: the request may or may "
                                 "not have been carried out", status, instance_id=instance_id,
                                 maybe_applied=True)
            asked = retry_after_seconds(response.headers.get("Retry-After"))
            if asked is not None and asked > MAX_RETRY_AFTER_SECONDS:
                raise self.error(kind, subject, f"{what}; the provider asks for {asked:g} s "
                                 "before the next try", status, instance_id=instance_id,
                                 retry_after=asked)
            if attempt == self.max_tries:
                raise self.error(kind, subject, f"{what}; gave up after {attempt} "
                                 f"{'try' if attempt == 1 else 'tries'} "
                                 f"({waited:.2f} s of waiting)", status,
                                 instance_id=instance_id, retry_after=asked)
            delay = asked if asked is not None else backoff_seconds(attempt)
            waited += delay
            await self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _said(self, response: httpx2.Response) -> str:
        body = self.redact(response.text)
        return self.said(_json_or(body), body)

    def _decode(self, response: httpx2.Response, subject: str, instance_id: str | None,
                action: bool = False) -> Any:
        status = response.status_code
        # Whole, before any of it is folded or cut for a message.
        body = self._starred(response.text) if 200 <= status < 300 else self.redact(response.text)
        data = _json_or(body)
        if 200 <= status < 300:
            if not response.content:
                return None
            if data is _NOT_JSON and action:
                return None  # accepted; what it did is for a fresh read to tell
            if data is _NOT_JSON:
                raise self.error("bad_answer", subject, f"HTTP {status} but not JSON: "
                                 f"{_excerpt(body)!r}", status, instance_id=instance_id)
            failure = self.failure_in(data)
            if failure is not None:
                kind, words = failure
                raise self.error(kind, subject, f"{_WHAT.get(kind, kind)} ({words})", status,
                                 instance_id=instance_id)
            return data
        kind = _KIND_BY_STATUS.get(status) or self.kind_from_body(data) or "bad_answer"
        what = f"{_WHAT[kind]} (HTTP {status}: {self.said(data, body)})"
        if kind == "auth":
            what += f"; check {self.key_var}"
        raise self.error(kind, subject, what, status, instance_id=instance_id,
                         gone=status == 404 and instance_id is not None)


def _json_or(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return _NOT_JSON
