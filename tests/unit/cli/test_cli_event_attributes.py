"""``once event --attribute`` and the identity options, run as a team runs them: the ``once``
command in a directory outside the repository. The event carries message attributes in the
shape Lambda hands them over (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html),
refuses what SQS would (exit 2, saying why), and an identity written with ``--identity`` or
``--source-of`` is the key a handler keyed on ``SOURCE_KEY`` runs under."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from once import SOURCE_KEY, Attempt
from once import constants as c
from tests.conftest import Aws, FakeContext

#: The ``once`` command of this environment (installed editable from the checkout).
ONCE = str(Path(sys.executable).parent / "once")
BODY = '{"refundId": "r-1"}'
#: An upstream outbox message's identity, as a SOURCE_KEY consumer's log line shows its key.
IDENTITY = "refunds#r-1@9552ed89e9144924b35b35d514cd9d09"


def once_event(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ONCE, "event", BODY, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _attributes(run: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert run.returncode == 0, run.stderr
    return [record["messageAttributes"] for record in json.loads(run.stdout)["Records"]]


def test_attributes_are_written_as_lambda_hands_them_over(tmp_path: Path) -> None:
    run = once_event(tmp_path, "--attribute", "tenant=t-1", "--attribute", "priority:Number=5")

    (attributes,) = _attributes(run)
    assert {name: (a["dataType"], a["stringValue"]) for name, a in attributes.items()} == {
        "tenant": ("String", "t-1"),
        "priority": ("Number", "5"),
    }
    assert all(a["stringListValues"] == a["binaryListValues"] == [] for a in attributes.values())


def test_a_value_may_hold_an_equals_sign_and_a_custom_type_label(tmp_path: Path) -> None:
    run = once_event(tmp_path, "--attribute", "filter=a=b", "--attribute", "n:Number.int=7")

    (attributes,) = _attributes(run)
    assert attributes["filter"]["stringValue"] == "a=b"
    assert attributes["n"]["dataType"] == "Number.int"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("AWS.trace=x", "SQS refuses the name 'AWS.trace'"),
        ("bad name=x", "SQS refuses the name 'bad name'"),
        ("n:Number=lots", "SQS refuses the value as a Number"),
        ("n:Binary=AQI=", "the type must be String or Number"),
        ("tenant", "expected NAME=VALUE"),
    ],
)
def test_an_attribute_sqs_would_refuse_exits_2_saying_why(
    tmp_path: Path, given: str, said: str
) -> None:
    run = once_event(tmp_path, "--attribute", given)

    assert run.returncode == 2
    assert said in run.stderr and run.stdout == ""


def test_an_attribute_given_twice_is_refused(tmp_path: Path) -> None:
    run = once_event(tmp_path, "--identity", f"{IDENTITY}#0", "--attribute", "once.seq:Number=1")

    assert run.returncode == 2 and "attribute once.seq given twice" in run.stderr


def _handled_key(aws: Aws, event: dict[str, Any]) -> str:
    """The key a handler keyed on SOURCE_KEY ran the event's one record under, and its
    record's status."""
    from once import make_handler

    keys: list[str] = []

    def notify(body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        keys.append(attempt.key)
        return {}

    handler = make_handler(
        notify, key=SOURCE_KEY, key_prefix="notices", table_name="idempotency", dlq_url=aws.dlq_url
    )
    assert handler(event, FakeContext()) == {"batchItemFailures": []}
    (key,) = keys
    record = aws.record(key, prefix="notices")
    assert record is not None and record[c.ATTR_STATUS] == c.STATUS_COMPLETED
    return key


def test_an_identity_given_is_the_key_a_source_key_handler_runs_under(
    tmp_path: Path, aws: Aws
) -> None:
    run = once_event(tmp_path, "--identity", f"{IDENTITY}#3")
    assert run.returncode == 0, run.stderr

    assert _handled_key(aws, json.loads(run.stdout)) == f"{IDENTITY}#3"


def test_source_of_writes_a_new_operation_s_identity_one_seq_a_body(
    tmp_path: Path, aws: Aws
) -> None:
    """As the outbox of one operation of the upstream record ``refunds#r 1`` sends its
    messages: its record id escaped, a new token, then 0, 1, ..."""
    run = once_event(tmp_path, '{"refundId": "r-2"}', "--source-of", "refunds#r 1")

    first, second = _attributes(run)
    source = first[c.OUTBOX_ATTR_SOURCE]["stringValue"]
    assert re.fullmatch(r"refunds#r%201@[0-9a-f]{32}", source)
    assert second[c.OUTBOX_ATTR_SOURCE]["stringValue"] == source
    seqs = [
        (a[c.OUTBOX_ATTR_SEQ]["dataType"], a[c.OUTBOX_ATTR_SEQ]["stringValue"])
        for a in (first, second)
    ]
    assert seqs == [("Number", "0"), ("Number", "1")]
    event = json.loads(run.stdout)
    event["Records"] = event["Records"][:1]
    assert _handled_key(aws, event) == f"{source}#0"


def test_a_malformed_identity_exits_2_saying_the_form(tmp_path: Path) -> None:
    run = once_event(tmp_path, "--identity", IDENTITY)

    assert run.returncode == 2 and "expected SOURCE#SEQ" in run.stderr
