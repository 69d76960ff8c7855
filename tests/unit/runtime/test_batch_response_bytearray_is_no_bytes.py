"""A handler's returned ``bytearray`` is not ``bytes`` to Lambda's Python runtime (its
``marshal_response`` passes only ``bytes`` through; a ``bytearray`` goes to the JSON encoder,
which refuses it: ``Runtime.MarshalError``, the batch retried). Proved by the adversarial
review of issue 44 (it counted as a success and deleted every message)."""

from __future__ import annotations

from once.batchresponse import MARSHAL_ERROR, judge
from oncecli.localcloud.invocation import answer_of


def test_a_bytearray_response_is_a_marshal_error_and_the_whole_batch_comes_back() -> None:
    decision = judge(["m-1", "m-2"], bytearray(b"null"))

    assert decision.delete == (), f"deleted {decision.delete}: {decision.reason}"
    assert decision.retry == ("m-1", "m-2")
    assert MARSHAL_ERROR in decision.reason


def test_the_local_cloud_worker_answers_a_bytearray_with_a_marshal_error() -> None:
    kind, payload = answer_of(bytearray(b'{"batchItemFailures": []}'))

    assert (kind, payload.split(":")[0]) == ("error", MARSHAL_ERROR), (kind, payload)
