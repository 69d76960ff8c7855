"""``make demo`` on DynamoDB Local (``ARGS="--engine dynamodb-local"``)."""

from __future__ import annotations

import pytest

from tests.localcloud.demo_run import check, demo


@pytest.mark.dynamodb_local
def test_demo_on_dynamodb_local(tmp_path):
    """The CLI enters a private network namespace itself; if unshare is not permitted here,
    this fails (exit code 7) with the CLI's message: it never skips."""
    report = demo(tmp_path, "--engine", "dynamodb-local")
    check(report)
    assert report["engine"] == "dynamodb-local"
