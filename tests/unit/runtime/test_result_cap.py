"""Results over the cap (64 KiB) are stored as their size and sha256 only."""

from __future__ import annotations

import hashlib
import json

from once import constants as c
from once.payload import canonical_json, encode_result
from tests.conftest import Spy


def test_a_result_over_the_cap_is_stored_as_size_and_hash(aws, once_handler, sqs_event) -> None:
    big = {"blob": "b" * (c.RESULT_CAP_BYTES + 1)}
    handler = once_handler(Spy(lambda body, attempt: big))

    assert handler(sqs_event([{"orderId": "o-1"}]), None) == {"batchItemFailures": []}

    text = canonical_json(big)
    stored = json.loads(aws.record("o-1")["result"])
    assert stored == {
        "capped": True,
        "size": len(text.encode()),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    assert handler(sqs_event([{"orderId": "o-1"}]), None) == {"batchItemFailures": []}


def test_a_result_of_exactly_the_cap_is_stored_whole() -> None:
    text = json.dumps("x" * (c.RESULT_CAP_BYTES - 2))  # two quotes
    assert len(text.encode()) == c.RESULT_CAP_BYTES
    assert encode_result(json.loads(text)).text == text
    assert json.loads(encode_result("x" * (c.RESULT_CAP_BYTES - 1)).text)["capped"] is True


def test_the_cap_counts_bytes_not_characters() -> None:
    result = "é" * (c.RESULT_CAP_BYTES // 2)  # 2 bytes each: over the cap in UTF-8
    assert json.loads(encode_result(result).text)["size"] == c.RESULT_CAP_BYTES + 2
