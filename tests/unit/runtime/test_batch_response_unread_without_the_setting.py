"""Without ``ReportBatchItemFailures`` Lambda reads no response: a payload that is not JSON
is a complete success, as any other (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
Proved by the adversarial review of issue 44 (it failed the whole batch, redelivered to the
DLQ)."""

from __future__ import annotations

from once.batchresponse import MALFORMED, decide, marshal, parse
from oncecli.localcloud.mapping import response_of


def test_a_response_that_is_no_json_is_a_success_when_lambda_does_not_read_it() -> None:
    decision = decide(["m-1", "m-2"], MALFORMED, report_batch_item_failures=False)

    assert decision.delete == ("m-1", "m-2"), decision.reason
    assert decision.retry == ()


def test_the_local_cloud_deletes_a_batch_whose_handler_returned_bytes_without_the_setting() -> None:
    response, error = response_of(
        "ok", marshal(b"ok")
    )  # a worker's answer, as the mapping reads it
    assert error is None and response is MALFORMED is parse("ok")

    decision = decide(["m-1"], response, error=error, report_batch_item_failures=False)

    assert decision.delete == ("m-1",), decision.reason
