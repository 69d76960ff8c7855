"""How once builds its AWS clients: once per handler and process, from boto3's default
session when boto3 is loaded, with the options that keep a call's CPU low (no parameter
validation, a User-Agent header computed once, standard retries, short timeouts), and an SQS
client only when a record needs one. Each test pins a choice a later change could silently
undo; none measures a time."""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import boto3
import botocore.useragent
import pytest
from botocore.exceptions import ParamValidationError

import once.handler as handler_module
from once.models import Outcome
from once.payload import clean_text
from tests.conftest import outcomes, store_client

ORDER = {"orderId": "o-1", "qty": 1}


def _built(monkeypatch: Any) -> list[str]:
    """The services of the clients once builds from now on, in order."""
    built: list[str] = []
    real = handler_module._client

    def counting(service: str, config: Any) -> Any:
        built.append(service)
        return real(service, config)

    monkeypatch.setattr(handler_module, "_client", counting)
    return built


def test_the_table_client_is_built_once_for_every_invocation(
    monkeypatch, once_handler, spy, sqs_event
) -> None:
    built = _built(monkeypatch)
    handler = once_handler(spy)
    for n in range(3):
        handler(sqs_event([{"orderId": f"o-{n}"}]), None)
    assert built == ["dynamodb"]
    first = store_client(handler)
    handler(sqs_event([ORDER]), None)
    assert store_client(handler) is first


def test_a_batch_without_a_failure_builds_no_sqs_client(
    monkeypatch, once_handler, spy, sqs_event
) -> None:
    # Backoff is on and a DLQ is configured: both would use SQS, and neither is needed.
    built = _built(monkeypatch)
    handler = once_handler(spy)
    assert outcomes(handler, sqs_event([ORDER, {"orderId": "o-2"}])) == [Outcome.PROCESSED] * 2
    assert built == ["dynamodb"]


def test_the_sqs_client_is_built_at_its_first_use_and_shared(
    monkeypatch, once_handler, sqs_event
) -> None:
    def broken(body: Any, attempt: Any) -> None:
        raise RuntimeError("downstream")

    built = _built(monkeypatch)
    handler = once_handler(broken)
    # A transient failure: its visibility is changed (backoff), through SQS.
    assert outcomes(handler, sqs_event([ORDER])) == [Outcome.FAILED]
    assert outcomes(handler, sqs_event(["not json"])) == [Outcome.QUARANTINED]
    assert built == ["dynamodb", "sqs"]


def test_the_clients_come_from_boto3s_default_session_when_boto3_is_loaded(aws) -> None:
    # What a program sets or hooks on boto3's default session reaches once's clients.
    assert handler_module._session() is boto3.DEFAULT_SESSION._session


def test_the_clients_keep_their_options(once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy, max_workers=32)
    handler(sqs_event([ORDER]), None)
    client = store_client(handler)
    config = client.meta.config
    assert config.retries["mode"] == "standard"
    assert config.retries["total_max_attempts"] == 4  # max_attempts=3: three retries
    assert config.connect_timeout == handler_module._CONNECT_TIMEOUT_S
    assert config.read_timeout == handler_module._READ_TIMEOUT_S
    assert config.max_pool_connections == 32
    # No client-side parameter validation: a request botocore's validation would refuse
    # (no TableName) goes out to the service (whose mock fails on it in its own way).
    with pytest.raises(Exception) as raised:
        client.describe_table()
    assert not isinstance(raised.value, ParamValidationError)


def _user_agents(client: Any) -> list[str]:
    sent: list[str] = []

    def hook(request: Any, **_: Any) -> None:
        value = request.headers["User-Agent"]
        sent.append(value.decode() if isinstance(value, bytes) else value)

    client.meta.events.register("before-send.dynamodb", hook)
    return sent


def test_the_user_agent_is_not_rebuilt_per_call(once_handler, spy, sqs_event) -> None:
    handler = once_handler(spy)
    handler(sqs_event([ORDER]), None)
    sent = _user_agents(store_client(handler))
    with (
        mock.patch.object(
            botocore.useragent.UserAgentString,
            "_build_feature_metadata",
            side_effect=AssertionError("User-Agent rebuilt for a request"),
        ),
        mock.patch.object(
            botocore.useragent,
            "sanitize_user_agent_string_component",
            side_effect=AssertionError("User-Agent rebuilt for a request"),
        ),
    ):
        assert outcomes(handler, sqs_event([{"orderId": "o-2"}])) == [Outcome.PROCESSED]
    assert len(sent) == 2
    assert sent[0] == sent[1]
    assert sent[0].startswith(store_client(handler).meta.config.user_agent)


def test_the_user_agent_is_botocores_own_less_the_per_request_features(
    aws, once_handler, spy, sqs_event
) -> None:
    handler = once_handler(spy)
    handler(sqs_event([ORDER]), None)
    ours = _user_agents(store_client(handler))
    plain = boto3.client("dynamodb")
    theirs = _user_agents(plain)
    store_client(handler).describe_table(TableName="idempotency")
    plain.describe_table(TableName="idempotency")
    assert ours and theirs
    # botocore's own string carries the features the request used (``m/...``); ours is the
    # same string without them, the session's extras included once.
    assert ours[0] == re.sub(r" m/\S+", "", theirs[0])
    assert ours[0].count("Botocore/") == theirs[0].count("Botocore/")


def test_the_unsendable_characters_are_exactly_those_sqs_refuses() -> None:
    # SQS accepts #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF.
    def accepted(code: int) -> bool:
        return (
            code in (0x9, 0xA, 0xD)
            or 0x20 <= code <= 0xD7FF
            or 0xE000 <= code <= 0xFFFD
            or 0x10000 <= code <= 0x10FFFF
        )

    refused = [code for code in range(0x110000) if not accepted(code)]
    every = "".join(map(chr, range(0x110000)))
    escaped = clean_text(every)
    assert escaped.count("\\u") == len(refused)
    assert clean_text("".join(map(chr, refused))) == "".join(f"\\u{code:04x}" for code in refused)
