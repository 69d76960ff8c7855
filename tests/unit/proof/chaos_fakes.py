"""Fakes the chaos harness's unit tests share: the harness's monotonic clock, and a DynamoDB
client whose engine is a botocore hook, so that no call leaves the process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.config import Config

from proof.chaos import harness


class Clock:
    """The harness's ``time.monotonic``, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_monotonic(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Put the harness and the workers' hooks (one ``time`` module) on a ``Clock``."""
    fake = Clock()
    monkeypatch.setattr(harness.time, "monotonic", fake)
    return fake


class _Body:
    def stream(self, **_: Any) -> Iterator[bytes]:
        yield b"{}"

    def read(self, *_: Any) -> bytes:
        return b"{}"


def engine(request: Any, **_: Any) -> AWSResponse:
    """DynamoDB, answering every call the injector lets through (register it after the
    injector's hooks: the first hook that answers wins)."""
    return AWSResponse(request.url, 200, HTTPHeaders.from_dict({}), _Body())


def dynamodb_client() -> Any:
    """A DynamoDB client that tries each call once, for an endpoint it never reaches."""
    return boto3.client(
        "dynamodb",
        endpoint_url="http://127.0.0.1:9",  # never reached: the engine is a hook
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )
