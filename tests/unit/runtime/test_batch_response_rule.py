"""Lambda's rule for a response to an SQS batch (``once.batchresponse``), row by row as its
docstring lists them, from "Reporting batch item failures"
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html), and how
Lambda's Python runtime makes the response of what a handler returned."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from once.batchresponse import MALFORMED, Decision, MarshalError, decide, judge, marshal, parse

IDS = ["m1", "m2", "m3"]


def full_success(decision: Decision) -> bool:
    return decision.delete == tuple(IDS) and decision.retry == () and not decision.full_failure


def full_failure(decision: Decision) -> bool:
    return decision.delete == () and decision.retry == tuple(IDS) and decision.full_failure


# --- E: an error fails the whole batch, whatever was returned ----------------------------------


@pytest.mark.parametrize(
    "error", ["ValueError: boom", "Task timed out after 2 seconds", "Runtime.ExitError"]
)
def test_row_e_a_function_error_fails_the_whole_batch(error: str) -> None:
    assert full_failure(decide(IDS, {"batchItemFailures": []}, error=error))
    assert full_failure(decide(IDS, None, error=error, report_batch_item_failures=False))


def test_row_e_a_response_the_runtime_cannot_marshal_fails_the_whole_batch() -> None:
    decision = judge(IDS, {"batchItemFailures": {"m1"}})  # a set is no JSON
    assert full_failure(decision)
    assert "Runtime.MarshalError" in decision.reason


# --- M: invalid JSON ----------------------------------------------------------------------------


def test_row_m_an_invalid_json_response_fails_the_whole_batch() -> None:
    assert full_failure(decide(IDS, MALFORMED))
    # Without ReportBatchItemFailures Lambda reads no response: row O (adversarial review
    # of issue 44).
    assert full_success(decide(IDS, MALFORMED, report_batch_item_failures=False))


# --- O: without ReportBatchItemFailures ----------------------------------------------------------


@pytest.mark.parametrize(
    "response", [{"batchItemFailures": [{"itemIdentifier": "m1"}]}, "m1", [], {"x": 1}]
)
def test_row_o_without_report_batch_item_failures_any_response_deletes_all(response: Any) -> None:
    assert full_success(decide(IDS, response, report_batch_item_failures=False))


# --- S1..S4: complete success ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "response"),
    [
        ("S1", None),  # Null EventResponse
        ("S2", {}),  # Empty EventResponse
        ("S2", {"other": 1}),  # no batchItemFailures key
        ("S3", {"batchItemFailures": None}),  # Null batchItemFailures list
        ("S4", {"batchItemFailures": []}),  # Empty batchItemFailures list
    ],
)
def test_rows_s_a_null_or_empty_response_deletes_every_message(row: str, response: Any) -> None:
    assert full_success(decide(IDS, response)), row


# --- F1..F4: complete failure ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "response"),
    [
        ("F1", ["m1"]),  # not an object
        ("F1", "m1"),
        ("F1", 3),
        ("F1", {"batchItemFailures": "m1"}),  # not a list
        ("F1", {"batchItemFailures": {"itemIdentifier": "m1"}}),
        ("F1", {"batchItemFailures": ["m1"]}),  # an entry that is not an object
        ("F2", {"batchItemFailures": [{"itemIdentifer": "m1"}]}),  # bad key name
        ("F2", {"batchItemFailures": [{}]}),
        ("F3", {"batchItemFailures": [{"itemIdentifier": ""}]}),  # empty string
        ("F3", {"batchItemFailures": [{"itemIdentifier": None}]}),  # null
        ("F4", {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]}),
        ("F4", {"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "zz"}]}),
        ("F4", {"batchItemFailures": [{"itemIdentifier": 1}]}),  # not a string
    ],
)
def test_rows_f_a_response_lambda_cannot_read_fails_the_whole_batch(
    row: str, response: Any
) -> None:
    assert full_failure(decide(IDS, response)), row


# --- P: partial failure -----------------------------------------------------------------


def test_row_p_the_listed_messages_come_back_and_the_others_are_deleted() -> None:
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": "m2"}]})
    assert (decision.delete, decision.retry) == (("m1", "m3"), ("m2",))
    assert not decision.full_failure


def test_row_p_every_message_listed_is_a_partial_failure_of_all() -> None:
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": i} for i in IDS]})
    assert (decision.delete, decision.retry) == ((), tuple(IDS))
    assert not decision.full_failure


def test_row_p_a_message_listed_twice_comes_back_once() -> None:
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": "m1"}] * 2})
    assert (decision.delete, decision.retry) == (("m2", "m3"), ("m1",))


def test_row_p_other_keys_of_an_entry_are_ignored() -> None:
    decision = decide(IDS, {"batchItemFailures": [{"itemIdentifier": "m3", "why": "x"}]})
    assert decision.retry == ("m3",)


# --- marshalling: what Lambda's Python runtime makes of the returned value ---------------


def test_a_decimal_is_marshalled_as_its_number() -> None:
    assert parse(marshal({"n": Decimal("1.5")})) == {"n": 1.5}


def test_bytes_are_the_payload_as_they_are() -> None:
    assert parse(marshal(b'{"batchItemFailures": []}')) == {"batchItemFailures": []}
    assert parse(marshal(b"not json")) is MALFORMED


@pytest.mark.parametrize("returned", [{1, 2}, object(), {"k": {"m1"}}])
def test_what_json_cannot_encode_is_a_marshal_error(returned: Any) -> None:
    with pytest.raises(MarshalError, match="Unable to marshal response"):
        marshal(returned)


@pytest.mark.parametrize("returned", [float("nan"), {"n": float("inf")}, Decimal("NaN")])
def test_nan_and_infinity_are_marshalled_but_are_no_json(returned: Any) -> None:
    assert parse(marshal(returned)) is MALFORMED
    assert full_failure(judge(IDS, returned))


def test_judge_reads_a_returned_value_as_lambda_does() -> None:
    assert full_success(judge(IDS, None))
    assert judge(IDS, ({"batchItemFailures": [{"itemIdentifier": "m1"}]})).retry == ("m1",)
    # A tuple is a JSON array, as in Lambda's encoder.
    assert judge(IDS, {"batchItemFailures": ({"itemIdentifier": "m2"},)}).retry == ("m2",)


def test_the_rule_is_pure_and_stands_on_nothing_of_once() -> None:
    """Below the kit and the local cloud both: it imports only the standard library's pure
    modules, nothing of once, nothing that does I/O."""
    import ast
    from pathlib import Path

    import once.batchresponse

    tree = ast.parse(Path(once.batchresponse.__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= {
        "__future__",
        "json",
        "math",
        "collections",
        "dataclasses",
        "decimal",
        "typing",
    }
