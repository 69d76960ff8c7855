"""moto held to AWS's documented rules for SQS, SNS and DynamoDB requests, where moto is
lenient, with AWS's error codes: ``install()`` patches moto in the current process.

Why: what AWS refuses, the local cloud and ``once_env`` refuse (docs/localcloud.md, "Faithful
to AWS: the rules enforced here"). moto takes a FIFO group id with a space, a body with a
control character, an 11th message attribute, a 39-digit Number, a DeleteMessageBatch of 11, a
TransactWriteItems of 4 MB or naming one item twice as ``{"N": "1"}`` and ``{"N": "1.0"}``,
a reused ClientRequestToken with other parameters...: a team's code that passes its tests
would fail on AWS. Each rule is checked before moto runs the request, and a refused request
fails as AWS fails it; a valid request reaches moto unchanged.

The rules are ``once.sendrules``'s (the runtime's own predicates: characters, attribute
names, data types, numbers, group ids, sizes), not written again here. What sendrules has no
predicate for is written here: the batch entry id (``_BATCH_ENTRY_ID``), DelaySeconds and
VisibilityTimeout ranges, DynamoDB's transaction size, its number normalization and the
ClientRequestToken window.

How: each patch wraps the method it finds (a response handler of moto's SQS, SNS or
DynamoDB; ``DynamoType.__init__``, which normalizes numbers; ``LimitedSizeDict.__setitem__``,
which moves moto's item size limit to DynamoDB's) and calls it for what it lets through, so
it composes with ``oncecli.localcloud.motoserver``'s patches (which wrap other methods: the
backend's ``transact_write_items``, ``receive_message``..., and ``DynamoHandler.call_action``).
``install()`` is idempotent: the local cloud's moto server calls it before it starts,
``OnceEnv.__enter__`` before it starts ``mock_aws``.

Batches: a rule on the request (entry count, entry ids, the batch's payload) refuses the
request; a rule on one message (its characters, attributes, group id, delay) fails that
entry (``Failed``, ``SenderFault``) and the others are sent, as SendMessageBatch and
PublishBatch report "the result of each message ... individually".
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html
https://docs.aws.amazon.com/sns/latest/api/API_PublishBatch.html
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from once import sendrules

_install_lock = threading.Lock()

#: A batch entry's Id (SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch,
#: PublishBatch): "up to 80 characters. The following characters are accepted: alphanumeric
#: characters, hyphens(-), and underscores (_)" (botocore sqs/2012-11-05
#: SendMessageBatchRequestEntry.Id; sns/2010-03-31 PublishBatchRequestEntry.Id). ASCII: moto's
#: ``[\w-]`` takes any Unicode letter. (Not in sendrules: once's ids are digits.)
_BATCH_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
#: SendMessage DelaySeconds: "Valid values: 0 to 900" (botocore SendMessageRequest.DelaySeconds).
_MAX_DELAY_S = 900
#: VisibilityTimeout: "Values range: 0 to 43200" (botocore
#: ChangeMessageVisibilityRequest.VisibilityTimeout; ReceiveMessage's the same).
_MAX_VISIBILITY_S = 43200
#: TransactWriteItems: "The aggregate size of the items in the transaction cannot exceed
#: 4 MB" (botocore dynamodb/2012-08-10 operation TransactWriteItems).
_TRANSACTION_MAX_BYTES = 4 * 1024 * 1024
#: DynamoDB's item size limit, 400 KB.
_ITEM_MAX_BYTES = 400 * 1024
#: "A client request token is valid for 10 minutes after the first request that uses it is
#: completed" (botocore TransactWriteItemsInput.ClientRequestToken).
_TOKEN_WINDOW_S = 600.0


#: The mark on a patched method.
_MARK = "__once_strict__"


class _Refused(Exception):
    """One message refused: the code and message AWS answers with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def install() -> None:
    """Patch moto's SQS, SNS and DynamoDB in this process (once; later calls do nothing).
    Whether it ran is read off moto (a mark on the methods it wraps), not this module: the
    local cloud's server loads this file under another name (``motoserver._strict``)."""
    from moto.dynamodb.responses import DynamoHandler

    with _install_lock:
        if installed(DynamoHandler.transact_write_items):
            return
        _install_sqs()
        _install_sns()
        _install_dynamodb()  # last: its mark says all three are in


def installed(method: Any) -> bool:
    """Whether ``method`` is one of these patches (or wraps one)."""
    return bool(getattr(method, _MARK, False))


def _wrap(owner: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace ``owner.name`` by ``make(the method there now)``: composes with earlier
    wrappers instead of replacing them."""
    original = getattr(owner, name)
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _MARK, True)
    setattr(owner, name, wrapped)


# --- SQS ---------------------------------------------------------------------------------------


def _sqs_message_problem(
    body: Any,
    attributes: Mapping[str, Mapping[str, Any]] | None,
    *,
    max_bytes: int,
    group_id: str | None,
    deduplication_id: str | None,
    delay_seconds: Any,
    fifo: bool,
) -> _Refused | None:
    """Why SQS refuses this message (one SendMessage, or one SendMessageBatch entry), or None.
    A FIFO queue's own rules (a group id required, a deduplication id unless content-based,
    no per-message delay) are moto's, pinned by the tests; a standard queue's refusal of a
    deduplication id is here (moto takes it)."""
    attributes = attributes or {}
    if deduplication_id is not None and not fifo:
        # "MessageDeduplicationId ... applies only to FIFO (first-in-first-out) queues"
        # (SendMessage, SendMessageBatchRequestEntry); SQS answers InvalidParameterValue,
        # "The request include parameter that is not valid for this queue type". A standard
        # queue takes a MessageGroupId (fair queues), never a deduplication id.
        # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html
        return _Refused(
            "InvalidParameterValue",
            f"Value {deduplication_id} for parameter MessageDeduplicationId is invalid. "
            "Reason: The request include parameter that is not valid for this queue type.",
        )
    if body is None or body == "":
        # "The minimum size is one character" (SendMessageRequest.MessageBody).
        return _Refused("MissingParameter", "The request must contain the parameter MessageBody.")
    if not sendrules.text_taken(body, to_topic=False):
        # "If a message contains characters outside the allowed set, Amazon SQS rejects the
        # message and returns an InvalidMessageContents error" (SendMessageRequest.MessageBody).
        return _Refused("InvalidMessageContents", "Invalid characters found in the message body.")
    # "A message can contain up to 10 metadata attributes" (SQS quotas, messages).
    if len(attributes) > sendrules.MAX_ATTRIBUTES:
        return _Refused(
            "InvalidParameterValue",
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{sendrules.MAX_ATTRIBUTES}].",
        )
    for name, attribute in attributes.items():
        problem = _attribute_problem(name, attribute, to_topic=False)
        if problem is not None:
            return problem
    size = sendrules.request_message_bytes(body, attributes)
    if size > max_bytes:
        # The body and every attribute's name, type and value count (MessageAttributeValue).
        return _Refused(
            "InvalidParameterValue",
            "One or more parameters are invalid. Reason: Message must be shorter than "
            f"{max_bytes} bytes.",
        )
    # A group id on any queue (standard queues take one for fair queues), a deduplication id:
    # 1 to 128 of the same characters (SendMessageRequest.MessageGroupId,
    # .MessageDeduplicationId; sendrules.group_id_taken, whose note says the deduplication
    # id takes the same).
    for parameter, value in (
        ("MessageGroupId", group_id),
        ("MessageDeduplicationId", deduplication_id),
    ):
        if value is not None and not sendrules.group_id_taken(value):
            return _Refused(
                "InvalidParameterValue",
                f"Value {value} for parameter {parameter} is invalid. Reason: {parameter} can "
                "only include alphanumeric and punctuation characters. 1 to 128 in length.",
            )
    if delay_seconds is not None:
        delay = int(delay_seconds)
        if not 0 <= delay <= _MAX_DELAY_S:
            return _Refused(
                "InvalidParameterValue",
                f"Value {delay} for parameter DelaySeconds is invalid. Reason: DelaySeconds "
                f"must be >= 0 and <= {_MAX_DELAY_S}.",
            )
    return None


def _attribute_problem(
    name: str, attribute: Mapping[str, Any], *, to_topic: bool
) -> _Refused | None:
    """Why SQS (or SNS) refuses this message attribute, or None. SQS answers
    ``InvalidParameterValue`` (a String value's characters: ``InvalidMessageContents``, "the
    same restrictions on the content as the message body"); SNS ``ParameterValueInvalid``
    (its InvalidParameterValueException, botocore sns/2010-03-31)."""
    invalid = "ParameterValueInvalid" if to_topic else "InvalidParameterValue"
    if not sendrules.attribute_name_taken(name):
        return _Refused(
            invalid,
            f"The message attribute name '{name}' is invalid. Attribute name can contain A-Z, "
            "a-z, 0-9, underscore (_), hyphen (-), and period (.) characters; it cannot start "
            "with AWS. or Amazon., start or end with a period, or hold two periods in "
            "succession, and has at most 256 characters.",
        )
    data_type = attribute.get("DataType") or ""
    if to_topic and data_type == "String.Array":
        return None  # SNS's own type (filter policies); once holds it to nothing more
    base = sendrules.data_type_base(data_type)
    if base is None:
        return _Refused(
            invalid,
            f"The message attribute '{name}' has an invalid message attribute type, the set "
            "of supported type prefixes is Binary, Number, and String.",
        )
    value = attribute.get("BinaryValue") if base == "Binary" else attribute.get("StringValue")
    if value is None or value == "" or value == b"":
        return _Refused(
            invalid,
            f"The message attribute '{name}' must contain non-empty message attribute value "
            f"for message attribute type '{base}'.",
        )
    if isinstance(value, str) and not sendrules.text_taken(value, to_topic=to_topic):
        return _Refused(
            invalid if to_topic else "InvalidMessageContents",
            f"Invalid characters found in the value of message attribute '{name}'.",
        )
    if not sendrules.value_taken(base, value, to_topic=to_topic):
        # A Number: "up to 38 digits of precision, and it can be between 10^-128 and
        # 10^+126" (SQS and SNS message attribute data types).
        return _Refused(
            invalid,
            f"Value {value!s} for message attribute '{name}' of type {base} is invalid: a "
            "Number has at most 38 digits of precision, between 10^-128 and 10^+126.",
        )
    return None


def _batch_problem(entries: list[Mapping[str, Any]], action: str, sqs: bool) -> Exception | None:
    """The request-level refusal of a batch (SQS's exceptions when ``sqs``, else SNS's), or
    None: no entries, more than 10, an id twice, an id SQS does not take."""
    from moto.sns.exceptions import SNSException
    from moto.sqs.exceptions import (
        BatchEntryIdsNotDistinct,
        EmptyBatchRequest,
        InvalidBatchEntryId,
        TooManyEntriesInBatchRequest,
    )

    if not entries:
        return (
            EmptyBatchRequest(action=action)
            if sqs
            else SNSException("EmptyBatchRequest", "The batch request doesn't contain any entries.")
        )
    if len(entries) > sendrules.BATCH_MAX_ENTRIES:
        return (
            TooManyEntriesInBatchRequest(len(entries))
            if sqs
            else SNSException(
                "TooManyEntriesInBatchRequest",
                "The batch request contains more entries than permissible.",
            )
        )
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry.get("Id")
        if not isinstance(entry_id, str) or _BATCH_ENTRY_ID.fullmatch(entry_id) is None:
            return (
                InvalidBatchEntryId()
                if sqs
                else SNSException(
                    "InvalidBatchEntryId",
                    "A batch entry id can only contain alphanumeric characters, hyphens and "
                    "underscores. It can be at most 80 letters long.",
                )
            )
        if entry_id in seen:
            return (
                BatchEntryIdsNotDistinct(entry_id)
                if sqs
                else SNSException(
                    "BatchEntryIdsNotDistinct",
                    "Two or more batch entries in the request have the same Id.",
                )
            )
        seen.add(entry_id)
    return None


def _failed(entry_id: str, refused: _Refused) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": True, "Code": refused.code, "Message": refused.message}


def _with_failures(result: Any, failures: list[dict[str, Any]]) -> Any:
    """moto's batch result with the entries refused here added to its ``Failed``."""
    from moto.core.responses import ActionResult

    if not failures:
        return result
    if isinstance(result, ActionResult) and isinstance(result.result, dict):
        merged = dict(result.result)
        merged["Failed"] = [*failures, *(merged.get("Failed") or [])]
        return ActionResult(merged)
    return result  # pragma: no cover - moto's shape changed: its own answer stands


def _sending_the_rest(
    response: Any,
    original: Callable[..., Any],
    parameter: str,
    problem_of: Callable[[Mapping[str, Any]], _Refused | None],
) -> Any:
    """A batch whose entries AWS would refuse fail alone (``Failed``, ``SenderFault``): moto
    runs the rest, and its result gains those failures."""
    from moto.core.responses import ActionResult

    failures, kept = [], []
    for entry in response._get_param(parameter) or []:
        problem = problem_of(entry)
        if problem is None:
            kept.append(entry)
        else:
            failures.append(_failed(entry["Id"], problem))
    if not kept:
        return ActionResult({"Successful": [], "Failed": failures})
    if failures:
        response.params = {**response.params, parameter: kept}
    return _with_failures(original(response), failures)


def _payload_bytes(entries: list[Mapping[str, Any]], body: str) -> int:
    """A batch's payload as SQS and SNS count it: every message's body and attributes."""
    return sum(
        sendrules.request_message_bytes(e.get(body) or "", e.get("MessageAttributes") or {})
        for e in entries
    )


def _install_sqs() -> None:
    from moto.sqs.exceptions import SQSException
    from moto.sqs.responses import SQSResponse

    def queue_of(response: Any) -> Any:
        return response.sqs_backend.get_queue(response._get_queue_name())

    def send_message(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_send_message(self: Any) -> Any:
            queue = queue_of(self)
            problem = _sqs_message_problem(
                self._get_param("MessageBody"),
                self._get_param("MessageAttributes"),
                max_bytes=int(queue.maximum_message_size),
                group_id=self._get_param("MessageGroupId"),
                deduplication_id=self._get_param("MessageDeduplicationId"),
                delay_seconds=self._get_param("DelaySeconds"),
                fifo=bool(queue.fifo_queue),
            )
            if problem is not None:
                raise SQSException(problem.code, problem.message)
            return original(self)

        return strict_send_message

    def send_message_batch(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_send_message_batch(self: Any) -> Any:
            entries = self._get_param("Entries") or []
            refused = _batch_problem(entries, "Send", sqs=True)
            if refused is not None:
                raise refused
            # "the maximum total payload size (the sum of the individual lengths of all of
            # the batched messages) [is] 1 MiB", attributes counted (SendMessageBatch).
            total = _payload_bytes(entries, "MessageBody")
            if total > sendrules.SQS_BATCH_MAX_BYTES:
                from moto.sqs.exceptions import BatchRequestTooLong

                raise BatchRequestTooLong(total)
            queue = queue_of(self)
            max_bytes, fifo = int(queue.maximum_message_size), bool(queue.fifo_queue)
            return _sending_the_rest(
                self,
                original,
                "Entries",
                lambda entry: _sqs_message_problem(
                    entry.get("MessageBody"),
                    entry.get("MessageAttributes"),
                    max_bytes=max_bytes,
                    group_id=entry.get("MessageGroupId"),
                    deduplication_id=entry.get("MessageDeduplicationId"),
                    delay_seconds=entry.get("DelaySeconds"),
                    fifo=fifo,
                ),
            )

        return strict_send_message_batch

    def negative_visibility(entry: Mapping[str, Any]) -> _Refused | None:
        timeout = entry.get("VisibilityTimeout")
        return None if timeout is None or int(timeout) >= 0 else _visibility_refused(int(timeout))

    def id_checked_batch(action: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(original: Callable[..., Any]) -> Callable[..., Any]:
            def strict_batch(self: Any) -> Any:
                entries = self._get_param("Entries") or []
                refused = _batch_problem(entries, action, sqs=True)
                if refused is not None:
                    raise refused
                if action != "ChangeMessageVisibility":
                    return original(self)
                # A negative timeout fails its entry (moto fails only one over 43200).
                return _sending_the_rest(self, original, "Entries", negative_visibility)

            return strict_batch

        return make

    def visibility_checked(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_visibility(self: Any) -> Any:
            timeout = self._get_param("VisibilityTimeout")
            if timeout is not None and not 0 <= int(timeout) <= _MAX_VISIBILITY_S:
                problem = _visibility_refused(int(timeout))
                raise SQSException(problem.code, problem.message)
            return original(self)

        return strict_visibility

    _wrap(SQSResponse, "send_message", send_message)
    _wrap(SQSResponse, "send_message_batch", send_message_batch)
    _wrap(SQSResponse, "delete_message_batch", id_checked_batch("Delete"))
    _wrap(
        SQSResponse, "change_message_visibility_batch", id_checked_batch("ChangeMessageVisibility")
    )
    _wrap(SQSResponse, "change_message_visibility", visibility_checked)
    _wrap(SQSResponse, "receive_message", visibility_checked)


def _visibility_refused(timeout: int) -> _Refused:
    return _Refused(
        "InvalidParameterValue",
        f"Value {timeout} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 "
        f"and <= {_MAX_VISIBILITY_S}, if provided.",
    )


# --- SNS ---------------------------------------------------------------------------------------


def _sns_message_problem(
    message: Any,
    attributes: Mapping[str, Mapping[str, Any]] | None,
    *,
    fifo: bool,
    group_id: str | None,
    deduplication_id: str | None,
) -> _Refused | None:
    """Why SNS refuses this message (one Publish, or one PublishBatch entry), or None.
    ``InvalidParameter`` is SNS's InvalidParameterException (the code moto already answers a
    body over 256 KiB with), ``ParameterValueInvalid`` its InvalidParameterValueException."""
    attributes = attributes or {}
    for name, attribute in attributes.items():
        problem = _attribute_problem(name, attribute, to_topic=True)
        if problem is not None:
            return problem
    if isinstance(message, str):
        size = sendrules.request_message_bytes(message, attributes)
        if size > sendrules.SNS_MESSAGE_MAX_BYTES:
            # "All parts of the message attribute, including name, type, and value, are
            # included in the message size restriction" (MessageAttributeValue, SNS).
            return _Refused("InvalidParameter", "Invalid parameter: Message too long")
    if fifo and not group_id:
        # "This parameter applies only to FIFO topics" and is required there
        # (PublishInput.MessageGroupId): moto answers MissingParameter, which SNS has not.
        return _Refused(
            "InvalidParameter",
            "Invalid parameter: The MessageGroupId parameter is required for FIFO topics",
        )
    for parameter, value in (
        ("MessageGroupId", group_id),
        ("MessageDeduplicationId", deduplication_id),
    ):
        if value is not None and not sendrules.group_id_taken(value):
            return _Refused(
                "InvalidParameter",
                f"Invalid parameter: {parameter} Reason: {parameter} can only include "
                "alphanumeric and punctuation characters. 1 to 128 in length.",
            )
    return None


def _install_sns() -> None:
    from moto.sns.exceptions import SNSException
    from moto.sns.responses import SNSResponse

    def is_fifo_topic(response: Any, arn: str | None) -> bool:
        if not arn or not sendrules.is_topic(arn):
            return False
        try:
            return bool(response.backend.get_topic(arn).fifo_topic)
        except Exception:  # not found: moto answers that
            return False

    def publish(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_publish(self: Any) -> Any:
            arn = self._get_param("TopicArn") or self._get_param("TargetArn")
            if self._get_param("PhoneNumber") is None:
                problem = _sns_message_problem(
                    self._get_param("Message"),
                    self._get_param("MessageAttributes"),
                    fifo=is_fifo_topic(self, arn),
                    group_id=self._get_param("MessageGroupId"),
                    deduplication_id=self._get_param("MessageDeduplicationId"),
                )
                if problem is not None:
                    raise SNSException(problem.code, problem.message)
            return original(self)

        return strict_publish

    def publish_batch(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_publish_batch(self: Any) -> Any:
            entries = self._get_param("PublishBatchRequestEntries") or []
            refused = _batch_problem(entries, "Publish", sqs=False)
            if refused is not None:
                raise refused
            if _payload_bytes(entries, "Message") > sendrules.SNS_BATCH_MAX_BYTES:
                # "the maximum total payload size ... [is] 256 KiB" (PublishBatch).
                raise SNSException(
                    "BatchRequestTooLong",
                    "The length of all the messages put together is more than the limit.",
                )
            fifo = is_fifo_topic(self, self._get_param("TopicArn"))
            return _sending_the_rest(
                self,
                original,
                "PublishBatchRequestEntries",
                lambda entry: _sns_message_problem(
                    entry.get("Message"),
                    entry.get("MessageAttributes"),
                    fifo=fifo,
                    group_id=entry.get("MessageGroupId"),
                    deduplication_id=entry.get("MessageDeduplicationId"),
                ),
            )

        return strict_publish_batch

    _wrap(SNSResponse, "publish", publish)
    _wrap(SNSResponse, "publish_batch", publish_batch)


# --- DynamoDB ----------------------------------------------------------------------------------


def normalized_number(text: str) -> str:
    """A DynamoDB number as DynamoDB stores and returns it: "Leading and trailing zeroes are
    trimmed" (``1.0`` is ``1``, ``0100`` is ``100``, ``1E2`` is ``100``), written out in
    full, without an exponent; text that is no number stays as it is (moto refuses it).
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html#HowItWorks.DataTypes.Number
    (Not in sendrules: DynamoDB's, not a message's.)"""
    try:
        number = Decimal(text.strip())
    except (InvalidOperation, ValueError, AttributeError):
        return text
    if not number.is_finite():
        return text
    if number.is_zero():
        return "0"
    with localcontext() as context:
        context.prec = 200  # exact: DynamoDB's range is 38 digits within 10^-130..10^126
        return format(number.normalize(context), "f")


def _install_dynamodb() -> None:
    from moto.dynamodb.exceptions import (
        DynamodbException,
        ItemSizeTooLarge,
        MockValidationException,
        MultipleTransactionsException,
    )
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict, bytesize
    from moto.dynamodb.responses import DynamoHandler

    def normalizing_init(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_init(self: Any, type_as_dict: Any) -> None:
            original(self, type_as_dict)
            if self.type == "N" and isinstance(self.value, str):
                self.value = normalized_number(self.value)
            elif self.type == "NS" and isinstance(self.value, list):
                self.value = [normalized_number(v) if isinstance(v, str) else v for v in self.value]

        return strict_init

    tokens_lock = threading.Lock()

    def item_key(backend: Any, operation: Mapping[str, Any]) -> tuple[Any, ...] | None:
        table = backend.tables.get(operation.get("TableName"))
        attributes = operation.get("Key") or operation.get("Item") or {}
        if table is None or table.hash_key_attr not in attributes:
            return None
        range_attr = table.range_key_attr
        hash_key = DynamoType(attributes[table.hash_key_attr])
        range_key = DynamoType(attributes[range_attr]) if range_attr in attributes else None
        return (table.name, hash_key, range_key)

    def transact_write_items(original: Callable[..., Any]) -> Callable[..., Any]:
        def strict_transact_write_items(self: Any) -> Any:
            items = self.body.get("TransactItems") or []
            if len(items) > 100:
                return original(self)  # moto's own refusal (ValidationException), pinned
            backend = self.dynamodb_backend
            # "no two actions can target the same item": the same item is the same key,
            # compared as DynamoDB compares keys (numbers by value: 1 and 1.0 are one item).
            seen: set[tuple[Any, ...]] = set()
            size = 0
            for entry in items:
                for operation in entry.values():
                    key = item_key(backend, operation)
                    if key is not None:
                        if key in seen:
                            raise MultipleTransactionsException()
                        seen.add(key)
                    for part in ("Item", "Key", "ExpressionAttributeValues"):
                        for name, value in (operation.get(part) or {}).items():
                            try:
                                size += len(name.encode("utf-8")) + DynamoType(value).size()
                            except Exception:  # a malformed value: moto refuses it
                                continue
            if size > _TRANSACTION_MAX_BYTES:
                # "The aggregate size of the items in the transaction cannot exceed 4 MB".
                raise MockValidationException("Transaction request cannot be larger than 4 MB")
            token = self.body.get("ClientRequestToken")
            if not token:
                return original(self)
            digest = hashlib.sha256(
                json.dumps(
                    {k: v for k, v in self.body.items() if k != "ClientRequestToken"},
                    sort_keys=True,
                    default=str,
                ).encode()
            ).hexdigest()
            with tokens_lock:
                used: dict[str, tuple[str, float, Any]] = backend.__dict__.setdefault(
                    "_once_strict_tokens", {}
                )
                now = time.monotonic()
                for old in [t for t, (_, at, _) in used.items() if now - at > _TOKEN_WINDOW_S]:
                    del used[old]
                if token in used:
                    earlier, _, result = used[token]
                    if earlier != digest:
                        # "If you submit a request with the same client token but a change in
                        # other parameters within the 10-minute idempotency window, DynamoDB
                        # returns an IdempotentParameterMismatch exception."
                        raise DynamodbException(
                            "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                            "Request parameters do not match the earlier request made with "
                            "the same client token.",
                        )
                    # "subsequent TransactWriteItems calls with the same client token return
                    # successfully without making any changes".
                    return result
            result = original(self)
            with tokens_lock:
                used[token] = (digest, time.monotonic(), result)
            return result

        return strict_transact_write_items

    def size_of(value: Any) -> int:
        return int(value.size()) if type(value) is DynamoType else bytesize(str(value))

    def item_size_of_aws(original: Callable[..., Any]) -> Callable[..., Any]:
        # moto refuses an item past 405,000 bytes, "to be safe"; DynamoDB's limit is 400 KB,
        # 409,600 bytes ("The maximum item size in DynamoDB is 400 KB, which includes both
        # attribute name binary length (UTF-8 length) and attribute value lengths";
        # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-items).
        # Past it, moto's own refusal (ValidationException) stands.
        def strict_setitem(self: Any, key: str, value: Any) -> None:
            try:
                original(self, key, value)
            except ItemSizeTooLarge:
                size = bytesize(key) + size_of(value)
                size += sum(bytesize(k) + size_of(v) for k, v in self.items() if k != key)
                if size > _ITEM_MAX_BYTES:
                    raise
                dict.__setitem__(self, key, value)

        return strict_setitem

    _wrap(DynamoType, "__init__", normalizing_init)
    _wrap(LimitedSizeDict, "__setitem__", item_size_of_aws)
    _wrap(DynamoHandler, "transact_write_items", transact_write_items)
