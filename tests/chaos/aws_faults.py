"""AWS as it answers, not kinder: the errors AWS documents for each call once makes, injected
the way botocore raises them, for the message-level model (``message_model.py``).

A fault is armed by the model's ``inject`` rule (a per-example budget drawn by Hypothesis)
and fires once, at the next call of its kind: a per-call fault (an ``AccessDeniedException``
is one refused call, as when a policy is being rolled out), so that liveness at quiescence
still holds. A transient cancellation may be armed for ``COMMIT_TRIES`` calls in a row, to
outlast the store's own tries. A few are permanent (``PERMANENT``): a misconfiguration
(a missing grant, a disabled KMS key, a deleted queue) that answers every call of its kind
until the operator fixes the cause; until then the message must be where a person sees it
(the DLQ, by once's quarantine or SQS's ``maxReceiveCount``) and what a record owes must be
counted (``owed``), never silently dropped.

How each fault is answered:

- a DynamoDB call refused (``error``): ``botocore.exceptions.ClientError`` with AWS's
  ``Error.Code``, the request not applied;
- a canceled ``TransactWriteItems`` (``reason``): ``ClientError`` with
  ``TransactionCanceledException`` and its ``CancellationReasons``, one per element, the
  record's element last, ``None`` on the elements that were not the cause; nothing applied.
  ``ConditionalCheckFailed`` is injected on a staged element that has a condition (on the
  record's element DynamoDB only says so when its condition really failed: the model's
  zombies and ``retried`` below make it so);
- a 5xx or no answer after the write landed (``error_after``, ``timeout_after``): the
  request applied, then ``ClientError InternalServerError`` or ``ReadTimeoutError``; and
  the SDK's retry of a write that landed, refused (``error_after`` with a 400 code,
  ``reason_after``): the first try applied, its answer lost, the retry answered with a
  refusal or a cancellation (the case the fail after a canceled commit checks for:
  ``CommitLanded``);
- no answer before it reached DynamoDB (``timeout``): ``ReadTimeoutError``, not applied;
- the SDK's retry of a write that landed (``retried``): the request applied, its answer
  lost, the same request sent again and answered as the engine answers it (DynamoDB's
  token makes a retried commit a success; moto, which keeps no tokens, cancels it with the
  record's ``ConditionalCheckFailed`` and the item: once must take either for its own);
- SQS's and SNS's batch sends (``failed``): a successful response whose ``Failed`` holds the
  first entry with AWS's code (the others sent); ``error``: the call refused, nothing sent;
  ``timeout_after``: every entry sent, no answer;
- EventBridge's ``PutEvents`` (``failed``): a successful response whose first result entry
  holds AWS's ``ErrorCode`` and ``FailedEntryCount`` counts it (the others put, each result
  with its ``EventId``, in the request's order); ``error``: the call refused, nothing put;
  ``timeout_after``: every entry put, no answer;
- ``ChangeMessageVisibilityBatch``: ``failed`` entries, or the call refused;
- the quarantine's ``SendMessage``: the call refused, or sent with no answer.

The codes, each from the operation's documentation:
https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html,
.../API_CancellationReason.html, .../API_UpdateItem.html, .../CommonErrors.html;
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html,
.../API_SendMessage.html, .../API_ChangeMessageVisibilityBatch.html,
.../API_BatchResultErrorEntry.html (SQS's JSON protocol answers the query-compatible codes,
``AWS.SimpleQueueService.NonExistentQueue`` for ``QueueDoesNotExist``);
https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html;
https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html,
.../API_PutEventsResultEntry.html, .../CommonErrors.html.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError
from hypothesis import strategies as st

from once import store

#: ``CancellationReason`` codes of TransactWriteItems.
CANCELLATION_REASONS = (
    "ConditionalCheckFailed",
    "TransactionConflict",
    "ThrottlingError",
    "ValidationError",
    "ItemCollectionSizeLimitExceeded",
    "ProvisionedThroughputExceeded",
)
#: Of those, the ones that pass: armed once (the store's next try goes through) and for
#: every try (past them).
TRANSIENT_REASONS = ("TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded")
#: Errors of TransactWriteItems and UpdateItem refused unprocessed (400s).
DYNAMODB_REFUSALS = (
    "AccessDeniedException",
    "ResourceNotFoundException",
    "ValidationException",
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
)
#: TransactWriteItems only: refused unprocessed too, for a cause that passes or is unknown.
TRANSACT_ONLY = ("TransactionConflictException", "TransactionInProgressException")
#: 5xx: "the operation might have succeeded".
DYNAMODB_5XX = ("InternalServerError",)

#: SendMessageBatch's ``Failed`` entry codes and its call errors.
SQS_ENTRY_CODES = (
    "InvalidParameterValue",
    "InternalError",
    "KMS.AccessDeniedException",
    "KMS.ThrottlingException",
    "KMS.DisabledException",
    "RequestThrottled",
)
SQS_CALL_ERRORS = (
    "AccessDenied",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "RequestThrottled",
    "KmsAccessDenied",
    "KmsThrottled",
    "InvalidSecurity",
    "UnsupportedOperation",
)
#: PublishBatch's ``Failed`` entry codes and its call errors.
SNS_ENTRY_CODES = ("InternalError", "InvalidParameter", "KMSThrottling", "KMSAccessDenied")
SNS_CALL_ERRORS = (
    "AuthorizationError",
    "NotFound",
    "Throttled",
    "KMSAccessDenied",
    "KMSDisabled",
    "InternalError",
    "EndpointDisabled",
)
#: PutEvents' result entry ``ErrorCode``s of an entry it could not put for a cause that is not
#: its content (once refuses at ``attempt.send`` what PutEvents fails for its content):
#: retryable, ``InternalFailure`` and ``ThrottlingException``; not, the caller's permissions.
EVENTS_ENTRY_CODES = (
    "InternalFailure",
    "ThrottlingException",
    "AccessDeniedException",
    "NotAuthorizedForSourceException",
    "NotAuthorizedForDetailTypeException",
)
#: PutEvents' call errors: its own (``InternalException``) and the common ones.
EVENTS_CALL_ERRORS = (
    "InternalException",
    "AccessDeniedException",
    "ThrottlingException",
    "ResourceNotFoundException",
)
#: ChangeMessageVisibilityBatch's ``Failed`` entry codes and its call errors.
VISIBILITY_ENTRY_CODES = (
    "ReceiptHandleIsInvalid",
    "AWS.SimpleQueueService.MessageNotInflight",
    "InvalidParameterValue",
)
VISIBILITY_CALL_ERRORS = (
    "AccessDenied",
    "AWS.SimpleQueueService.NonExistentQueue",
    "RequestThrottled",
)
#: SendMessage's (the quarantine's) call errors. ``InvalidParameterValue`` and
#: ``InvalidMessageContents`` are refusals for the content: the quarantine tries once more
#: with once's attributes only.
QUARANTINE_CALL_ERRORS = (
    "AccessDenied",
    "AWS.SimpleQueueService.NonExistentQueue",
    "RequestThrottled",
    "KmsAccessDenied",
    "KmsThrottled",
    "InvalidParameterValue",
    "InvalidMessageContents",
)


#: ``Fault.times`` of a fault that answers every call until a person fixes its cause.
PERMANENT = 0


@dataclass(frozen=True)
class Fault:
    """One answer of AWS's to one call: ``target`` is the call (``commit``: the
    TransactWriteItems; ``complete``: the plain completion UpdateItem; ``claim``, ``fail``,
    ``clear``: once's other record writes; ``outbox-sqs``, ``outbox-sns``, ``visibility``,
    ``quarantine``), ``kind`` how it is answered (module docstring), ``code`` AWS's code,
    ``element`` which element of a canceled commit names it (``record`` or ``staged``), and
    ``times`` how many calls in a row it answers."""

    target: str
    kind: str
    code: str | None = None
    element: str = "record"
    times: int = 1

    def __str__(self) -> str:
        words = [self.target, self.kind]
        if self.code:
            words.append(self.code + (f"@{self.element}" if "reason" in self.kind else ""))
        if self.times > 1:
            words.append(f"x{self.times}")
        if self.times == PERMANENT:
            words.append("until fixed")
        return " ".join(words)

    @property
    def permanent(self) -> bool:
        return self.times == PERMANENT


def _catalog() -> tuple[Fault, ...]:
    faults: list[Fault] = []
    for element in ("record", "staged"):
        for code in CANCELLATION_REASONS:
            if code == "ConditionalCheckFailed" and element == "record":
                continue  # only when the condition really failed: retried, zombies
            faults.append(Fault("commit", "reason", code, element))
            if code in ("TransactionConflict", "ValidationError"):
                faults.append(Fault("commit", "reason_after", code, element))
            if code in TRANSIENT_REASONS:
                faults.append(Fault("commit", "reason", code, element, store.COMMIT_TRIES))
    for target in ("commit", "complete"):
        for code in DYNAMODB_REFUSALS + (TRANSACT_ONLY if target == "commit" else ()):
            faults.append(Fault(target, "error", code))
        faults.append(Fault(target, "error", "ThrottlingException", times=store.COMMIT_TRIES))
        for code in (*DYNAMODB_5XX, "ThrottlingException", "AccessDeniedException"):
            if code in DYNAMODB_5XX:
                faults.append(Fault(target, "error", code))
            faults.append(Fault(target, "error_after", code))
        faults += [
            Fault(target, "timeout"),
            Fault(target, "timeout_after"),
            Fault(target, "retried"),
        ]
    for target in ("claim", "fail", "clear"):
        for code in ("AccessDeniedException", "ThrottlingException", "InternalServerError"):
            faults.append(Fault(target, "error", code))
        faults.append(Fault(target, "error_after", "AccessDeniedException"))
        faults.append(Fault(target, "timeout_after"))
    for target, entries, calls in (
        ("outbox-sqs", SQS_ENTRY_CODES, SQS_CALL_ERRORS),
        ("outbox-sns", SNS_ENTRY_CODES, SNS_CALL_ERRORS),
        ("outbox-events", EVENTS_ENTRY_CODES, EVENTS_CALL_ERRORS),
        ("visibility", VISIBILITY_ENTRY_CODES, VISIBILITY_CALL_ERRORS),
    ):
        faults += [Fault(target, "failed", code) for code in entries]
        faults += [Fault(target, "error", code) for code in calls]
    for target in ("outbox-sqs", "outbox-sns", "outbox-events"):
        faults.append(Fault(target, "timeout_after"))
    faults += [Fault("quarantine", "error", code) for code in QUARANTINE_CALL_ERRORS]
    faults.append(Fault("quarantine", "timeout_after"))
    # Misconfigurations, until a person fixes them: a staged write DynamoDB does not accept,
    # a grant missing for the commit or the completion, a deleted destination, a disabled
    # KMS key on it, a DLQ whose policy refuses the function.
    faults += [
        Fault("commit", "reason", "ValidationError", "staged", PERMANENT),
        Fault("commit", "error", "AccessDeniedException", times=PERMANENT),
        Fault("complete", "error", "AccessDeniedException", times=PERMANENT),
        Fault("outbox-sqs", "error", "AWS.SimpleQueueService.NonExistentQueue", times=PERMANENT),
        Fault("outbox-sqs", "failed", "KMS.DisabledException", times=PERMANENT),
        Fault("outbox-sns", "error", "NotFound", times=PERMANENT),
        Fault("quarantine", "error", "AccessDenied", times=PERMANENT),
    ]
    return tuple(faults)


#: Every fault the model may inject.
FAULTS = _catalog()
#: The calls faults answer, weighted by how much hangs on them: the commit most.
_TARGETS = (
    "commit",
    "commit",
    "commit",
    "complete",
    "complete",
    "outbox-sqs",
    "outbox-sns",
    "quarantine",
    "visibility",
    "claim",
    "fail",
    "clear",
)


def faults() -> st.SearchStrategy[Fault]:
    """A fault: its call first (weighted), then one of that call's faults."""
    return st.sampled_from(_TARGETS).flatmap(
        lambda target: st.sampled_from([f for f in FAULTS if f.target == target])
    )


def client_error(code: str, operation: str, **extra: Any) -> ClientError:
    """What botocore raises for AWS's error ``code``: a 400, or a 500 for a server error."""
    server = ("InternalServerError", "InternalError", "InternalFailure", "InternalException")
    status = 500 if code in server else 400
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": f"{code} (injected by the model)"},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, operation)  # type: ignore[arg-type]


def timeout(service: str) -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url=f"https://{service}.us-east-1.amazonaws.com/")


class Faults:
    """The faults armed for an example, each answering the next call of its target."""

    def __init__(self, on_fired: Callable[[Fault], None] = lambda fault: None) -> None:
        self._armed: dict[str, list[Fault]] = {}
        self._lock = threading.Lock()
        self._on_fired = on_fired
        #: How many faults were armed in this example (the budget counts these).
        self.armed_count = 0
        #: The faults that answered a call, in order.
        self.fired: list[Fault] = []

    def arm(self, fault: Fault) -> None:
        with self._lock:
            self._armed.setdefault(fault.target, []).append(fault)
            self.armed_count += 1

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    def fix(self) -> None:
        """A person fixed every misconfiguration: the permanent faults answer no more."""
        with self._lock:
            for target, armed in self._armed.items():
                self._armed[target] = [f for f in armed if not f.permanent]

    def pending(self, target: str) -> int:
        """How many calls of ``target`` the armed faults are still to answer."""
        with self._lock:
            return sum(fault.times for fault in self._armed.get(target, []) if not fault.permanent)

    def take(self, target: str) -> Fault | None:
        """The fault that answers this call of ``target``, if one is armed (a fault armed
        for several calls stays armed, one call fewer)."""
        with self._lock:
            armed = self._armed.get(target)
            if not armed:
                return None
            fault = armed[0] if armed[0].permanent else armed.pop(0)
            if fault.times > 1:
                armed.insert(0, replace(fault, times=fault.times - 1))
        self.fired.append(fault)
        self._on_fired(fault)
        return fault


# --- DynamoDB ----------------------------------------------------------------------------------


def _update_target(request: dict[str, Any]) -> str:
    update = str(request.get("UpdateExpression", ""))
    if update.startswith("SET #status = :completed"):
        return "complete"
    if update.startswith("SET #status = :failed"):
        return "fail"
    if update.startswith("SET #status = :in_progress"):
        return "claim"
    if "REMOVE #outbox" in update and not update.startswith("SET #status"):
        return "clear"
    return "other"


class FaultyDynamoDB:
    """The handler's DynamoDB client: the engine's, answering as AWS may."""

    def __init__(self, client: Any, faults: Faults) -> None:
        self._client = client
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **request: Any) -> Any:
        call = lambda: self._client.transact_write_items(**request)  # noqa: E731
        fault = self._faults.take("commit")
        if fault is None:
            return call()
        if fault.kind in ("reason", "reason_after"):
            if fault.kind == "reason_after":
                call()  # the first try landed; its answer was lost
            items = request["TransactItems"]
            codes = ["None"] * len(items)
            index = len(items) - 1
            if fault.element == "staged":
                conditional = [
                    i
                    for i, item in enumerate(items[:-1])
                    if "ConditionCheck" in item
                    or "ConditionExpression" in next(iter(item.values()))
                ]
                if fault.code == "ConditionalCheckFailed":
                    if not conditional:
                        return call()  # no staged condition to fail: AWS would not say so
                    index = conditional[0]
                else:
                    index = 0
            codes[index] = str(fault.code)
            reasons = [
                {"Code": code, "Message": f"{code} (injected)"}
                if code != "None"
                else {"Code": "None"}
                for code in codes
            ]
            raise client_error(
                "TransactionCanceledException", "TransactWriteItems", CancellationReasons=reasons
            )
        return _answer(fault, call, "TransactWriteItems", "dynamodb")

    def update_item(self, **request: Any) -> Any:
        call = lambda: self._client.update_item(**request)  # noqa: E731
        target = _update_target(request)
        fault = self._faults.take(target) if target != "other" else None
        if fault is None:
            return call()
        return _answer(fault, call, "UpdateItem", "dynamodb")


def _answer(fault: Fault, call: Callable[[], Any], operation: str, service: str) -> Any:
    """A call answered by ``fault`` (any kind but a cancellation or a batch's entries)."""
    if fault.kind == "error":
        raise client_error(str(fault.code), operation)
    if fault.kind == "timeout":
        raise timeout(service)
    answer = call()
    if fault.kind == "error_after":
        raise client_error(str(fault.code), operation)
    if fault.kind == "timeout_after":
        raise timeout(service)
    if fault.kind == "retried":
        return call()
    return answer


def failed_entries(fault: Fault, entries: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """(the entries sent, the batch response's ``Failed``): the first entry failed."""
    first, *rest = entries
    failed = {
        "Id": first["Id"],
        "Code": fault.code,
        "SenderFault": fault.code not in ("InternalError", "RequestThrottled", "KMSThrottling"),
        "Message": f"{fault.code} (injected by the model)",
    }
    return rest, [failed]


def failed_event_entries(
    fault: Fault, entries: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the entries put, the result entry of the first, which PutEvents failed with
    ``fault.code``): PutEvents answers per entry, in the request's order."""
    return entries[1:], {
        "ErrorCode": fault.code,
        "ErrorMessage": f"{fault.code} (injected by the model)",
    }


def answer_call(fault: Fault, call: Callable[[], Any], operation: str, service: str) -> Any:
    """An SQS or SNS call answered by ``fault`` (refused, or sent with no answer)."""
    return _answer(fault, call, operation, service)
