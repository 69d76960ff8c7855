"""moto's server, with each DynamoDB request run alone, transactions rolled back by item,
and a FIFO queue's message groups locked only by the messages really in flight.

Why: moto's TransactWriteItems snapshots every table it touches with ``deepcopy`` and rolls
back by putting the snapshot back. On a server with requests on parallel threads that
fails ("dictionary changed size during iteration", an HTTP 500), and a rollback silently
undoes every write other requests made meanwhile (a poison payment's refused transaction
would erase other payments' ledger credits). The copy also costs time proportional to the
table, so a 3000-payment demo became quadratic.

So, in this process only: DynamoDB requests are serialized (moto's DynamoDB then behaves as
one consistent store; it is still not DynamoDB's atomicity, so concurrency claims are made
on DynamoDB Local only), and a transaction backs up just the items it names and restores
those if it fails. SQS and the other services keep running in parallel.

And SQS: moto locks a FIFO message group while one of its messages is in flight, but it
forgets a message's lock only when a receive reaches that message. Two messages of a group
that come back together (a failed record and the rest of its group after it) then lock
each other, and the later one is delivered first. Here a group is locked by its messages
that are in flight and not yet visible again, as in SQS. And moto runs two receives on one
FIFO queue side by side, so both can hand out the same group: here they take turns (a long
poll looks again every 50 ms), so that one group is in one batch at a time, as in SQS. And
moto reads the clock anew for every message a receive looks at: a message that becomes
visible again in the middle of a receive is missing from the messages that receive walks,
yet it no longer locks its group, so the rest of its group is handed out before it. Here a
receive reads the clock once and judges every message at that instant. And moto's
``delete_message`` rebuilds a queue's message list without the lock ``add_message``
appends under, so a message sent while another is deleted could vanish: here a delete
holds that lock. Last, a FIFO receive walks the queue's messages while deletes and
visibility changes run beside it: a delete that lands mid-walk unlocks a group whose
earlier messages the walk has already passed over as locked, and a later message of that
group is handed out before them. Here a FIFO receive holds the queue's lock for its walk,
and a delete and a visibility change wait for it.

And Lambda: moto drops a function's ``LoggingConfig``; here a function keeps it, from
``CreateFunction`` or its template, and ``GetFunctionConfiguration`` returns it with AWS's
defaults (``LogFormat`` Text, ``LogGroup`` ``/aws/lambda/<name>``), so that ``once logs``
finds a function's log group locally as on AWS (the local cloud ships the workers' lines
there).

And every SQS, SNS and DynamoDB request is held to AWS's documented rules where moto is
lenient (sizes, characters, counts, ids, a transaction's items and token), with AWS's error
codes: ``once.testing.strict``, installed here before the server starts. Its patches wrap
the response handlers (and ``DynamoType``, ``LimitedSizeDict``), these the backend: they
compose. EventBridge likewise (``once.testing.strict_events``): PutEvents held to AWS's rules,
and an event delivered to an SQS target in AWS's shape, its ``InputPath`` applied.

And a failure is never a bare HTTP 500: moto's CloudFormation lets an exception of a
resource's creation escape ``CreateStack`` (an HTTP 500 without a cause); here the stack is
``CREATE_FAILED``, as CloudFormation marks a stack whose resource failed, with an event that
names the resource and moto's own error (``DescribeStackEvents``: the local deploy reports
it). Any other exception a request raises is answered as AWS answers an internal error
(``InternalFailure``, HTTP 500) with moto's error as its message, its traceback in the log
(an action moto does not emulate keeps moto's own answer).

And a bus: moto's ``AWS::Events::EventBus`` has no physical id, so a ``Ref`` to it resolved to
moto's object (a rule on it failed, a function's environment holding its name could not be
read) and its stack resources had no ``PhysicalResourceId``. Here its physical id is its
name, which CloudFormation's ``Ref`` returns for it
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-eventbus.html).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from xml.sax.saxutils import escape

import moto.cloudformation.parsing as cfn_parsing
import moto.dynamodb.models as dynamodb_models
import moto.sqs.models as sqs_models
from moto.awslambda.models import LambdaFunction
from moto.cloudformation.models import Stack
from moto.core.responses import BaseResponse
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.events.models import EventBus
from moto.server import main
from moto.sqs.models import Message, Queue, SQSBackend

_lock = threading.Lock()
_transact_write_items = DynamoDBBackend.transact_write_items
_receive_message = SQSBackend.receive_message
_fifo_receives = threading.Lock()
_unix_time_millis = sqs_models.unix_time_millis
#: The instant a receive on this thread judges visibility at (unset: the clock).
_receive_instant = threading.local()
#: How often a long poll on a FIFO queue looks for messages again.
_FIFO_POLL_S = 0.05


def _strict(name: str = "strict") -> ModuleType:
    """``once.testing.<name>`` (``strict``, ``strict_events``), loaded from its file:
    importing it by name would run ``once.testing``'s ``__init__``, the pytest plugin, and the
    local cloud (``once[local]``) has no pytest. Its ``install`` sees by a mark on moto's
    methods whether it has run, so a process that also imports it by name patches moto once."""
    import once

    path = Path(once.__file__).parent / "testing" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_once_testing_{name}", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships in the wheel
        raise ImportError(f"once.testing.{name} not found at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_function_init = LambdaFunction.__init__
_function_from_template = LambdaFunction.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]
_function_configuration = LambdaFunction.get_configuration


def _keeps_logging_config(self: LambdaFunction, *args: Any, **kwargs: Any) -> None:
    _function_init(self, *args, **kwargs)
    spec = kwargs.get("spec", args[1] if len(args) > 1 else {})
    self.once_logging_config = dict(spec.get("LoggingConfig") or {})  # type: ignore[attr-defined]


def _from_template_with_logging_config(
    cls: type[LambdaFunction],
    resource_name: str,
    cloudformation_json: dict[str, Any],
    *args: Any,
    **kwargs: Any,
) -> LambdaFunction:
    function = _function_from_template(cls, resource_name, cloudformation_json, *args, **kwargs)
    logging = cloudformation_json.get("Properties", {}).get("LoggingConfig") or {}
    function.once_logging_config = dict(logging)
    return function


def _configuration_with_logging(self: LambdaFunction, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """As GetFunctionConfiguration answers: LoggingConfig always there, with AWS's defaults
    (Lambda API reference, LoggingConfig)."""
    config: dict[str, Any] = _function_configuration(self, *args, **kwargs)
    given = getattr(self, "once_logging_config", {})
    config["LoggingConfig"] = {
        "LogFormat": given.get("LogFormat", "Text"),
        "LogGroup": given.get("LogGroup") or f"/aws/lambda/{self.function_name}",
        **{k: v for k, v in given.items() if k not in ("LogFormat", "LogGroup")},
    }
    return config


class _ResourceFailed(Exception):
    """A stack resource moto could not create: its logical id, type and moto's error."""

    def __init__(self, logical_id: str, kind: str, error: BaseException) -> None:
        super().__init__(f"{logical_id} ({kind}): {type(error).__name__}: {error}")


_parse_and_create_resource = cfn_parsing.parse_and_create_resource
_create_resources = Stack.create_resources


def _naming_the_resource(
    logical_id: str, resource_json: dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    """moto's creation of one resource; its failure names the resource (the innermost one:
    a resource is created when another refers to it)."""
    try:
        return _parse_and_create_resource(logical_id, resource_json, *args, **kwargs)
    except _ResourceFailed:
        raise
    except Exception as error:
        if type(error).__module__.startswith("moto.cloudformation"):
            raise  # a template error moto answers itself (ValidationError...)
        raise _ResourceFailed(logical_id, str(resource_json.get("Type")), error) from error


def _failing_as_cloudformation(self: Stack) -> None:
    """moto's stack creation; a resource that fails makes the stack ``CREATE_FAILED`` with an
    event naming it and moto's error, as CloudFormation reports a failed resource (moto let
    the exception escape ``CreateStack``: an HTTP 500 without a cause)."""
    try:
        _create_resources(self)
    except _ResourceFailed as error:
        traceback.print_exc(file=sys.stderr)
        self.status = "CREATE_FAILED"
        self._add_stack_event("CREATE_FAILED", resource_status_reason=f"moto failed on {error}")


def _json_protocol(response: BaseResponse) -> bool:
    """Whether a request is of a JSON protocol (its error answered in JSON): a query
    protocol request names its ``Action`` without an ``X-Amz-Target``."""
    headers = response.headers or {}
    return "X-Amz-Target" in headers or "Action" not in (response.querystring or {})


def _answering_failures(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A response handler whose unexpected exception is answered as AWS answers an internal
    error (``InternalFailure``, HTTP 500) with moto's error as its message, its traceback in
    the server's log: the caller learns the cause, not a bare HTML page."""

    @functools.wraps(original)
    def call_action(self: BaseResponse) -> Any:
        try:
            return original(self)
        except NotImplementedError:
            raise  # an action moto does not emulate: moto's own answer, as ever
        except Exception as error:
            traceback.print_exc(file=sys.stderr)
            cause = (
                f"moto failed on {self.service_name} {self._get_action()}: "
                f"{type(error).__name__}: {error}"
            )
            if _json_protocol(self):
                body = json.dumps({"__type": "InternalFailure", "message": cause})
                return 500, {"x-amzn-ErrorType": "InternalFailure"}, body
            body = (
                "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code>"
                f"<Message>{escape(cause)}</Message></Error></ErrorResponse>"
            )
            return 500, {"Content-Type": "text/xml"}, body

    return call_action


_call_action = _answering_failures(DynamoHandler.call_action)


def _serialized(self: Any) -> Any:
    with _lock:
        return _call_action(self)


class _CopyTablesByReference:
    """Replaces ``copy`` inside moto.dynamodb.models: a Table is not copied (its touched
    items are backed up instead); everything else is deep-copied as before."""

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _key(table: Table, attributes: dict[str, Any]) -> tuple[DynamoType, DynamoType | None]:
    hash_key = DynamoType(attributes[table.hash_key_attr])
    range_attr = table.range_key_attr
    return hash_key, DynamoType(attributes[range_attr]) if range_attr else None


def _transact_by_item(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    backups: list[tuple[Table, DynamoType, DynamoType | None, Any]] = []
    for entry in transact_items:
        _, operation = next(iter(entry.items()))
        table = self.tables.get(operation.get("TableName"))
        attributes = operation.get("Key") or operation.get("Item") or {}
        if table is None or table.hash_key_attr not in attributes:
            continue
        try:
            hash_key, range_key = _key(table, attributes)
        except KeyError:
            continue
        old = table.get_item(hash_key, range_key)
        backups.append((table, hash_key, range_key, copy.deepcopy(old)))
    try:
        _transact_write_items(self, transact_items)
    except Exception:
        for table, hash_key, range_key, old in reversed(backups):
            if old is None:
                table.delete_item(hash_key, range_key)
            elif range_key is None:
                table.items[hash_key] = old
            else:
                table.items[hash_key][range_key] = old
        raise


def _groups_in_flight(self: Queue) -> set[str]:
    """The message groups with a message received and not yet visible again."""
    return {
        message.group_id
        for message in self.pending_messages
        if message.group_id is not None and not message.visible
    }


_delete_message = Queue.delete_message


def _delete_under_lock(self: Queue, receipt_handle: str) -> None:
    """moto's delete, under the lock a send appends under: neither loses the other's work."""
    with self._messages_lock:
        _delete_message(self, receipt_handle)


_change_message_visibility = SQSBackend.change_message_visibility


def _change_visibility_under_lock(
    self: SQSBackend, queue_name: str, receipt_handle: str, visibility_timeout: int
) -> None:
    """moto's visibility change, never in the middle of a FIFO receive's walk."""
    with self.get_queue(queue_name)._messages_lock:
        _change_message_visibility(self, queue_name, receipt_handle, visibility_timeout)


def _clock_ms(dt: Any = None) -> float:
    """moto's SQS clock: the current receive's instant on its own thread, else the time."""
    frozen = getattr(_receive_instant, "ms", None)
    return frozen if frozen is not None and dt is None else _unix_time_millis(dt)


def _fifo_receives_take_turns(
    self: SQSBackend,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Message]:
    """A receive; on a FIFO queue, one at a time, each one short, until one finds messages
    or the long poll's time is up."""
    if not self.get_queue(queue_name).fifo_queue:
        return _receive_message(
            self,
            queue_name,
            count,
            wait_seconds_timeout,
            visibility_timeout,
            message_attribute_names,
        )
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    while True:
        with _fifo_receives, self.get_queue(queue_name)._messages_lock:
            _receive_instant.ms = _unix_time_millis()
            try:
                found = _receive_message(
                    self, queue_name, count, 0, visibility_timeout, message_attribute_names
                )
            finally:
                _receive_instant.ms = None
        if found or time.monotonic() >= deadline:
            return found
        time.sleep(_FIFO_POLL_S)


DynamoHandler.call_action = _serialized  # type: ignore[method-assign]
DynamoDBBackend.transact_write_items = _transact_by_item  # type: ignore[method-assign]
dynamodb_models.copy = _CopyTablesByReference()  # type: ignore[assignment]
Queue.pending_message_groups = property(_groups_in_flight)  # type: ignore[assignment,method-assign]
SQSBackend.receive_message = _fifo_receives_take_turns  # type: ignore[method-assign]
sqs_models.unix_time_millis = _clock_ms
Queue.delete_message = _delete_under_lock  # type: ignore[method-assign]
SQSBackend.change_message_visibility = _change_visibility_under_lock  # type: ignore[method-assign]
LambdaFunction.__init__ = _keeps_logging_config  # type: ignore[method-assign]
LambdaFunction.create_from_cloudformation_json = classmethod(_from_template_with_logging_config)  # type: ignore[method-assign,assignment]
LambdaFunction.get_configuration = _configuration_with_logging  # type: ignore[method-assign]
BaseResponse.call_action = _answering_failures(BaseResponse.call_action)  # type: ignore[method-assign,assignment]
cfn_parsing.parse_and_create_resource = _naming_the_resource
Stack.create_resources = _failing_as_cloudformation  # type: ignore[method-assign]
EventBus.physical_resource_id = property(lambda self: self.name)  # type: ignore[attr-defined]
_strict().install()
_strict("strict_events").install()

if __name__ == "__main__":
    main(sys.argv[1:])
