"""Faults injected at the AWS client, where the protocol meets the network.

Each injector is a botocore ``before-send`` hook, on one client or on every client the
process creates (botocore's built-in handler list), so the code under test runs unchanged:
its requests are throttled, applied with their response lost (the SDK then retries a
write that already landed), or refused while an outage window is open. The harness's
workers and the record store's model-based test inject through here.

Each fault drawn at a rate is drawn by ``Dice``, which also fires each enabled fault on
the first event of the run it can fire on (``owe``); an outage window opens on a DynamoDB
call, never on the clock. So every enabled fault is injected at least once in every run
that gets as far as an event it can fire on, whatever the machine's speed and however the
draws fall: the chaos suite asserts that each was.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import botocore.handlers
import urllib3
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ConnectionClosedError

_THROTTLE_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException",'
    b'"message":"Rate of requests exceeds the allowed throughput (injected)"}'
)
_OUTAGE_BODY = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError",'
    b'"message":"Internal server error (injected outage)"}'
)


def _header(request: Any, name: str) -> str:
    value = request.headers.get(name, b"")
    return value.decode() if isinstance(value, bytes) else value


def _operation(request: Any) -> str:
    """The DynamoDB operation name of a prepared request (from its X-Amz-Target header)."""
    return _header(request, "X-Amz-Target").rsplit(".", 1)[-1]


def _first_attempt(request: Any) -> bool:
    """botocore numbers its attempts in the ``amz-sdk-request`` header."""
    return _header(request, "amz-sdk-request").startswith("attempt=1;")


def _take(path: str) -> bool:
    """Take the token file ``path``: of every thread and process that tries, exactly one
    succeeds (the kernel's unlink is atomic), and only while the file exists."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


#: The faults the workers draw per event at a rate (``Dice``): the probe's kills and pause
#: (``probe.py``), the client's throttles and lost responses (``Injector``), and the event
#: source mapping's failed deletes and short visibility timeouts (``worker.py``).
DRAWN = (
    "kill_after_claim",
    "kill_after_effect",
    "kill_before_finalize",
    "pause",
    "throttle",
    "lost_response",
    "delete_failed",
    "short_visibility",
    # The outbox's faults (the two-hop consumers only: the others never reach an event that
    # fires them): a kill between the sends and the clear of a record's outbox, a send to the
    # notifications queue refused, one applied with its answer lost (the SDK sends it again:
    # the message is there twice), a clear throttled past the SDK's retries (the outbox is
    # sent again); and, to an EventBridge bus, an entry of PutEvents failed, the others sent.
    "kill_before_clear",
    "send_failed",
    "send_duplicated",
    "throttle_clear",
    "event_entry_failed",
)


def owe(prefix: str, rates: dict[str, float]) -> list[Path]:
    """Make a run owe each enabled drawn fault one injection: a token file
    ``<prefix>.<kind>`` per kind of ``DRAWN`` whose rate is above zero, made before the
    run's workers start and taken by the first event that can fire it (``Dice.roll``).
    Returns the files, for the harness to remove what is left when the run ends."""
    owed = [Path(f"{prefix}.{kind}") for kind in DRAWN if rates.get(kind, 0.0) > 0]
    for path in owed:
        path.touch()
    return owed


class Dice:
    """A worker's fault draws, shared by its injector, its probe and its delivery loop.

    Each kind fires at its rate, drawn per event from the worker's seeded ``rng`` (each
    event draws, whether or not it fires the debt, so the draws are those a run owing
    nothing makes). On top of that, a run owes each enabled kind one injection (``owe``):
    the first event of the run that could fire it, in whichever worker process, takes the
    kind's token file and fires it.

    Why: a rate only makes a fault likely. A small run, or one whose draws fall badly,
    could end without injecting a fault the chaos suite asserts was injected, and fail it
    by luck; with the token, a run that reaches an event a fault can fire on injects it,
    by construction. The rate is then the rate plus that one injection per run."""

    def __init__(self, rng: random.Random, owed: str | None = None) -> None:
        self._rng = rng
        self._owed = owed
        self._lock = threading.Lock()
        #: Kinds whose token this process found gone: never made again in a run.
        self._paid: set[str] = set()

    def roll(self, kind: str, rate: float) -> bool:
        """Whether this event fires ``kind``: the run's first chance to, or a draw at ``rate``."""
        with self._lock:
            drawn = self._rng.random() < rate
        return (rate > 0 and self._owed_now(kind)) or drawn

    def _owed_now(self, kind: str) -> bool:
        if self._owed is None or kind in self._paid:
            return False
        self._paid.add(kind)
        return _take(f"{self._owed}.{kind}")


class Injector:
    """Installs fault hooks and counts what it injected, per fault kind.

    ``client=None`` hooks every client created afterwards in this process. ``dice`` draws
    the faults (by default a ``Dice`` of ``rng`` that owes none)."""

    def __init__(
        self,
        client: Any | None,
        rng: random.Random | None = None,
        on_fault: Callable[[str], None] | None = None,
        dice: Dice | None = None,
    ) -> None:
        self._client = client
        self._on_fault = on_fault
        self._dice = dice or Dice(rng or random.Random(0))
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager()
        self._hooks: dict[str, list[Callable[..., Any]]] = {}
        self.counts: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
        if self._on_fault is not None:
            self._on_fault(kind)

    def _register(self, hook: Callable[..., Any], service: str = "dynamodb") -> None:
        """Add ``hook`` to the service's faults, tried in the order they were added.

        One dispatcher per service is registered, which stops at the first fault that
        answers (or raises): botocore runs every ``before-send`` handler and keeps the first
        answer, so faults registered side by side would otherwise all act on one attempt (a
        send refused by one, yet put for real and retried by another), and a fault counted
        where another answered would be counted and never met by the code under test."""
        hooks = self._hooks.setdefault(service, [])
        hooks.append(hook)
        if len(hooks) > 1:
            return

        def dispatch(request: Any, **kwargs: Any) -> AWSResponse | None:
            for each in hooks:
                answer = each(request, **kwargs)
                if answer is not None:
                    return answer
            return None

        if self._client is None:
            botocore.handlers.BUILTIN_HANDLERS.append((f"before-send.{service}", dispatch))
        else:
            self._client.meta.events.register(f"before-send.{service}", dispatch)

    def throttle(self, rate: float, operations: Iterable[str] = ("UpdateItem",)) -> None:
        """Answer a share of calls with a throttling error, as DynamoDB does under load."""
        names = set(operations)

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if _operation(request) not in names or not self._dice.roll("throttle", rate):
                return None
            self._count("throttle")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 400, headers, _RawBody(_THROTTLE_BODY))

        self._register(hook)

    def outage(self, flag: str, armed: str) -> None:
        """While the file ``flag`` exists, answer every call with a server error, as DynamoDB
        does in an outage: a window for every worker at once (``harness.OutageWindows``).

        A window opens on a call, never on the clock: the harness arms one (makes the file
        ``armed``), and the first DynamoDB call any worker makes after that takes it, opens
        the window (``flag``, holding the monotonic time it opened, which every process
        shares) and is refused itself. So every window refuses at least one call, however
        idle the run is when it is armed (in a run's tail every message may be waiting out
        its backoff, and nobody calls DynamoDB); the harness closes it."""

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if not os.path.exists(flag):
                if not _take(armed):
                    return None
                _open_window(flag)
            self._count("outage")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 500, headers, _RawBody(_OUTAGE_BODY))

        self._register(hook)

    def lose_responses(self, rate: float, operations: Iterable[str] = ("UpdateItem",)) -> None:
        """Apply a share of writes for real, then drop the answer: the SDK sends it again.

        Only first attempts lose their answer, so the retry always gets through."""
        names = set(operations)

        def hook(request: Any, **_: Any) -> None:
            if (
                _operation(request) not in names
                or not _first_attempt(request)
                or not self._dice.roll("lost_response", rate)
            ):
                return
            _replay(self._http, request)
            self._count("lost_response")
            raise ConnectionClosedError(endpoint_url=request.url)

        self._register(hook)

    def throttle_clears(self, rate: float) -> None:
        """Throttle a share of once's clears of a sent outbox (an ``UpdateItem`` that removes
        it, ``is_clear``) on every attempt the SDK makes of the call (its attempts share an
        ``amz-sdk-invocation-id``): the clear fails past the retries, the record still owes
        what was sent, and the next delivery sends it again under the same identity."""
        throttled: set[str] = set()

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if _operation(request) != "UpdateItem":
                return None
            call = _header(request, "amz-sdk-invocation-id")
            if call not in throttled:
                if (
                    not _first_attempt(request)
                    or not is_clear(_json_body(request).get("UpdateExpression", ""))
                    or not self._dice.roll("throttle_clear", rate)
                ):
                    return None
                throttled.add(call)
                self._count("throttle_clear")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 400, headers, _RawBody(_THROTTLE_BODY))

        self._register(hook)

    def fail_event_entries(self, rate: float, bus: str) -> None:
        """Fail the first entry of a share of the ``PutEvents`` to ``bus`` as EventBridge
        reports an entry it could not put, and put the others for real: the call answers 200,
        ``FailedEntryCount`` 1, the failed entry's result an ``ErrorCode`` (``InternalFailure``
        and ``ThrottlingException`` in turn, the codes PutEvents calls retryable) where the
        others' hold their ``EventId``, in the request's order. "If an individual entry within
        a request fails, EventBridge continues processing the rest"
        (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html;
        https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
        The SDK does not retry a 200: the sender must send the failed entry again."""

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if not _send_to(request, bus) or not self._dice.roll("event_entry_failed", rate):
                return None
            code = _EVENT_ENTRY_CODES[self.counts.get("event_entry_failed", 0) % 2]
            self._count("event_entry_failed")
            request_body = _json_body(request)
            others = request_body["Entries"][1:]
            results: list[dict[str, Any]] = []
            if others:
                answer = _forward(self._http, request, {**request_body, "Entries": others})
                if answer.status != 200:
                    # The others refused as a whole: the call is answered as they were.
                    headers = HTTPHeaders.from_dict(dict(answer.headers))
                    return AWSResponse(request.url, answer.status, headers, _RawBody(answer.data))
                results = json.loads(answer.data)["Entries"]
            error = {"ErrorCode": code, "ErrorMessage": f"{code} (injected)"}
            body = {
                "FailedEntryCount": 1 + sum(1 for r in results if r.get("ErrorCode")),
                "Entries": [error, *results],
            }
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 200, headers, _RawBody(json.dumps(body).encode()))

        self._register(hook, "events")

    def fail_sends(self, rate: float, destination: str) -> None:
        """Refuse a share of the sends to ``destination`` (a queue's URL: ``SendMessage``,
        ``SendMessageBatch``; a topic's ARN: ``Publish``, ``PublishBatch``; a bus's ARN:
        ``PutEvents``) with an error the SDK does not retry, as SQS and SNS answer when the key
        that encrypts the queue or topic is not usable and EventBridge when the caller may not
        put events on the bus: nothing is sent, the sender must send it again later."""
        service = _service(destination)
        refused = _REFUSED_BODIES[service]

        def hook(request: Any, **_: Any) -> AWSResponse | None:
            if not _send_to(request, destination) or not self._dice.roll("send_failed", rate):
                return None
            self._count("send_failed")
            headers = HTTPHeaders.from_dict({"x-amzn-RequestId": "injected"})
            return AWSResponse(request.url, 400, headers, _RawBody(refused))

        self._register(hook, service)

    def duplicate_sends(self, rate: float, destination: str) -> None:
        """Apply a share of the sends to ``destination`` (a queue's URL or a topic's ARN) for
        real, then drop the answer: the SDK sends them again, and the message goes out twice
        (a standard queue does not deduplicate; a standard topic publishes each request, each
        with a message id, timestamp and signature of its own). Only first attempts, so the
        retry always gets through."""

        def hook(request: Any, **_: Any) -> None:
            if (
                not _send_to(request, destination)
                or not _first_attempt(request)
                or not self._dice.roll("send_duplicated", rate)
            ):
                return
            _replay(self._http, request)
            self._count("send_duplicated")
            raise ConnectionClosedError(endpoint_url=request.url)

        self._register(hook, _service(destination))


_SEND_REFUSED_BODY = (
    b'{"__type":"com.amazonaws.sqs#KmsAccessDenied",'
    b'"message":"The queue\'s KMS key is not usable (injected)"}'
)
#: SNS speaks the query protocol: its errors are XML (``KMSAccessDenied``: "The ciphertext
#: references a key that doesn't exist or that you don't have access to", HTTP 400,
#: https://docs.aws.amazon.com/sns/latest/api/API_Publish.html#API_Publish_Errors).
_SNS_SEND_REFUSED_BODY = (
    b'<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error>'
    b"<Type>Sender</Type><Code>KMSAccessDenied</Code>"
    b"<Message>The topic's KMS key is not usable (injected)</Message></Error>"
    b"<RequestId>injected</RequestId></ErrorResponse>"
)


#: EventBridge speaks a JSON protocol; ``AccessDeniedException`` ("You do not have sufficient
#: access to perform this action", HTTP 400) is one of the errors common to its actions
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/CommonErrors.html).
_EVENTS_SEND_REFUSED_BODY = (
    b'{"__type":"AccessDeniedException",'
    b'"message":"The caller may not put events on this bus (injected)"}'
)
_REFUSED_BODIES = {
    "sqs": _SEND_REFUSED_BODY,
    "sns": _SNS_SEND_REFUSED_BODY,
    "events": _EVENTS_SEND_REFUSED_BODY,
}
#: The ``ErrorCode``s PutEvents calls retryable, given in turn to the entries it fails
#: (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsResultEntry.html).
_EVENT_ENTRY_CODES = ("InternalFailure", "ThrottlingException")


def _service(destination: str) -> str:
    """The service a destination of the outbox belongs to: a topic's ARN is SNS's, a bus's
    EventBridge's."""
    if destination.startswith("arn:"):
        return destination.split(":")[2]
    return "sqs"


def is_clear(update: str) -> bool:
    """once's clear of a sent outbox (its ``UpdateExpression``): removes it, writes no
    status."""
    return "REMOVE #outbox" in update and not update.startswith("SET #status")


def _json_body(request: Any) -> dict[str, Any]:
    """A JSON protocol request's parameters (empty if its body is none)."""
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _send_to(request: Any, destination: str) -> bool:
    """Whether a prepared request sends to ``destination``: an SQS send (JSON protocol) to
    that queue's URL, an SNS publish (query protocol) to that topic's ARN, or a PutEvents
    (JSON protocol) with an entry for that bus."""
    service = _service(destination)
    if service == "events":
        entries = _json_body(request).get("Entries") or []
        return _header(request, "X-Amz-Target") == "AWSEvents.PutEvents" and any(
            isinstance(e, dict) and e.get("EventBusName") == destination for e in entries
        )
    if service == "sns":
        body = request.body or ""
        try:
            form = urllib.parse.parse_qs(body.decode() if isinstance(body, bytes) else body)
        except (UnicodeDecodeError, TypeError):
            return False
        return form.get("Action") in (["Publish"], ["PublishBatch"]) and form.get("TopicArn") == [
            destination
        ]
    if _header(request, "X-Amz-Target").rsplit(".", 1)[-1] not in (
        "SendMessage",
        "SendMessageBatch",
    ):
        return False
    return bool(_json_body(request).get("QueueUrl") == destination)


def _replay(http: urllib3.PoolManager, request: Any) -> None:
    """Send a prepared request for real, its answer ignored."""
    headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
    http.request(request.method, request.url, body=request.body, headers=headers, retries=False)


def _forward(
    http: urllib3.PoolManager, request: Any, params: dict[str, Any]
) -> urllib3.BaseHTTPResponse:
    """Send a prepared JSON protocol request for real with other parameters, and answer what
    the engine answered (the local engines check no signature)."""
    body = json.dumps(params).encode()
    headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
    headers["Content-Length"] = str(len(body))
    return http.request(request.method, request.url, body=body, headers=headers, retries=False)


def _open_window(flag: str) -> None:
    """Make ``flag`` with the time it opened in it, whole from the moment it exists."""
    part = f"{flag}.{os.getpid()}"
    Path(part).write_text(repr(time.monotonic()))
    os.replace(part, flag)


class _RawBody:
    """The minimal raw-response object AWSResponse reads a body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterable[bytes]:
        yield self._body

    def read(self, *_: Any) -> bytes:
        return self._body
