"""The mapping emulator's response rules, case by case, as AWS documents them for
ReportBatchItemFailures ("Handling errors for an SQS event source in Lambda")."""

from __future__ import annotations

import pytest

from once.batchresponse import MALFORMED, decide

IDS = ["m1", "m2", "m3"]


def full_success(decision):
    return decision.delete == tuple(IDS) and decision.retry == () and not decision.full_failure


def full_failure(decision):
    return decision.delete == () and decision.retry == tuple(IDS) and decision.full_failure


@pytest.mark.parametrize(
    "response",
    [
        {"batchItemFailures": []},  # an empty batchItemFailures list
        {"batchItemFailures": None},  # a null batchItemFailures list
        {},  # an empty EventResponse
        None,  # a null EventResponse
    ],
)
def test_success_responses(response):
    assert full_success(decide(IDS, response))


@pytest.mark.parametrize(
    "response",
    [
        MALFORMED,  # invalid JSON
        {"batchItemFailures": [{"itemIdentifier": ""}]},  # empty string identifier
        {"batchItemFailures": [{"itemIdentifier": None}]},  # null identifier
        {"batchItemFailures": [{"itemIdentifer": "m1"}]},  # bad key name
        {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]},  # unknown message id
        {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "zz"}]},
        {"batchItemFailures": "m1"},  # not a list
        {"batchItemFailures": ["m1"]},  # entry not an object
        {"batchItemFailures": [{"itemIdentifier": 1}]},  # not a string
        ["m1"],  # not an object
        "m1",
    ],
)
def test_malformed_responses_fail_the_whole_batch(response):
    assert full_failure(decide(IDS, response))


def test_raised_exception_fails_the_whole_batch():
    assert full_failure(decide(IDS, {"batchItemFailures": []}, error="ValueError: boom"))


def test_timeout_fails_the_whole_batch():
    assert full_failure(decide(IDS, None, error="Task timed out after 2 seconds"))


def test_partial_failure_deletes_the_others():
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": "m2"}]})
    assert decision.delete == ("m1", "m3")
    assert decision.retry == ("m2",)
    assert not decision.full_failure


def test_every_id_listed_is_a_partial_failure_of_all():
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": i} for i in IDS]})
    assert decision.delete == () and decision.retry == tuple(IDS)
    assert not decision.full_failure


def test_duplicate_identifiers_count_once():
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": "m1"}] * 2})
    assert decision.retry == ("m1",) and decision.delete == ("m2", "m3")


def test_without_report_batch_item_failures_any_return_is_success():
    response = {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert full_success(decide(IDS, response, report_batch_item_failures=False))
    assert full_failure(decide(IDS, None, error="boom", report_batch_item_failures=False))
