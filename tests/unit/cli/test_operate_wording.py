"""What the operating commands say: counts in the right number, hints only where they apply,
and a FIFO queue's message groups asked for rather than refused by SQS."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from oncecli import operate
from oncecli.errors import UsageError


@given(st.integers(0, 10**6))
def test_a_count_of_messages_is_singular_for_one_only(count: int) -> None:
    said = operate._messages(count)
    assert said == (f"{count} message" if count == 1 else f"{count} messages")


class FakeSqs:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict:
        self.entries.extend(Entries)
        return {"Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}"} for e in Entries]}


def _send(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, group: str | None):
    sqs = FakeSqs()
    target = operate.Target("Orders", {"QueueUrl": url}, sqs, None, "orders")
    monkeypatch.setattr(operate, "resolve", lambda args: target)
    bodies = tmp_path / "orders.jsonl"
    bodies.write_text(
        '{"orderId": "o-1", "customerId": "c-1"}\n{"orderId": "o-2", "customerId": "c-2"}\n'
    )
    args = argparse.Namespace(count=None, file=bodies, key="orderId", group=group, json_path=None)
    code = operate.send(args, Console(file=io.StringIO()))
    return code, sqs.entries


def test_send_to_a_fifo_queue_asks_where_the_message_group_is(monkeypatch, tmp_path) -> None:
    with pytest.raises(UsageError, match="--group"):
        _send(monkeypatch, tmp_path, "https://sqs/q.fifo", None)


def test_send_to_a_fifo_queue_takes_each_body_s_group(monkeypatch, tmp_path) -> None:
    code, entries = _send(monkeypatch, tmp_path, "https://sqs/q.fifo", "customerId")
    assert code == 0
    assert [e["MessageGroupId"] for e in entries] == ["c-1", "c-2"]


def test_send_to_a_standard_queue_sets_no_group(monkeypatch, tmp_path) -> None:
    code, entries = _send(monkeypatch, tmp_path, "https://sqs/q", None)
    assert code == 0 and all("MessageGroupId" not in e for e in entries)
