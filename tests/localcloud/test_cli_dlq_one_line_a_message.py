"""``once dlq`` piped keeps each message on one line, a line break in an operator's
``PermanentError`` message or a key written as ``\\n`` (proved by the adversarial review of
issue 42: the row was split, and a grep on the key lost the reason and the error)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from once import constants as c
from oncecli.localcloud.engines import MotoServer
from tests.localcloud.test_cli_dlq import _stack, _string, once


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with MotoServer() as moto:
        yield moto.endpoint


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("o-17", "PermanentError: declined by the bank\nsee the review ticket"),
        ("o-18\r\nline", "PermanentError: declined"),
    ],
    ids=["newline in the operator's error", "newline in the key"],
)
def test_each_dlq_message_is_one_line_in_a_pipe(
    endpoint: str, tmp_path: Path, key: str, error: str
) -> None:
    stack = _stack(endpoint, "Orders")
    url = stack.dlqs["Orders"]
    sent = stack.sqs.send_message(
        QueueUrl=url,
        MessageBody="{}",
        MessageAttributes={
            c.QUARANTINE_ATTR_KEY: _string(key),
            c.QUARANTINE_ATTR_REASON: _string(c.REASON_PERMANENT_ERROR),
            c.QUARANTINE_ATTR_ERROR: _string(error),
            c.QUARANTINE_ATTR_MESSAGE_ID: _string("original-1"),
        },
    )

    run = once(endpoint, tmp_path, "dlq", "--stack", stack.name)

    assert run.returncode == 0, run.stderr
    (row,) = [line for line in run.stdout.splitlines() if sent["MessageId"] in line]
    rows = [line for line in run.stdout.splitlines() if "│" in line]  # the header is ┃
    assert len(rows) == 1, f"one message, printed on {len(rows)} lines in a pipe:\n{run.stdout}"
    last_words = (key + " " + error).split()[-1]
    assert last_words in row and c.REASON_PERMANENT_ERROR in row, (
        f"the message's row is split across lines in a pipe:\n{run.stdout}"
    )
