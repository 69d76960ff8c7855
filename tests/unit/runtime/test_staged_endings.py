"""Every way a staged commit (``effects="staged"``) can end, through the real handler on moto,
with the errors DynamoDB documents for TransactWriteItems, UpdateItem and GetItem injected as
botocore raises them (``tests/unit/runtime/test_commit_endings.py`` does the same for the two-phase
commit).

What is pinned: nothing that ends without its commit leaves a record behind to undo; a
passing cause is committed again within the invocation; a copy that may have landed comes
back and either commits or finds itself a duplicate; a duplicate whose canceled transaction
names only its guarded staged write (DynamoDB does not promise to name the record's reason
too) is read and acknowledged, never retried for ever or quarantined; and, whatever the
endings, the staged write lands exactly once per completed record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from once.models import Outcome
from once.protocol import TRANSIENT_ERRORS
from once.store import COMMIT_TRIES, RecordStore
from tests.chaos.aws_faults import CANCELLATION_REASONS, DYNAMODB_REFUSALS
from tests.conftest import LEDGER, TABLE, outcomes
from tests.unit.runtime.test_commit_endings import (
    CALL_ERRORS,
    Faulty,
    canceled_on,
    client_error,
    dlq_depth,
    ledger_balance,
)

ORDER = {"orderId": "o-1", "qty": 1}
TRANSIENT = ("TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded")


class Business:
    """Business code that counts its runs and stages a guarded ledger entry (it must not
    exist: a copy's commit would be refused by it) and an increment, or nothing."""

    def __init__(self, *, staged: bool = True, account: str = "account-1") -> None:
        self.runs = 0
        self._staged = staged
        self._account = account

    def __call__(self, body: Any, attempt: Any) -> Any:
        self.runs += 1
        assert attempt.fence is None
        if self._staged:
            attempt.write(
                {
                    "Put": {
                        "TableName": LEDGER,
                        "Item": {"id": {"S": "entry#" + body["orderId"]}},
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                }
            )
            attempt.write(
                {
                    "Update": {
                        "TableName": LEDGER,
                        "Key": {"id": {"S": self._account}},
                        "UpdateExpression": "ADD balance :q",
                        "ExpressionAttributeValues": {":q": {"N": "1"}},
                    }
                }
            )
        return {"ok": True}


class Reads:
    """The record store's reads (``GetItem``), failing while ``error`` is set."""

    def __init__(self, faulty: Faulty) -> None:
        self.count = 0
        self.error: Callable[[], BaseException] | None = None
        faulty.get_item = self.get_item  # type: ignore[method-assign]
        self._client = faulty._client

    def get_item(self, **request: Any) -> Any:
        self.count += 1
        if self.error is not None:
            raise self.error()
        return self._client.get_item(**request)


def staged_handler(aws: Any, once_handler: Any, business: Business) -> tuple[Any, Faulty]:
    handler = once_handler(business, effects="staged")
    faulty = Faulty(aws.dynamodb)
    handler.bind(store=RecordStore(faulty, TABLE, retention_s=handler.retention_s, sleep=_no_wait))
    return handler, faulty


def _no_wait(_: float) -> None:
    return None


@pytest.mark.parametrize("position", ["staged", "record"])
@pytest.mark.parametrize("code", TRANSIENT)
def test_a_staged_commit_canceled_for_a_passing_cause_is_committed_again(
    aws, once_handler, sqs_event, position: str, code: str
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    faulty.plan = [(canceled_on(position, code), False)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (business.runs, faulty.completing_calls, ledger_balance(aws)) == (1, 2, 1)


@pytest.mark.parametrize("code", ["ValidationError", "ItemCollectionSizeLimitExceeded"])
def test_a_staged_commit_canceled_for_a_lasting_cause_fails_with_nothing_written(
    aws, once_handler, sqs_event, code: str
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    faulty.plan = [(canceled_on("staged", code), False)]

    [result] = handler.handle(sqs_event([ORDER]), None).records
    assert result.outcome is Outcome.FAILED
    assert code in (result.reason or "")
    assert (aws.record("o-1"), ledger_balance(aws), aws.dlq()) == (None, 0, [])
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (business.runs, ledger_balance(aws)) == (2, 1)


def test_a_staged_commit_conflicting_past_its_tries_fails_and_the_retry_commits(
    aws, once_handler, sqs_event
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    faulty.plan = [(canceled_on("staged", "TransactionConflict"), False)] * COMMIT_TRIES

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.FAILED]
    assert aws.record("o-1") is None
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (business.runs, ledger_balance(aws)) == (2, 1)


@pytest.mark.parametrize("staged", [False, True], ids=["update", "transaction"])
@pytest.mark.parametrize("code", CALL_ERRORS)
def test_a_staged_commit_the_call_refused_or_may_have_landed_comes_back_and_lands_once(
    aws, once_handler, sqs_event, staged: bool, code: str
) -> None:
    business = Business(staged=staged)
    handler, faulty = staged_handler(aws, once_handler, business)
    operation = "TransactWriteItems" if staged else "UpdateItem"
    # Landed or not, the caller cannot tell from a 5xx; a 400 certainly landed nothing.
    landed = code in ("InternalServerError", "TransactionInProgressException")
    # A cause that passes is met on every try of the invocation; any other ends it at once.
    tries = COMMIT_TRIES if code in TRANSIENT_ERRORS else 1
    faulty.plan = [(lambda: client_error(code, operation), landed)] * tries

    [first] = handler.handle(sqs_event([ORDER]), None).records
    assert first.outcome is Outcome.FAILED
    assert first.outcome.acknowledged is False
    [again] = handler.handle(sqs_event([ORDER]), None).records

    assert again.outcome is (Outcome.DUPLICATE if landed else Outcome.PROCESSED)
    assert aws.record("o-1")["status"] == c.STATUS_COMPLETED
    assert ledger_balance(aws) == (1 if staged else 0)


def test_a_staged_commit_with_no_answer_comes_back_as_a_duplicate_when_it_had_landed(
    aws, once_handler, sqs_event
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    faulty.plan = [(lambda: ReadTimeoutError(endpoint_url="https://dynamodb"), True)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.FAILED]
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.DUPLICATE]
    assert (business.runs, ledger_balance(aws)) == (2, 1)


def test_a_duplicate_whose_cancellation_names_only_its_staged_write_is_read_and_acknowledged(
    aws, once_handler, sqs_event
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    reads = Reads(faulty)
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    # The copy's transaction, as DynamoDB may answer it: only the guarded entry is named.
    faulty.plan = [(canceled_on("staged", "ConditionalCheckFailed"), False)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.DUPLICATE]
    assert (reads.count, ledger_balance(aws), aws.dlq()) == (1, 1, [])


@pytest.mark.parametrize(
    "code", ["AccessDeniedException", "ProvisionedThroughputExceededException"]
)
def test_a_refused_staged_write_whose_record_cannot_be_read_is_retried_not_lost(
    aws, once_handler, sqs_event, code: str
) -> None:
    business = Business()
    handler, faulty = staged_handler(aws, once_handler, business)
    reads = Reads(faulty)
    reads.error = lambda: client_error(code, "GetItem")
    faulty.plan = [(canceled_on("staged", "ConditionalCheckFailed"), False)]

    [result] = handler.handle(sqs_event([ORDER]), None).records
    assert (result.outcome, result.reason) == (Outcome.FAILED, c.REASON_WRITE_REFUSED)
    reads.error = None
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert ledger_balance(aws) == 1


# --- the class: any sequence of documented endings ------------------------------------------

ENDINGS = st.one_of(
    st.tuples(
        st.just("cancel"),
        st.sampled_from(("staged", "record")),
        st.sampled_from(CANCELLATION_REASONS),
        st.booleans(),
    ),
    st.tuples(st.just("call"), st.just(""), st.sampled_from(CALL_ERRORS), st.booleans()),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(endings=st.lists(ENDINGS, min_size=1, max_size=2 * COMMIT_TRIES))
def test_whatever_the_endings_the_staged_write_lands_once_per_completed_record(
    aws, once_handler, sqs_event, endings: list[tuple[str, str, str, bool]]
) -> None:
    key = f"o-{len(aws.records())}-{dlq_depth(aws)}-{len(endings)}"
    while aws.record(key) is not None or ledger_balance(aws, key):
        key += "x"
    body = {"orderId": key, "qty": 1}
    business = Business(account=key)
    handler, faulty = staged_handler(aws, once_handler, business)
    for kind, position, code, landed in endings:
        if kind == "cancel":
            if code == "ConditionalCheckFailed" and position == "record":
                continue  # only when the record's condition really fails
            faulty.plan.append((canceled_on(position, code), False))
        else:
            # A 400 certainly landed nothing; only what may have landed is let through.
            through = landed and code not in _CERTAIN
            faulty.plan.append((_call_error(code), through))
    depth = dlq_depth(aws)

    results = [handler.handle(sqs_event([body]), None).records[0] for _ in range(4)]
    record = aws.record(key)

    for result in results:
        # Acknowledged only when done or in the DLQ.
        if result.outcome.acknowledged and result.outcome is not Outcome.DUPLICATE:
            assert result.outcome is Outcome.PROCESSED or dlq_depth(aws) > depth, result
    completed = record is not None and record["status"] == c.STATUS_COMPLETED
    assert ledger_balance(aws, key) == int(completed), (endings, results)
    assert record is None or record["status"] == c.STATUS_COMPLETED  # never IN_PROGRESS/FAILED


#: Errors of the call DynamoDB answers without processing it (400s): this request landed
#: nothing (a reused token's mismatch neither: it is the earlier request that may have).
_CERTAIN = frozenset(DYNAMODB_REFUSALS) | {"IdempotentParameterMismatchException"}


def _call_error(code: str) -> Callable[[], BaseException]:
    return lambda: client_error(code, "TransactWriteItems")
