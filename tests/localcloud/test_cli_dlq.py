"""``once dlq`` run as a team runs it: the ``once`` command, in a directory outside the
repository, against a stack on a moto server (127.0.0.1) whose outputs are those
``add_cli_outputs`` writes. It lists every message of the DLQ, past one page of ten and on a
FIFO DLQ, with once's attributes and without them, shows no body unless ``--body``, and
leaves the DLQ as it found it: nothing deleted, nothing left in flight.

Nothing waits on time: each check reads the queue's counts after the command returned."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from once import constants as c
from oncecli import dlq
from oncecli.aws import (
    LOCAL_ACCESS_KEY_ID,
    LOCAL_SECRET_ACCESS_KEY,
    create_table,
    local_client,
    queue_depth,
)
from oncecli.errors import CliError
from oncecli.localcloud.engines import MotoServer

#: The ``once`` command of this environment (installed editable from the checkout).
ONCE = str(Path(sys.executable).parent / "once")
#: A payload value that must never be printed without ``--body``.
SECRET = "card-4242-4242"
ISO_8601 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with MotoServer() as moto:
        yield moto.endpoint


@dataclass
class Stack:
    name: str
    sqs: Any
    #: Each consumer's DLQ URL, by consumer name.
    dlqs: dict[str, str]


def _stack(endpoint: str, *consumers: str, fifo: bool = False) -> Stack:
    """A stack whose outputs name each consumer's queue, DLQ and table, as add_cli_outputs
    writes them (one consumer: the plain keys; several: each under its construct id)."""
    name = f"Orders{uuid.uuid4().hex[:8]}"
    resources: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for consumer in consumers:
        prefix = consumer if len(consumers) > 1 else ""
        queue: dict[str, Any] = {"FifoQueue": True} if fifo else {}
        suffix = ".fifo" if fifo else ""
        resources[f"{consumer}Queue"] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": f"{name}-{consumer}{suffix}", **queue},
        }
        resources[f"{consumer}Dlq"] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": f"{name}-{consumer}-dlq{suffix}", **queue},
        }
        described = f"{c.OUTPUT_DESCRIPTION_PREFIX}{consumer}: "
        outputs[f"{prefix}QueueUrl"] = {
            "Value": {"Ref": f"{consumer}Queue"},
            "Description": described + "the queue",
        }
        outputs[f"{prefix}DlqUrl"] = {
            "Value": {"Ref": f"{consumer}Dlq"},
            "Description": described + "the DLQ",
        }
        outputs[f"{prefix}IdempotencyTableName"] = {
            "Value": f"{name}-{consumer}-records",
            "Description": described + "the table",
        }
        outputs[f"{prefix}ServiceName"] = {
            "Value": consumer.lower(),
            "Description": described + "the service",
        }
    cfn = local_client("cloudformation", endpoint)
    template = {"Resources": resources, "Outputs": outputs}
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
    sqs = local_client("sqs", endpoint)
    dlqs = {
        consumer: sqs.get_queue_url(QueueName=f"{name}-{consumer}-dlq{'.fifo' if fifo else ''}")[
            "QueueUrl"
        ]
        for consumer in consumers
    }
    return Stack(name, sqs, dlqs)


def _string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


def _quarantined(key: str, **more: str) -> dict[str, Any]:
    """The attributes once's quarantine writes on a DLQ copy."""
    attributes = {
        c.QUARANTINE_ATTR_KEY: _string(key),
        c.QUARANTINE_ATTR_REASON: _string(c.REASON_PERMANENT_ERROR),
        c.QUARANTINE_ATTR_ERROR: _string("PermanentError: card declined"),
        c.QUARANTINE_ATTR_MESSAGE_ID: _string(f"original-{key}"),
    }
    attributes.update({name: _string(value) for name, value in more.items()})
    return attributes


def _body(key: str) -> str:
    return json.dumps({"orderId": key, "card": SECRET})


def once(endpoint: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``once`` command as a team runs it, in its own project directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ONCE_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": LOCAL_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": LOCAL_SECRET_ACCESS_KEY,
    }
    return subprocess.run(
        [ONCE, *args, "--endpoint-url", endpoint],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _cells(line: str) -> list[str]:
    """A table row's cells, as printed into a pipe (one line a message)."""
    return [cell.strip() for cell in line.split("│")[1:-1]]


def _listed(path: Path) -> list[dict[str, Any]]:
    document = json.loads(path.read_text())
    return [m for consumer in document["consumers"] for m in consumer["messages"]]


def test_every_message_past_one_page_is_listed_once_and_left_visible(
    endpoint: str, tmp_path: Path
) -> None:
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    keys = [f"o-{n}" for n in range(25)]
    for key in keys:
        stack.sqs.send_message(
            QueueUrl=url, MessageBody=_body(key), MessageAttributes=_quarantined(key)
        )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--json", "dlq.json")

    assert run.returncode == 0, run.stderr
    listed = _listed(tmp_path / "dlq.json")
    assert sorted(m["key"] for m in listed) == sorted(keys)
    assert len({m["message_id"] for m in listed}) == 25
    after = queue_depth(stack.sqs, url)
    assert (after.visible, after.in_flight) == (25, 0)
    rows = {_cells(line)[0]: _cells(line) for line in run.stdout.splitlines() if "│" in line}
    for key in keys:  # one line a message in a pipe: the key, why, when, the original id
        _, reason, error, fence, receives, sent, _, _, original = rows[key]
        assert (reason, error, fence, receives) == (
            c.REASON_PERMANENT_ERROR,
            "PermanentError: card declined",
            "-",
            "1",
        )
        assert ISO_8601.fullmatch(sent) and original == f"original-{key}"
    assert "25 messages, none deleted" in run.stdout
    assert all(m["receive_count"] == 1 and ISO_8601.fullmatch(m["sent_at"]) for m in listed)


def test_no_body_value_is_shown_without_body(endpoint: str, tmp_path: Path) -> None:
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    stack.sqs.send_message(
        QueueUrl=url, MessageBody=_body("o-1"), MessageAttributes=_quarantined("o-1")
    )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--json", "dlq.json")

    assert run.returncode == 0, run.stderr
    assert SECRET not in run.stdout and SECRET not in (tmp_path / "dlq.json").read_text()
    assert "body" not in _listed(tmp_path / "dlq.json")[0]


def test_body_shows_each_message_s_body(endpoint: str, tmp_path: Path) -> None:
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    stack.sqs.send_message(
        QueueUrl=url, MessageBody=_body("o-1"), MessageAttributes=_quarantined("o-1")
    )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--body", "--json", "-")

    assert run.returncode == 0, run.stderr
    (listed,) = json.loads(run.stdout)["consumers"][0]["messages"]
    assert listed["body"] == _body("o-1")
    table = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--body")
    assert SECRET in table.stdout


def test_a_message_without_once_s_attributes_is_listed_with_dashes_and_why(
    endpoint: str, tmp_path: Path
) -> None:
    """SQS's own move at maxReceiveCount writes no once.* attribute; a message an upstream
    outbox sent carries its identity, the key of a SOURCE_KEY consumer."""
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    stack.sqs.send_message(QueueUrl=url, MessageBody="not json at all")
    identity = {
        c.OUTBOX_ATTR_SOURCE: _string("refunds#r-1@9552ed89e9144924b35b35d514cd9d09"),
        c.OUTBOX_ATTR_SEQ: {"DataType": "Number", "StringValue": "3"},
    }
    stack.sqs.send_message(QueueUrl=url, MessageBody="{}", MessageAttributes=identity)

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--json", "dlq.json")

    assert run.returncode == 0, run.stderr
    by_identity = {m["identity"]: m for m in _listed(tmp_path / "dlq.json")}
    plain = by_identity[None]
    assert (plain["key"], plain["reason"], plain["error"], plain["fence"]) == (None,) * 4
    assert by_identity["refunds#r-1@9552ed89e9144924b35b35d514cd9d09#3"]["key"] is None
    (plain_line,) = [line for line in run.stdout.splitlines() if plain["message_id"] in line]
    assert _cells(plain_line)[:4] == ["-", "-", "-", "-"]  # key, reason, error, fence
    assert "refunds#r-1@9552ed89e9144924b35b35d514cd9d09#3 (identity)" in run.stdout
    assert "not quarantined by once: SQS moved it after maxReceiveCount" in run.stdout
    assert "the key of a consumer keyed on SOURCE_KEY" in run.stdout
    assert queue_depth(stack.sqs, url).in_flight == 0


def test_a_fifo_dlq_is_listed_its_groups_released_and_what_it_hides_named(
    endpoint: str, tmp_path: Path
) -> None:
    """SQS hands out no more of a message group while some of it is in flight: a group of
    12 shows its first 10, says the rest are not listed, and keeps its order."""
    stack = _stack(endpoint, "Orders", fifo=True)
    url = stack.dlqs["Orders"]
    for n in range(12):
        stack.sqs.send_message(
            QueueUrl=url,
            MessageBody=_body(f"g-{n}"),
            MessageGroupId="customer-1",
            MessageDeduplicationId=f"g-{n}",
            MessageAttributes=_quarantined(f"g-{n}"),
        )
    stack.sqs.send_message(
        QueueUrl=url,
        MessageBody=_body("h-0"),
        MessageGroupId="customer-2",
        MessageDeduplicationId="h-0",
        MessageAttributes=_quarantined("h-0", **{c.QUARANTINE_ATTR_FENCE: "2"}),
    )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--json", "dlq.json")

    assert run.returncode == 0, run.stderr
    listed = {m["key"]: m for m in _listed(tmp_path / "dlq.json")}
    assert set(listed) == {f"g-{n}" for n in range(10)} | {"h-0"}
    assert listed["h-0"]["fence"] == 2
    assert "about 2 messages not listed: on a FIFO queue" in run.stdout
    after = queue_depth(stack.sqs, url)
    assert (after.visible, after.in_flight) == (13, 0)
    first = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert json.loads(first["Messages"][0]["Body"])["orderId"] == "g-0"


def test_every_consumer_of_the_stack_is_listed_and_an_empty_dlq_says_so(
    endpoint: str, tmp_path: Path
) -> None:
    stack = _stack(endpoint, "Orders", "Notices")
    stack.sqs.send_message(
        QueueUrl=stack.dlqs["Orders"], MessageBody="{}", MessageAttributes=_quarantined("o-1")
    )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name)

    assert run.returncode == 0, run.stderr
    assert f"once dlq: {stack.name} / Notices: the DLQ is empty" in run.stdout
    assert f"once dlq: {stack.name} / Orders (" in run.stdout and " o-1 " in run.stdout
    only = once(endpoint, tmp_path, "dlq", "--stack", stack.name, "--consumer", "Notices")
    assert "the DLQ is empty" in only.stdout and "o-1" not in only.stdout


def test_a_staged_write_refused_key_has_no_record_and_inspect_says_where_to_look(
    endpoint: str, tmp_path: Path
) -> None:
    """Under effects="staged" a refused commit writes nothing: the key is in the DLQ, with
    once.reason=WRITE_REFUSED, and ``once inspect`` says so instead of a bare "no record"."""
    stack = _stack(endpoint, "Orders")
    create_table(local_client("dynamodb", endpoint), f"{stack.name}-Orders-records")
    refused = _quarantined("w-1", **{c.QUARANTINE_ATTR_REASON: c.REASON_WRITE_REFUSED})
    stack.sqs.send_message(
        QueueUrl=stack.dlqs["Orders"], MessageBody="{}", MessageAttributes=refused
    )

    listed = once(endpoint, tmp_path, "dlq", "--stack", stack.name)
    inspected = once(endpoint, tmp_path, "inspect", "w-1", "--stack", stack.name)

    (row,) = [_cells(line) for line in listed.stdout.splitlines() if "│ w-1 " in line]
    assert row[:2] == ["w-1", c.REASON_WRITE_REFUSED]
    assert inspected.returncode == 10
    said = " ".join(inspected.stderr.split())
    assert "no record orders#w-1" in said and "once.reason=WRITE_REFUSED" in said
    assert "`once dlq`" in said


class _FailsOnSecondReceive:
    """An SQS client whose second ReceiveMessage fails, as a dropped connection would."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self._receives = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)

    def receive_message(self, **request: Any) -> Any:
        self._receives += 1
        if self._receives == 2:
            raise ConnectionResetError("the connection dropped")
        return self._sqs.receive_message(**request)


def test_a_listing_that_fails_midway_leaves_no_message_hidden(endpoint: str) -> None:
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    for n in range(15):
        stack.sqs.send_message(
            QueueUrl=url, MessageBody="{}", MessageAttributes=_quarantined(f"o-{n}")
        )

    with pytest.raises(ConnectionResetError):
        dlq.read(_FailsOnSecondReceive(stack.sqs), url)

    after = queue_depth(stack.sqs, url)
    assert (after.visible, after.in_flight) == (15, 0)


def test_a_refused_listing_names_the_permissions_it_needs(endpoint: str) -> None:
    sqs = local_client("sqs", endpoint)
    with pytest.raises(CliError, match="sqs:ReceiveMessage"):
        dlq.read(sqs, f"{endpoint}/123456789012/no-such-dlq")
