"""On demand and with provisioned concurrency, a handler is built in Lambda's INIT (its
module's import), where Lambda runs it at INIT's CPU, not at the first record's share of the
memory size's; calling no AWS API, and never failing INIT. Lambda names the INIT it runs in
``AWS_LAMBDA_INITIALIZATION_TYPE`` (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime);
a SnapStart INIT is primed by the snapshot's hook instead (test_snapstart.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from once import constants as c
from once import snapstart
from once.handler import make_handler


def built(handler: Any) -> bool:
    return handler._processor is not None


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(c.ENV_TABLE_NAME, "once")
    monkeypatch.setenv(c.ENV_SERVICE_NAME, "orders")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # No endpoint answers: building the clients must call nothing.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


@pytest.mark.parametrize("init", ["on-demand", "provisioned-concurrency"])
def test_a_handler_made_in_init_is_built_there(
    init: str, configured: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(snapstart.INIT_TYPE_ENV, init)
    assert built(make_handler(lambda body, attempt: None, key="id"))


@pytest.mark.parametrize("init", [None, "snap-start"])
def test_outside_lambda_or_under_snapstart_nothing_is_built_at_import(
    init: str | None, configured: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if init is None:
        monkeypatch.delenv(snapstart.INIT_TYPE_ENV, raising=False)
    else:
        monkeypatch.setenv(snapstart.INIT_TYPE_ENV, init)
    assert not built(make_handler(lambda body, attempt: None, key="id"))


def test_an_incomplete_configuration_is_logged_and_init_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(snapstart.INIT_TYPE_ENV, "on-demand")
    monkeypatch.delenv(c.ENV_TABLE_NAME, raising=False)
    monkeypatch.delenv(c.ENV_SERVICE_NAME, raising=False)
    with caplog.at_level(logging.WARNING):
        handler = make_handler(lambda body, attempt: None, key="id")
    assert not built(handler)
    assert "not primed at init: configuration incomplete" in caplog.text


def test_a_priming_that_raises_is_logged_and_init_goes_on(
    configured: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(snapstart.INIT_TYPE_ENV, "on-demand")
    monkeypatch.setenv(c.ENV_BACKOFF, "not a backoff")
    with caplog.at_level(logging.WARNING):
        handler = make_handler(lambda body, attempt: None, key="id")
    assert not built(handler)
    assert "not primed at init" in caplog.text
    assert [r for r in caplog.records if getattr(r, "error", None) == "ValueError"]
