"""``once event`` refuses a message no queue would take: a body with a character SQS refuses,
or over 1 MiB with its attributes (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
Proved by the adversarial review of issue 42 (both were written, exit 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from once import sendrules as rules

ONCE = str(Path(sys.executable).with_name("once"))


def once_event(tmp_path: Path, body: str, *extra: str) -> subprocess.CompletedProcess[str]:
    bodies = tmp_path / "bodies.jsonl"
    bodies.write_text(body + "\n")
    return subprocess.run(
        [ONCE, "event", "--file", str(bodies), *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")},
    )


def test_an_attribute_that_takes_the_message_past_1_mib_is_refused(tmp_path: Path) -> None:
    # A body SQS takes by itself: exactly 1 MiB.
    body = json.dumps({"orderId": "o-1", "pad": ""})
    body = body[:-2] + "x" * (rules.SQS_MESSAGE_MAX_BYTES - len(body)) + body[-2:]
    assert len(body.encode()) == rules.SQS_MESSAGE_MAX_BYTES
    alone = once_event(tmp_path, body)
    assert alone.returncode == 0, alone.stderr
    with_attribute = once_event(tmp_path, body, "--attribute", "color=red")
    size = rules.request_message_bytes(
        body, {"color": {"DataType": "String", "StringValue": "red"}}
    )
    assert size > rules.SQS_MESSAGE_MAX_BYTES
    assert with_attribute.returncode == 2, (
        f"once event wrote a message of {size} bytes (SQS takes {rules.SQS_MESSAGE_MAX_BYTES}) "
        f"and exited {with_attribute.returncode}: an event Lambda never delivers"
    )


def test_a_body_sqs_would_refuse_is_refused(tmp_path: Path) -> None:
    body = '{"orderId": "o-1", "note": "a\x01b"}'  # a raw U+0001, as a producer's bug sends it
    assert not rules.text_taken(body, to_topic=False)  # SQS rejects U+0001 in a body
    written = once_event(tmp_path, body, "--attribute", "color=red")
    assert written.returncode == 2, (
        "once event wrote an event whose body holds U+0001, which SendMessage rejects, and "
        f"exited {written.returncode}"
    )
