"""Issue 23 on moto: ``attempt.write`` commits staged writes with the record in one transaction,
``attempt.send`` stores an outbox on the record and sends it after the commit.

Each test pins one bullet of the issue's "Build" 1-3, named by the behaviour. They run on
in-process moto through the testing kit (``once_env``: crash points, the kit's clock), or, where
a test needs a zombie or a controllable context, on the suite's own moto fixtures (``aws``,
``once_handler``, ``clock``). moto's transactions are not atomic under concurrency: the
atomicity claims proper are pinned on DynamoDB Local (tests/chaos/test_atomic_on_dynamodb_local.py);
here each runs one record at a time, where moto applies or rolls back a transaction whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, ConnectionClosedError
from moto.core.models import botocore_stubber

from once import SOURCE_KEY, Attempt, PermanentError, identity, make_handler
from once import constants as c
from once.identity import deduplication_id
from once.models import Outcome, record_id
from once.testing import OnceEnv
from tests.conftest import LEDGER, Calls, count_calls, outcomes
from tests.unit.runtime.test_observability import emf

LEDGER_TABLE = "ledger"
AMOUNT = 125
SECRET = "Kryptonite-Sample-XJ9"  # a value that must never reach an error, a log or a metric


# --- the world around the handler ---------------------------------------------------------------


def create_ledger(env: OnceEnv) -> None:
    env.dynamodb.create_table(
        TableName=LEDGER_TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )


def ledger_items(env: OnceEnv) -> dict[str, dict[str, Any]]:
    items = env.dynamodb.scan(TableName=LEDGER_TABLE, ConsistentRead=True)["Items"]
    return {item["id"]["S"]: item for item in items}


def balance(env: OnceEnv, account: str = "a-1") -> int | None:
    item = ledger_items(env).get(f"account#{account}")
    return int(item["balance"]["N"]) if item else None


@dataclass(frozen=True)
class Received:
    """One message taken off a queue: its body, message attributes and system attributes."""

    body: str
    attributes: dict[str, Any]
    system: dict[str, str]

    @property
    def source(self) -> str:
        return str(self.attributes[c.OUTBOX_ATTR_SOURCE])

    @property
    def seq(self) -> int:
        return int(self.attributes[c.OUTBOX_ATTR_SEQ])


def create_queue(env: OnceEnv, name: str) -> str:
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    return str(env.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def take(env: OnceEnv, url: str) -> list[Received]:
    """Every message in a queue, deleted as it is read."""
    taken: list[Received] = []
    while messages := env.sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        MessageAttributeNames=["All"],
        AttributeNames=["All"],
    ).get("Messages", []):
        for message in messages:
            attributes = {
                name: value.get("StringValue", value.get("BinaryValue"))
                for name, value in (message.get("MessageAttributes") or {}).items()
            }
            taken.append(Received(message["Body"], attributes, message.get("Attributes") or {}))
            env.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return taken


def queue_depth(env: OnceEnv, url: str) -> int:
    attributes = env.sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def source_of(handler: Any, key: str) -> str:
    """What ``once.source`` of the messages a key's operation sends names before its
    operation's token: the record id, escaped (``once.identity``)."""
    return identity.escape(record_id(handler.key_prefix, key))


def named(source: str) -> str:
    """``once.source`` without the token of the operation that sent it."""
    name, token = source.rsplit(identity.SEPARATOR, 1)
    assert len(token) == 32 and int(token, 16) >= 0  # one operation's random token
    return name


# --- business code ------------------------------------------------------------------------------


def credit_writes(payment: dict[str, Any]) -> list[dict[str, Any]]:
    """The ledger's writes of one payment: its entry (once only) and the account's balance."""
    return [
        {
            "Put": {
                "TableName": LEDGER_TABLE,
                "Item": {"id": {"S": f"entry#{payment['id']}"}, "amount": {"N": str(AMOUNT)}},
                "ConditionExpression": "attribute_not_exists(id)",
            }
        },
        {
            "Update": {
                "TableName": LEDGER_TABLE,
                "Key": {"id": {"S": f"account#{payment.get('account', 'a-1')}"}},
                "UpdateExpression": "ADD balance :a",
                "ExpressionAttributeValues": {":a": {"N": str(AMOUNT)}},
            }
        },
    ]


class Credit:
    """Business code: stages the ledger's writes and (optionally) messages; counts its runs.
    ``during`` runs after the staging, before business code returns."""

    def __init__(
        self,
        *,
        sends: list[tuple[str, dict[str, Any]]] | None = None,
        extra: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None,
        refused: str = "retry",
        during: Callable[[dict[str, Any], Attempt], None] | None = None,
    ) -> None:
        self.runs: list[tuple[str, int]] = []
        self._sends = sends or []
        self._extra = extra
        self._refused = refused
        self._during = during

    def __call__(self, payment: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        self.runs.append((attempt.key, attempt.fence))
        for element in credit_writes(payment):
            attempt.write(element)
        for element in self._extra(payment) if self._extra else []:
            attempt.write(element, refused=self._refused)  # type: ignore[arg-type]
        for destination, options in self._sends:
            attempt.send(destination, {"paymentId": payment["id"]}, **options)
        if self._during is not None:
            self._during(payment, attempt)
        return {"credited": AMOUNT}


def fail_calls(client: Any, operation: str, times: int, when: Callable[[dict], bool]) -> list[int]:
    """The next ``times`` calls of ``operation`` that match ``when`` fail as an outage would
    (past the SDK's retries); returns the list of failures made, for the test to count."""
    failed: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if len(failed) < times and when(params):
            failed.append(1)
            raise ClientError(
                {"Error": {"Code": "InternalFailure", "Message": "injected"}}, operation
            )

    client.meta.events.register(
        f"before-parameter-build.{client.meta.service_model.service_name}.{operation}", hook
    )
    return failed


def fail_sends(env: OnceEnv, url: str, times: int = 1) -> list[int]:
    """The outbox's next sends to ``url`` fail (the kit's own source queue shares the client)."""
    return fail_calls(env.sqs, "SendMessageBatch", times, lambda params: params["QueueUrl"] == url)


def fail_clears(env: OnceEnv, times: int = 1) -> list[int]:
    def is_clear(params: dict[str, Any]) -> bool:
        return "REMOVE #outbox" in params.get("UpdateExpression", "") and "SET #status" not in (
            params.get("UpdateExpression", "")
        )

    return fail_calls(env.dynamodb, "UpdateItem", times, is_clear)


PAYMENT = {"id": "p-1"}


def handler_of(process: Any, *, key: str = "id", **options: Any) -> Any:
    """``make_handler`` running a batch's records one at a time: in-process moto is not
    thread-safe (a transaction copies the table while another thread writes it), and races
    are the DynamoDB Local suite's to pin."""
    return make_handler(process, key=key, max_workers=1, **options)


@pytest.fixture
def env(once_env: OnceEnv) -> OnceEnv:
    create_ledger(once_env)
    return once_env


@pytest.fixture
def notify(env: OnceEnv) -> str:
    return create_queue(env, "notify")


# === 1. attempt.write: all of it lands, or none of it ===========================================


def test_staged_writes_land_with_the_record_in_one_commit(env: OnceEnv) -> None:
    credit = Credit()
    handler = handler_of(credit)

    delivery = env.deliver(handler, [PAYMENT, {"id": "p-2"}])

    assert delivery.outcomes == [Outcome.PROCESSED, Outcome.PROCESSED]
    assert delivery.batch_item_failures == []
    assert balance(env) == 2 * AMOUNT
    assert {"entry#p-1", "entry#p-2"} <= set(ledger_items(env))
    record = env.record("p-1")
    assert record is not None
    assert (record.status, record.fence, json.loads(record.result or "")) == (
        c.STATUS_COMPLETED,
        1,
        {"credited": AMOUNT},
    )


def test_nothing_staged_is_written_while_business_code_runs(env: OnceEnv) -> None:
    seen: list[dict[str, Any]] = []
    credit = Credit(during=lambda payment, attempt: seen.append(ledger_items(env)))
    handler = handler_of(credit)

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.PROCESSED]

    assert seen == [{}]  # staged, not written: the ledger was empty when business code returned
    assert balance(env) == AMOUNT


@pytest.mark.parametrize("crash", ["after_claim", "after_process"])
def test_a_crash_before_the_commit_leaves_no_staged_write_behind(
    env: OnceEnv, notify: str, crash: str
) -> None:
    credit = Credit(sends=[(notify, {})])
    handler = handler_of(credit)

    assert env.deliver(handler, [PAYMENT], crash=crash).outcomes == [None]

    assert ledger_items(env) == {}  # nothing of the dead attempt
    assert queue_depth(env, notify) == 0
    dead = env.record("p-1")
    assert dead is not None
    assert (dead.status, dead.outbox) == (c.STATUS_IN_PROGRESS, ())

    env.expire_leases()
    takeover = env.deliver(handler, [PAYMENT])  # the takeover runs on a clean slate

    assert takeover.outcomes == [Outcome.PROCESSED]
    assert takeover.results[0] is not None
    assert (takeover.results[0].fence, takeover.results[0].takeover) == (2, True)
    assert balance(env) == AMOUNT  # once, not twice
    assert [m.body for m in take(env, notify)] == ['{"paymentId":"p-1"}']


def test_a_crash_as_the_commit_lands_keeps_it_and_the_redelivery_is_a_duplicate(
    env: OnceEnv,
) -> None:
    credit = Credit()
    handler = handler_of(credit)

    env.deliver(handler, [PAYMENT], crash="before_finalize")  # the commit landed, then death
    again = env.deliver(handler, [PAYMENT])

    assert again.outcomes == [Outcome.DUPLICATE]
    assert len(credit.runs) == 1
    assert balance(env) == AMOUNT


@pytest.mark.parametrize(
    "error", [RuntimeError("business broke"), PermanentError("no such account")], ids=str
)
def test_business_code_that_raises_writes_nothing_it_staged(
    env: OnceEnv, notify: str, error: Exception
) -> None:
    def raising(payment: dict[str, Any], attempt: Attempt) -> None:
        for element in credit_writes(payment):
            attempt.write(element)
        attempt.send(notify, {"paymentId": payment["id"]})
        raise error

    delivery = env.deliver(handler_of(raising), [PAYMENT])

    expected = Outcome.QUARANTINED if isinstance(error, PermanentError) else Outcome.FAILED
    assert delivery.outcomes == [expected]
    assert ledger_items(env) == {}
    assert queue_depth(env, notify) == 0
    record = env.record("p-1")
    assert record is not None
    assert (record.status, record.outbox) == (c.STATUS_FAILED, ())


def refusing_check(payment: dict[str, Any]) -> list[dict[str, Any]]:
    """A business condition no item meets: the account must be open (it has no item)."""
    return [
        {
            "ConditionCheck": {
                "TableName": LEDGER_TABLE,
                "Key": {"id": {"S": "open#a-1"}},
                "ConditionExpression": "attribute_exists(id) AND #limit >= :secret",
                "ExpressionAttributeNames": {"#limit": "limit"},
                "ExpressionAttributeValues": {":secret": {"S": SECRET}},
            }
        }
    ]


def test_a_refused_business_condition_lands_nothing_and_fails_the_record_with_write_refused(
    env: OnceEnv, notify: str, capsys: pytest.CaptureFixture[str]
) -> None:
    credit = Credit(sends=[(notify, {})], extra=refusing_check)
    handler = handler_of(credit)
    capsys.readouterr()

    delivery = env.deliver(handler, [PAYMENT])

    [result] = delivery.results
    assert result is not None
    assert (result.outcome, result.reason) == (Outcome.FAILED, c.REASON_WRITE_REFUSED)
    assert delivery.batch_item_failures == delivery.message_ids  # SQS retries it
    assert ledger_items(env) == {}  # the entry and the balance did not land either
    assert queue_depth(env, notify) == 0
    assert env.dlq_messages() == []
    record = env.record("p-1")
    assert record is not None
    assert (record.status, record.outbox) == (c.STATUS_FAILED, ())
    # The error names the element (its index, operation and table), never a value.
    assert record.error == (
        f"{c.REASON_WRITE_REFUSED}: staged write 2 (ConditionCheck on table {LEDGER_TABLE}) "
        "was refused by its condition"
    )
    out = capsys.readouterr().out
    assert emf(out) == {c.METRIC_FAILED: 1, c.METRIC_WRITE_REFUSED: 1}
    assert SECRET not in out


def test_a_refused_business_condition_is_retried_and_commits_once_it_holds(
    env: OnceEnv,
) -> None:
    credit = Credit(extra=refusing_check)
    handler = handler_of(credit)
    env.deliver(handler, [PAYMENT])
    env.dynamodb.put_item(
        TableName=LEDGER_TABLE, Item={"id": {"S": "open#a-1"}, "limit": {"S": SECRET + "~"}}
    )

    retried = env.deliver(handler, [PAYMENT])  # SQS's retry of the same message

    assert retried.outcomes == [Outcome.PROCESSED]
    assert retried.receive_counts == [2]
    assert [fence for _, fence in credit.runs] == [1, 2]
    assert balance(env) == AMOUNT


def test_refused_quarantine_sends_the_message_to_the_dlq(
    env: OnceEnv, notify: str, capsys: pytest.CaptureFixture[str]
) -> None:
    credit = Credit(sends=[(notify, {})], extra=refusing_check, refused="quarantine")
    handler = handler_of(credit)
    capsys.readouterr()

    delivery = env.deliver(handler, [PAYMENT])

    assert delivery.outcomes == [Outcome.QUARANTINED]
    assert delivery.batch_item_failures == []  # in the DLQ: acknowledged at the source
    [dead] = env.dlq_messages()
    assert dead.reason == c.REASON_WRITE_REFUSED
    assert dead.json() == PAYMENT
    assert dead.error is not None and "staged write 2 (ConditionCheck" in dead.error
    assert SECRET not in dead.error
    assert ledger_items(env) == {}
    assert queue_depth(env, notify) == 0
    record = env.record("p-1")
    assert record is not None
    assert record.status == c.STATUS_FAILED
    assert emf(capsys.readouterr().out) == {c.METRIC_QUARANTINED: 1, c.METRIC_WRITE_REFUSED: 1}


def test_a_condition_staged_to_retry_beside_one_to_quarantine_is_retried_when_it_refuses(
    env: OnceEnv,
) -> None:
    def business(payment: dict[str, Any], attempt: Attempt) -> str:
        [check] = refusing_check(payment)
        attempt.write(credit_writes(payment)[0], refused="quarantine")  # holds
        attempt.write(check)  # refuses: retry
        return "ok"

    delivery = env.deliver(handler_of(business), [PAYMENT])

    assert delivery.outcomes == [Outcome.FAILED]
    assert env.dlq_messages() == []


def _lose_first_commit_response(env: OnceEnv) -> list[str]:
    """The first TransactWriteItems lands in moto, and its answer is lost on the way back (the
    connection closes): botocore's retry sends the same request, same ClientRequestToken."""
    tokens: list[str] = []

    def hook(request: Any, event_name: str, **_: Any) -> None:
        tokens.append(json.loads(request.body)["ClientRequestToken"])
        if len(tokens) == 1:
            botocore_stubber(event_name=event_name, request=request)  # it lands...
            raise ConnectionClosedError(endpoint_url=request.url)  # ...its answer does not

    env.dynamodb.meta.events.register("before-send.dynamodb.TransactWriteItems", hook)
    return tokens


def test_an_sdk_retry_of_a_landed_commit_is_recognised_and_applied_once(env: OnceEnv) -> None:
    """once_env honours ClientRequestToken as DynamoDB does (once.testing.strict; stock moto
    ignores it): the SDK's retry of the landed commit is answered as the commit itself and
    applies nothing again. Past DynamoDB's ten minutes the record's condition refuses such a
    retry and the own-retry rule reads it as a success (tests/unit/runtime/test_commit_decision.py;
    DynamoDB Local: tests/chaos/test_atomic_on_dynamodb_local.py)."""
    credit = Credit()
    handler = handler_of(credit)
    answers: list[str] = []
    env.dynamodb.meta.events.register(
        "after-call.dynamodb.TransactWriteItems",
        lambda parsed, **_: answers.append(parsed.get("Error", {}).get("Code", "ok")),
    )
    tokens = _lose_first_commit_response(env)

    delivery = env.deliver(handler, [PAYMENT])

    assert delivery.outcomes == [Outcome.PROCESSED]
    assert len(tokens) == 2 and tokens[0] == tokens[1]  # the same commit went out twice
    assert answers == ["ok"]  # the token: DynamoDB's answer to a replayed commit
    assert balance(env) == AMOUNT  # applied once
    record = env.record("p-1")
    assert record is not None and record.status == c.STATUS_COMPLETED


def test_a_record_without_staged_writes_completes_with_one_update_item(env: OnceEnv) -> None:
    handler = handler_of(lambda body, attempt: "plain")
    calls = count_calls(env.dynamodb)

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.PROCESSED]

    assert calls.sent == ["UpdateItem", "UpdateItem"]  # claim, fenced completion


def test_a_new_key_with_staged_writes_costs_a_claim_and_a_commit(env: OnceEnv) -> None:
    handler = handler_of(Credit())
    calls = count_calls(env.dynamodb)

    env.deliver(handler, [PAYMENT])
    new_key = list(calls.sent)
    calls.reset()
    env.deliver(handler, [PAYMENT])
    duplicate = list(calls.sent)

    assert new_key == ["UpdateItem", "TransactWriteItems"]  # 2: claim + commit
    assert duplicate == ["UpdateItem"]  # 1: the refused claim


# === 2. limits refused where they are made (inside a handler) ==================================


def test_a_write_to_the_idempotency_record_itself_raises_at_the_call_in_business_code(
    env: OnceEnv,
) -> None:
    raised: list[str] = []

    def business(payment: dict[str, Any], attempt: Attempt) -> str:
        try:
            attempt.write(
                {
                    "Update": {
                        "TableName": env.table_name,
                        "Key": {c.ATTR_ID: {"S": record_id(handler.key_prefix, payment["id"])}},
                        "UpdateExpression": "SET #s = :s",
                        "ExpressionAttributeNames": {"#s": c.ATTR_STATUS},
                        "ExpressionAttributeValues": {":s": {"S": c.STATUS_COMPLETED}},
                    }
                }
            )
        except ValueError as error:
            raised.append(str(error))
        return "ok"

    handler = handler_of(business)
    calls = count_calls(env.dynamodb)

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.PROCESSED]
    assert len(raised) == 1 and "idempotency table" in raised[0]
    assert calls.sent == ["UpdateItem", "UpdateItem"]  # nothing staged: the plain completion


def test_a_limit_business_code_does_not_catch_fails_the_record_and_writes_nothing(
    env: OnceEnv,
) -> None:
    def business(payment: dict[str, Any], attempt: Attempt) -> str:
        for index in range(c.TRANSACTION_MAX_ELEMENTS):  # the 100th element is the record's
            attempt.write({"Put": {"TableName": LEDGER_TABLE, "Item": {"id": {"S": f"i{index}"}}}})
        return "never"

    delivery = env.deliver(handler_of(business), [PAYMENT])

    assert delivery.outcomes == [Outcome.FAILED]
    assert delivery.results[0] is not None and delivery.results[0].reason == "ValueError"
    assert ledger_items(env) == {}


def test_a_commit_dynamodb_refuses_as_invalid_lands_nothing_and_fails_the_record(
    env: OnceEnv, notify: str
) -> None:
    # Two Puts of one item whose key no keyed element names: only DynamoDB knows the key, and
    # it refuses the whole transaction (ValidationException); nothing lands, nothing is sent,
    # and the record fails, so SQS retries it and its DLQ keeps it if it never commits.
    def business(payment: dict[str, Any], attempt: Attempt) -> str:
        for balance in ("1", "2"):
            attempt.write(
                {
                    "Put": {
                        "TableName": LEDGER_TABLE,
                        "Item": {"id": {"S": "a-1"}, "n": {"N": balance}},
                    }
                }
            )
        attempt.send(notify, {"paymentId": payment["id"]})
        return "never stored"

    delivery = env.deliver(handler_of(business), [PAYMENT])

    assert delivery.outcomes == [Outcome.FAILED]
    assert delivery.results[0] is not None
    assert "ValidationException" in (delivery.results[0].reason or "")
    assert ledger_items(env) == {}
    assert queue_depth(env, notify) == 0
    record = env.record("p-1")
    assert record is not None and record.status == c.STATUS_FAILED


# === 3. attempt.send: the outbox ================================================================


def test_the_outbox_is_sent_after_the_commit_and_never_before(env: OnceEnv, notify: str) -> None:
    trail: list[str] = []
    env.dynamodb.meta.events.register(
        "before-parameter-build.dynamodb",
        lambda model, params, **_: trail.append(_call(model, params)),
    )
    env.sqs.meta.events.register(
        "before-parameter-build.sqs.SendMessageBatch",
        lambda params, **_: trail.append(f"send {params['QueueUrl'].rsplit('/', 1)[-1]}"),
    )
    depth_while_running: list[int] = []
    credit = Credit(
        sends=[(notify, {})],
        during=lambda payment, attempt: depth_while_running.append(queue_depth(env, notify)),
    )

    delivery = env.deliver(handler_of(credit), [PAYMENT])

    assert delivery.outcomes == [Outcome.PROCESSED]
    assert depth_while_running == [0]
    assert [t for t in trail if not t.startswith("send once-")] == [
        "claim",
        "commit",
        "send notify",
        "clear",
    ]
    record = env.record("p-1")
    assert record is not None and record.outbox == ()


def _call(model: Any, params: dict[str, Any]) -> str:
    update = params.get("UpdateExpression", "")
    if model.name == "TransactWriteItems":
        return "commit"
    if "ADD #fence" in update:
        return "claim"
    if "REMOVE #outbox" in update and "#status" not in update:
        return "clear"
    if "#status = :completed" in update:
        return "complete"
    return model.name


def test_an_outbox_without_staged_writes_is_stored_by_the_plain_completion(
    env: OnceEnv, notify: str
) -> None:
    def announce(payment: dict[str, Any], attempt: Attempt) -> str:
        attempt.send(notify, {"paymentId": payment["id"]})
        return "ok"

    calls = count_calls(env.dynamodb)
    fail_sends(env, notify)

    assert env.deliver(handler_of(announce), [PAYMENT]).outcomes == [Outcome.OWED]

    assert calls.sent == ["UpdateItem", "UpdateItem"]  # claim, completion (with the outbox)
    record = env.record("p-1")
    assert record is not None
    assert record.status == c.STATUS_COMPLETED and len(record.outbox) == 1


def test_a_commit_that_does_not_land_sends_nothing(env: OnceEnv, notify: str) -> None:
    credit = Credit(sends=[(notify, {})], extra=refusing_check)

    env.deliver(handler_of(credit), [PAYMENT])

    assert queue_depth(env, notify) == 0


def test_a_failed_send_leaves_the_record_owed_and_the_source_unacknowledged(
    env: OnceEnv, notify: str, capsys: pytest.CaptureFixture[str]
) -> None:
    credit = Credit(sends=[(notify, {})])
    handler = handler_of(credit)
    failed = fail_sends(env, notify)
    capsys.readouterr()

    delivery = env.deliver(handler, [PAYMENT])

    assert failed == [1]
    assert delivery.outcomes == [Outcome.OWED]
    assert delivery.batch_item_failures == delivery.message_ids  # not acknowledged
    assert emf(capsys.readouterr().out) == {c.METRIC_OWED: 1}
    record = env.record("p-1")
    assert record is not None
    assert record.status == c.STATUS_COMPLETED  # the commit stands: its writes landed
    assert [m.destination for m in record.outbox] == [notify]
    assert balance(env) == AMOUNT
    assert queue_depth(env, notify) == 0


def test_the_next_delivery_sends_what_is_owed_without_running_business_code_then_clears_it(
    env: OnceEnv, notify: str, capsys: pytest.CaptureFixture[str]
) -> None:
    credit = Credit(sends=[(notify, {})])
    handler = handler_of(credit)
    fail_sends(env, notify)
    env.deliver(handler, [PAYMENT])
    calls = count_calls(env.dynamodb)
    capsys.readouterr()

    again = env.deliver(handler, [PAYMENT])  # SQS redelivers the unacknowledged source

    assert again.receive_counts == [2]
    assert again.outcomes == [Outcome.OWED_SENT]
    assert again.batch_item_failures == []  # acknowledged once nothing is owed
    assert emf(capsys.readouterr().out) == {c.METRIC_OWED_SENT: 1}
    assert len(credit.runs) == 1  # business code ran once
    assert calls.sent == ["UpdateItem", "UpdateItem"]  # the refused claim, the clear
    record = env.record("p-1")
    assert record is not None and record.outbox == ()
    [sent] = take(env, notify)
    assert (named(sent.source), sent.seq) == (source_of(handler, "p-1"), 0)
    assert balance(env) == AMOUNT

    third = env.deliver(handler, [PAYMENT])  # owes nothing now: a plain duplicate
    assert third.outcomes == [Outcome.DUPLICATE]
    assert queue_depth(env, notify) == 0


def test_an_invocation_that_dies_after_the_commit_owes_its_outbox_to_the_next_delivery(
    env: OnceEnv, notify: str
) -> None:
    credit = Credit(sends=[(notify, {})])
    handler = handler_of(credit)

    assert env.deliver(handler, [PAYMENT], crash="before_finalize").outcomes == [None]
    record = env.record("p-1")
    assert record is not None
    assert record.status == c.STATUS_COMPLETED and len(record.outbox) == 1
    assert queue_depth(env, notify) == 0  # died before sending

    again = env.deliver(handler, [PAYMENT])

    assert again.outcomes == [Outcome.OWED_SENT]
    assert len(credit.runs) == 1
    assert len(take(env, notify)) == 1


def test_a_duplicate_in_the_same_batch_as_an_owed_send_is_a_duplicate(
    env: OnceEnv, notify: str
) -> None:
    credit = Credit(sends=[(notify, {})])
    handler = handler_of(credit)
    env.deliver(handler, [PAYMENT], crash="before_finalize")

    again = env.deliver(handler, [PAYMENT, PAYMENT])  # the redelivery, and a producer's copy

    assert sorted(again.outcomes) == sorted([Outcome.OWED_SENT, Outcome.DUPLICATE])
    assert again.batch_item_failures == []
    assert len(take(env, notify)) == 1
    assert len(credit.runs) == 1


def test_a_failed_clear_leaves_the_outbox_owed_and_the_resend_carries_the_same_identity(
    env: OnceEnv, notify: str
) -> None:
    handler = handler_of(Credit(sends=[(notify, {})]))
    fail_clears(env)

    first = env.deliver(handler, [PAYMENT])

    assert first.outcomes == [Outcome.OWED]  # sent, but still owed on the record
    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.OWED_SENT]
    copies = take(env, notify)
    assert [(m.source, m.seq, m.body) for m in copies] == [
        (copies[0].source, 0, '{"paymentId":"p-1"}')
    ] * 2
    assert named(copies[0].source) == source_of(handler, "p-1")


def test_each_outbound_message_carries_once_source_and_once_seq(env: OnceEnv, notify: str) -> None:
    other = create_queue(env, "audit")
    own = {"kind": "credit", "cents": 12, "rate": 0.5, "blob": b"\x00\x01"}
    credit = Credit(sends=[(notify, {"attributes": own}), (other, {}), (notify, {})])
    handler = handler_of(credit)

    env.deliver(handler, [PAYMENT])

    to_notify, to_other = take(env, notify), take(env, other)
    source = to_notify[0].source  # one operation: one identity for its whole outbox
    assert named(source) == source_of(handler, "p-1")
    assert sorted((m.source, m.seq) for m in to_notify) == [(source, 0), (source, 2)]
    assert [(m.source, m.seq) for m in to_other] == [(source, 1)]
    [with_own] = [m for m in to_notify if m.seq == 0]
    assert {k: v for k, v in with_own.attributes.items() if not k.startswith("once.")} == {
        "kind": "credit",
        "cents": "12",
        "rate": "0.5",
        "blob": b"\x00\x01",
    }


def test_a_fifo_target_gets_its_group_and_a_deduplication_id_derived_from_the_identity(
    env: OnceEnv,
) -> None:
    fifo = create_queue(env, "notify.fifo")
    credit = Credit(sends=[(fifo, {"group_id": "a-1"}), (fifo, {"group_id": "a-1"})])
    handler = handler_of(credit)

    env.deliver(handler, [PAYMENT])

    sent = take(env, fifo)
    source = sent[0].source
    assert named(source) == source_of(handler, "p-1")
    assert [(m.seq, m.system["MessageGroupId"]) for m in sent] == [(0, "a-1"), (1, "a-1")]
    for message in sent:
        expected = hashlib.sha256(f"{source}#{message.seq}".encode()).hexdigest()
        assert message.system["MessageDeduplicationId"] == expected
        assert expected == deduplication_id(source, message.seq)


def test_a_resend_to_a_fifo_target_is_deduplicated_by_its_deduplication_id(env: OnceEnv) -> None:
    fifo = create_queue(env, "notify.fifo")
    handler = handler_of(Credit(sends=[(fifo, {"group_id": "a-1"})]))
    fail_clears(env)

    env.deliver(handler, [PAYMENT])  # sent, not cleared
    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.OWED_SENT]  # sent again

    assert len(take(env, fifo)) == 1  # within SQS's five minutes, one message


def _topic(env: OnceEnv, name: str, *, raw: bool) -> tuple[str, str]:
    """A topic (FIFO when its name says so) with a queue subscribed to it."""
    sns = boto3.client("sns", region_name=env.sqs.meta.region_name)
    fifo = name.endswith(".fifo")
    attributes = {"FifoTopic": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    topic = sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]
    queue = create_queue(env, f"{name[:-5]}-subscriber.fifo" if fifo else f"{name}-subscriber")
    arn = env.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true" if raw else "false"},
    )
    return topic, queue


def test_an_sns_topic_destination_delivers_through_its_subscription(env: OnceEnv) -> None:
    topic, queue = _topic(env, "payments-events", raw=True)
    handler = handler_of(Credit(sends=[(topic, {"attributes": {"kind": "credit"}})]))

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.PROCESSED]

    [message] = take(env, queue)
    assert message.body == '{"paymentId":"p-1"}'
    assert (named(message.source), message.seq) == (source_of(handler, "p-1"), 0)
    assert message.attributes["kind"] == "credit"


def test_an_sns_envelope_carries_the_identity_in_its_message_attributes(env: OnceEnv) -> None:
    topic, queue = _topic(env, "payments-events", raw=False)
    handler = handler_of(Credit(sends=[(topic, {})]))

    env.deliver(handler, [PAYMENT])

    [message] = take(env, queue)
    envelope = json.loads(message.body)
    assert envelope["TopicArn"] == topic
    assert envelope["Message"] == '{"paymentId":"p-1"}'
    carried = envelope["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]["Value"]
    assert named(carried) == source_of(handler, "p-1")
    assert envelope["MessageAttributes"][c.OUTBOX_ATTR_SEQ]["Value"] == "0"


def test_a_fifo_topic_destination_gets_the_group_and_the_deduplication_id(env: OnceEnv) -> None:
    topic, queue = _topic(env, "payments-events.fifo", raw=True)
    handler = handler_of(Credit(sends=[(topic, {"group_id": "a-1"})]))

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.PROCESSED]

    [message] = take(env, queue)
    source = message.source
    assert (named(source), message.seq) == (source_of(handler, "p-1"), 0)
    assert message.system["MessageGroupId"] == "a-1"
    assert message.system["MessageDeduplicationId"] == deduplication_id(source, 0)


def test_a_failed_publish_to_a_topic_is_owed_and_sent_by_the_next_delivery(env: OnceEnv) -> None:
    topic, queue = _topic(env, "payments-events", raw=True)
    credit = Credit(sends=[(topic, {})])
    handler = handler_of(credit)
    env.sns = boto3.client("sns", region_name=env.sqs.meta.region_name)  # the outbox's client
    failed = fail_calls(env.sns, "PublishBatch", 1, lambda params: True)

    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.OWED]
    assert failed == [1] and queue_depth(env, queue) == 0
    assert env.deliver(handler, [PAYMENT]).outcomes == [Outcome.OWED_SENT]

    assert len(take(env, queue)) == 1
    assert len(credit.runs) == 1


# --- a chain once -> queue -> once ------------------------------------------------------------


def test_a_downstream_consumer_keyed_on_source_key_dedups_a_resent_message(
    env: OnceEnv,
) -> None:
    """Upstream reads the FIFO source queue and sends to the standard one, whose messages the
    downstream consumer reads as Lambda would hand them over (``deliver_waiting``)."""
    upstream = handler_of(
        Credit(sends=[(env.queue_url, {}), (env.queue_url, {})]), key="id", key_prefix="payments"
    )
    applied: list[tuple[str, Any]] = []

    def apply(notice: dict[str, Any], attempt: Attempt) -> str:
        applied.append((attempt.key, notice))
        attempt.write(
            {
                "Update": {
                    "TableName": LEDGER_TABLE,
                    "Key": {"id": {"S": "notices"}},
                    "UpdateExpression": "ADD #n :one",
                    "ExpressionAttributeNames": {"#n": "count"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            }
        )
        return "noted"

    downstream = handler_of(apply, key=SOURCE_KEY, key_prefix="notices")
    fail_clears(env)  # the outbox is sent, not cleared: the next delivery sends it again

    assert env.deliver(upstream, [PAYMENT], fifo_group="a-1").outcomes == [Outcome.OWED]
    first = env.deliver_waiting(downstream)
    assert env.deliver(upstream, [PAYMENT], fifo_group="a-1").outcomes == [Outcome.OWED_SENT]
    resent = env.deliver_waiting(downstream)

    [source] = {key.rsplit("#", 1)[0] for key, _ in applied}
    assert named(source) == source_of(upstream, "p-1")
    assert first.outcomes == [Outcome.PROCESSED, Outcome.PROCESSED]
    assert resent.outcomes == [Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert sorted(key for key, _ in applied) == [f"{source}#0", f"{source}#1"]
    assert all(notice == {"paymentId": "p-1"} for _, notice in applied)  # no business id
    count = ledger_items(env)["notices"]["count"]["N"]
    assert count == "2"  # each message's effect once
    record = env.record(f"{source}#0", handler=downstream)
    assert record is not None and record.status == c.STATUS_COMPLETED


def test_a_source_key_consumer_quarantines_a_message_without_the_identity(env: OnceEnv) -> None:
    downstream = handler_of(lambda body, attempt: "never", key=SOURCE_KEY)

    delivery = env.deliver(
        downstream,
        [{"paymentId": "p-1"}, {"paymentId": "p-2"}],
        message_attributes=[{c.OUTBOX_ATTR_SOURCE: "payments#p-2"}, {}],
    )

    assert delivery.outcomes == [Outcome.QUARANTINED, Outcome.QUARANTINED]
    assert {m.reason for m in env.dlq_messages()} == {c.REASON_INVALID_KEY}


# === zombies and controllable contexts (the suite's own moto fixtures) ==========================


def test_a_zombie_whose_lease_was_taken_over_lands_none_of_its_writes(
    aws: Any, once_handler: Any, sqs_event: Any, context: Any, clock: Any
) -> None:
    """The first attempt's lease runs out while its business code runs; the redelivery takes
    the key over and commits; then the zombie returns and commits: refused whole."""
    aws.sqs.create_queue(QueueName="notify")
    notify = aws.sqs.get_queue_url(QueueName="notify")["QueueUrl"]
    event = sqs_event([{"orderId": "o-1"}])
    takeovers: list[list[Outcome]] = []

    def stage(body: dict[str, Any], attempt: Attempt) -> None:
        attempt.write(
            {
                "Put": {
                    "TableName": LEDGER,
                    "Item": {c.ATTR_ID: {"S": f"entry#{attempt.fence}"}},
                }
            }
        )
        attempt.write(
            {
                "Update": {
                    "TableName": LEDGER,
                    "Key": {c.ATTR_ID: {"S": "account"}},
                    "UpdateExpression": "ADD balance :a",
                    "ExpressionAttributeValues": {":a": {"N": "1"}},
                }
            }
        )
        attempt.send(notify, {"fence": attempt.fence})

    def takeover_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        return "takeover"

    takeover = once_handler(takeover_business, clock=clock)

    def zombie_business(body: dict[str, Any], attempt: Attempt) -> str:
        stage(body, attempt)
        clock.advance(3600)  # its lease runs out while it is still running...
        takeovers.append(outcomes(takeover, event, context(remaining_ms=60_000)))  # ...taken over
        return "zombie"

    zombie = once_handler(zombie_business, clock=clock)

    assert outcomes(zombie, event, context(remaining_ms=60_000)) == [Outcome.LEASE_LOST]

    assert takeovers == [[Outcome.PROCESSED]]
    ledger = {i[c.ATTR_ID]["S"]: i for i in aws.dynamodb.scan(TableName=LEDGER)["Items"]}
    assert set(ledger) == {"entry#2", "account"}  # the takeover's, none of the zombie's
    assert ledger["account"]["balance"] == {"N": "1"}
    record = aws.record("o-1")
    assert (record["status"], record["fence"], record["result"]) == (
        c.STATUS_COMPLETED,
        2,
        '"takeover"',
    )
    sent = aws.sqs.receive_message(QueueUrl=notify, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"]) for m in sent] == [{"fence": 2}]  # the zombie sent nothing


def test_with_too_little_time_left_an_owed_outbox_is_left_for_the_next_delivery(
    aws: Any, once_handler: Any, sqs_event: Any, context: Any, clock: Any
) -> None:
    queue = aws.sqs.create_queue(QueueName="notify")["QueueUrl"]
    remaining = iter([60_000] * 50)

    def business(body: dict[str, Any], attempt: Attempt) -> str:
        attempt.send(queue, {"orderId": body["orderId"]})
        nonlocal remaining
        remaining = iter([])  # time runs out as business code returns
        return "ok"

    handler = once_handler(business, clock=clock, min_remaining_ms=1_000)
    late = context(remaining_ms=lambda: next(remaining, 10))

    assert outcomes(handler, sqs_event([{"orderId": "o-1"}]), late) == [Outcome.OWED]
    assert "Messages" not in aws.sqs.receive_message(QueueUrl=queue)
    assert outcomes(handler, sqs_event([{"orderId": "o-1"}]), context()) == [Outcome.OWED_SENT]
    assert len(aws.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]) == 1


def test_calls_counted_on_the_wire_per_new_key_and_per_duplicate(
    aws: Any, once_handler: Any, sqs_event: Any
) -> None:
    queue = aws.sqs.create_queue(QueueName="notify")["QueueUrl"]

    def business(body: dict[str, Any], attempt: Attempt) -> str:
        attempt.write(
            {
                "Put": {
                    "TableName": LEDGER,
                    "Item": {c.ATTR_ID: {"S": "entry#" + body["orderId"]}},
                }
            }
        )
        if body.get("notify"):
            attempt.send(queue, body)
        return "ok"

    handler = once_handler(business)
    calls: Calls = count_calls(handler.processor._store._client)  # the processor is built
    runs = {
        "new key": [{"orderId": "o-1"}],
        "duplicate": [{"orderId": "o-1"}],
        "new key with an outbox": [{"orderId": "o-2", "notify": True}],
        "its duplicate": [{"orderId": "o-2", "notify": True}],
    }
    counted = {}
    for name, bodies in runs.items():
        calls.reset()
        outcomes(handler, sqs_event(bodies))
        counted[name] = list(calls.sent)

    assert counted == {
        "new key": ["UpdateItem", "TransactWriteItems"],
        "duplicate": ["UpdateItem"],
        "new key with an outbox": ["UpdateItem", "TransactWriteItems", "UpdateItem"],
        "its duplicate": ["UpdateItem"],
    }
