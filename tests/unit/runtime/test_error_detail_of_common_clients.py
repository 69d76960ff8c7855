"""A stored error tells "refused" from "DNS" for the two most common ways a consumer calls a
carrier or an AWS service, ``requests`` and botocore, which raise their own error inside an
``except`` without ``from`` (the errno sits beneath, in ``__context__``, a ``reason``, or the
error they wrap): ``payload.why`` follows each (proved by the adversarial review of issue 42:
both were stored as their class alone). No value of the request (``card=4111``) is kept."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import botocore.config
import botocore.session
import pytest
import requests

from once.payload import describe_error


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stored(call: Callable[[], Any]) -> str:
    try:
        call()
    except Exception as error:  # what business code lets escape
        return describe_error(error)
    raise AssertionError("the call did not fail")


def sqs_client(endpoint: str) -> Any:
    return botocore.session.get_session().create_client(
        "sqs",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=5),
    )


def test_requests_refused_and_unresolvable_are_told_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = closed_port()
    refused = stored(lambda: requests.get(f"http://127.0.0.1:{port}/ship?card=4111", timeout=5))

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    unresolved = stored(lambda: requests.get("http://carrier.example/ship?card=4111", timeout=5))
    assert "4111" not in refused + unresolved
    assert refused != unresolved, (
        f"requests: refused stored as {refused!r}, unresolvable as {unresolved!r}: an operator "
        "cannot tell 'refused' from 'DNS'"
    )


def test_botocore_refused_and_unresolvable_are_told_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = closed_port()
    refused = stored(lambda: sqs_client(f"http://127.0.0.1:{port}").list_queues())

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    unresolved = stored(lambda: sqs_client("http://sqs.example").list_queues())
    assert refused != unresolved, (
        f"botocore: refused stored as {refused!r}, unresolvable as {unresolved!r}: an operator "
        "cannot tell 'refused' from 'DNS'"
    )
