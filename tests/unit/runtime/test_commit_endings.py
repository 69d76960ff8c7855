"""Every way a commit can end after business code returned, through the real handler on
moto, with the errors DynamoDB documents for TransactWriteItems and UpdateItem injected as
botocore raises them (``ClientError`` with AWS's code and, for a canceled transaction, each
element's ``CancellationReasons``).

What is pinned: a commit that landed nothing for a passing cause is committed again within
the invocation; one that certainly landed nothing fails the record at once (not after a
lease); business code that returned runs again only under ``on_expired_lease="run"``, and
under ``"quarantine"`` the message goes to a person (``once.fence``), whose redrive runs it
once; an unknown ending leaves the record to its lease.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from once.models import Outcome
from once.protocol import (
    REFUSED_ERRORS,
    TRANSIENT_ERRORS,
    TRANSIENT_REASONS,
    Step,
    Verdict,
    after_commit,
    judge_write_error,
)
from once.store import COMMIT_TRIES, RecordStore
from oncecli.redrive import is_lease_expired
from tests.chaos.aws_faults import CANCELLATION_REASONS
from tests.conftest import LEDGER, TABLE, outcomes
from tests.unit.runtime.test_expired_lease_policy import redriven

ORDER = {"orderId": "o-1", "qty": 1}
#: Errors of the call itself: refused unprocessed (certain), or that may have landed.
CALL_ERRORS = (
    "AccessDeniedException",
    "ResourceNotFoundException",
    "ValidationException",
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "TransactionInProgressException",
    "IdempotentParameterMismatchException",
)
POLICIES = ("run", "quarantine")


def client_error(code: str, operation: str, reasons: list[dict[str, Any]] | None = None) -> Any:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": "injected"}}
    if reasons is not None:
        response["CancellationReasons"] = reasons
    return ClientError(response, operation)


class Faulty:
    """The real DynamoDB client, but the completing writes first meet ``plan``: each entry
    is raised by one call (in order) before it reaches moto, or after it (``landed=True``);
    ``None`` lets the call through."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.plan: list[tuple[Callable[[], BaseException], bool] | None] = []
        self.completing_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _completing(self, call: Callable[..., Any], **request: Any) -> Any:
        self.completing_calls += 1
        step = self.plan.pop(0) if self.plan else None
        if step is None:
            return call(**request)
        error, landed = step
        if landed:
            call(**request)
        raise error()

    def transact_write_items(self, **request: Any) -> Any:
        return self._completing(self._client.transact_write_items, **request)

    def update_item(self, **request: Any) -> Any:
        # The completion binds the result; the claim, the fail and the outbox's clear do not.
        if ":result" in request.get("ExpressionAttributeValues", {}):
            return self._completing(self._client.update_item, **request)
        return self._client.update_item(**request)


class Business:
    """Business code that counts its runs and stages a ledger write (or none)."""

    def __init__(self, *, staged: bool, account: str = "account-1") -> None:
        self.runs = 0
        self._staged = staged
        self._account = account

    def __call__(self, body: Any, attempt: Any) -> Any:
        self.runs += 1
        if self._staged:
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


def handler_with(
    aws: Any, once_handler: Any, business: Business, policy: str
) -> tuple[Any, Faulty]:
    handler = once_handler(business, on_expired_lease=policy)
    faulty = Faulty(aws.dynamodb)
    handler.bind(store=RecordStore(faulty, TABLE, retention_s=handler.retention_s, sleep=_no_wait))
    return handler, faulty


def _no_wait(_: float) -> None:
    return None


def canceled_on(position: str, code: str) -> Callable[[], BaseException]:
    """A TransactWriteItems canceled by ``code`` on the staged element or on the record's."""
    reasons = [{"Code": "None"}, {"Code": "None"}]
    reasons[0 if position == "staged" else 1] = {"Code": code}
    return lambda: client_error("TransactionCanceledException", "TransactWriteItems", reasons)


def ledger_balance(aws: Any, account: str = "account-1") -> int:
    item = aws.dynamodb.get_item(TableName=LEDGER, Key={"id": {"S": account}}).get("Item")
    return int(item["balance"]["N"]) if item else 0


def dlq_depth(aws: Any) -> int:
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=aws.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


# --- the decision rows: protocol.after_commit ----------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "refused", "run", "quarantine"),
    [
        (Verdict.MINE, "retry", Step.DONE, Step.DONE),
        (Verdict.LANDED, "retry", Step.DONE, Step.DONE),
        (Verdict.LEASE_LOST, "retry", Step.LOST, Step.LOST),
        (Verdict.UNKNOWN, "retry", Step.WAIT, Step.WAIT),
        (Verdict.REFUSED, "retry", Step.RETRY, Step.REVIEW),
        (Verdict.REFUSED, "quarantine", Step.QUARANTINE, Step.REVIEW),
        (Verdict.CANCELED, "retry", Step.RETRY, Step.REVIEW),
        (Verdict.TRANSIENT, "retry", Step.RETRY, Step.REVIEW),
    ],
)
def test_each_commit_ending_leads_where_the_policy_says(
    verdict: Verdict, refused: str, run: Step, quarantine: Step
) -> None:
    assert after_commit(verdict, refused=refused, review=False) is run
    assert after_commit(verdict, refused=refused, review=True) is quarantine


@pytest.mark.parametrize("code", sorted(TRANSIENT_ERRORS))
def test_a_write_refused_for_a_passing_cause_is_transient(code: str) -> None:
    assert judge_write_error(code) is Verdict.TRANSIENT


@pytest.mark.parametrize("code", sorted(REFUSED_ERRORS))
def test_a_write_refused_for_a_lasting_cause_certainly_landed_nothing(code: str) -> None:
    assert judge_write_error(code) is Verdict.CANCELED


@pytest.mark.parametrize(
    "code",
    [
        None,
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionInProgressException",
        "IdempotentParameterMismatchException",
        "SomethingNotDocumented",
    ],
)
def test_a_write_that_may_have_landed_is_unknown(code: str | None) -> None:
    assert judge_write_error(code) is Verdict.UNKNOWN


# --- the defect: a canceled commit re-ran business code under "quarantine" -----------------


@pytest.mark.parametrize("position", ["staged", "record"])
@pytest.mark.parametrize("code", sorted(TRANSIENT_REASONS))
def test_a_commit_canceled_for_a_passing_cause_is_committed_again_and_lands_once(
    aws, once_handler, sqs_event, position: str, code: str
) -> None:
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, "quarantine")
    faulty.plan = [(canceled_on(position, code), False)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (business.runs, faulty.completing_calls, ledger_balance(aws)) == (1, 2, 1)
    assert aws.record("o-1")["status"] == c.STATUS_COMPLETED


@pytest.mark.parametrize("code", sorted(TRANSIENT_REASONS))
def test_under_quarantine_a_commit_conflicting_past_its_tries_goes_to_review_not_to_a_rerun(
    aws, once_handler, sqs_event, code: str
) -> None:
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, "quarantine")
    faulty.plan = [(canceled_on("record", code), False)] * COMMIT_TRIES
    event = sqs_event([ORDER])

    assert outcomes(handler, event) == [Outcome.QUARANTINED]
    record = aws.record("o-1")
    assert (record["status"], record["review_fence"]) == (c.STATUS_FAILED, 1)
    assert record["error"].startswith(c.REASON_COMMIT_FAILED)
    [dead] = aws.dlq()
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_REASON] == c.REASON_COMMIT_FAILED
    assert attributes[c.QUARANTINE_ATTR_FENCE] == "1"
    assert code in attributes[c.QUARANTINE_ATTR_ERROR]
    assert is_lease_expired(dead)  # `once redrive` leaves it for the review

    # A copy of the message (SQS delivers at least once) is quarantined too, unrun.
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.QUARANTINED]
    assert business.runs == 1
    # The person checks what business code did, then redrives the first copy: it runs once.
    assert outcomes(handler, redriven(dead, sqs_event)) == [Outcome.PROCESSED]
    assert (business.runs, ledger_balance(aws)) == (2, 1)


def test_under_run_a_commit_conflicting_past_its_tries_fails_and_the_retry_runs_again(
    aws, once_handler, sqs_event
) -> None:
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, "run")
    faulty.plan = [(canceled_on("staged", "TransactionConflict"), False)] * COMMIT_TRIES

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.FAILED]
    assert aws.record("o-1")["status"] == c.STATUS_FAILED
    assert aws.dlq() == []
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (business.runs, ledger_balance(aws)) == (2, 1)


def test_under_quarantine_a_refused_staged_write_goes_to_review(
    aws, once_handler, sqs_event
) -> None:
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, "quarantine")
    faulty.plan = [(canceled_on("staged", "ConditionalCheckFailed"), False)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.QUARANTINED]
    [dead] = aws.dlq()
    attributes = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attributes[c.QUARANTINE_ATTR_REASON] == c.REASON_WRITE_REFUSED
    assert attributes[c.QUARANTINE_ATTR_FENCE] == "1"
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.QUARANTINED]
    assert business.runs == 1


# --- defect 5's second half: AccessDenied is certain, not a lease's wait -------------------


@pytest.mark.parametrize("staged", [False, True], ids=["plain", "staged"])
def test_an_access_denied_commit_fails_the_record_at_once_instead_of_holding_it_a_lease(
    aws, once_handler, sqs_event, staged: bool
) -> None:
    business = Business(staged=staged)
    handler, faulty = handler_with(aws, once_handler, business, "run")
    operation = "TransactWriteItems" if staged else "UpdateItem"
    faulty.plan = [(lambda: client_error("AccessDeniedException", operation), False)]

    [result] = handler.handle(sqs_event([ORDER]), None).records
    assert (result.outcome, faulty.completing_calls) == (Outcome.FAILED, 1)
    assert "AccessDeniedException" in (result.reason or "")
    assert aws.record("o-1")["status"] == c.STATUS_FAILED  # not IN_PROGRESS for a lease
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]  # no BUSY wait


def test_a_commit_whose_earlier_try_landed_is_done_though_its_retry_was_refused(
    aws, once_handler, sqs_event
) -> None:
    # The SDK's first try landed, its answer was lost, and the retry was refused: the fail
    # that follows finds the record COMPLETED under this very claim.
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, "quarantine")
    faulty.plan = [(lambda: client_error("AccessDeniedException", "TransactWriteItems"), True)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.PROCESSED]
    assert (aws.record("o-1")["status"], ledger_balance(aws), aws.dlq()) == (
        c.STATUS_COMPLETED,
        1,
        [],
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_a_commit_that_may_have_landed_leaves_the_record_to_its_lease(
    aws, once_handler, sqs_event, policy: str
) -> None:
    business = Business(staged=True)
    handler, faulty = handler_with(aws, once_handler, business, policy)
    faulty.plan = [(lambda: ReadTimeoutError(endpoint_url="https://dynamodb"), False)]

    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.FAILED]
    assert aws.record("o-1")["status"] == c.STATUS_IN_PROGRESS
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.BUSY]
    assert business.runs == 1


# --- the class: every documented ending, both policies -------------------------------------

ENDINGS = st.one_of(
    st.tuples(
        st.just("cancel"),
        st.sampled_from(("staged", "record")),
        st.sampled_from(CANCELLATION_REASONS),
    ),
    st.tuples(st.just("call"), st.just(""), st.sampled_from(CALL_ERRORS)),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ending=st.lists(ENDINGS, min_size=1, max_size=COMMIT_TRIES),
    policy=st.sampled_from(POLICIES),
)
def test_business_code_that_returned_runs_again_without_review_only_under_run(
    aws, once_handler, sqs_event, ending: list[tuple[str, str, str]], policy: str
) -> None:
    key = f"o-{len(aws.records())}"  # a fresh key (and account) per example
    body = {"orderId": key, "qty": 1}
    business = Business(staged=True, account=key)
    handler, faulty = handler_with(aws, once_handler, business, policy)
    for kind, position, code in ending:
        error = canceled_on(position, code) if kind == "cancel" else _call_error(code)
        faulty.plan.append((error, False))
    depth = dlq_depth(aws)

    [first] = handler.handle(sqs_event([body]), None).records
    quarantined = dlq_depth(aws) - depth
    [again] = handler.handle(sqs_event([body]), None).records

    record = aws.record(key)
    # Acknowledged only when done or in the DLQ.
    if first.outcome.acknowledged:
        assert first.outcome is Outcome.PROCESSED or quarantined == 1, (ending, first)
    # The staged write lands once per completion, never for an attempt that landed nothing.
    assert ledger_balance(aws, key) == (record["status"] == c.STATUS_COMPLETED)
    if policy == "quarantine":
        # Never a second run without a person's review: the copy is a duplicate, waits on
        # the lease, or is quarantined for review.
        assert business.runs == 1, (ending, first, again)
    else:
        assert first.outcome is not Outcome.QUARANTINED or any(
            code == "ConditionalCheckFailed" for *_, code in ending
        )


def _call_error(code: str) -> Callable[[], BaseException]:
    return lambda: client_error(code, "TransactWriteItems")
