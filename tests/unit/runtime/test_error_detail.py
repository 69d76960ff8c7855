"""A stored error says why without a payload value: AWS's code and HTTP status, an HTTP status,
an errno by name, a ``URLError``'s reason, the error it was raised from; the message only of
``PermanentError`` and ``TransientError``, which business code writes for operators. An
operator tells "carrier down" from "DNS" from "refused" in ``once inspect`` and the DLQ's
``once.error``; nothing a message, a URL, a host or a server's reason phrase says is kept."""

from __future__ import annotations

import errno
import socket
import urllib.error
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from once import PermanentError, TransientError
from once import constants as c
from once.payload import _CAUSES, describe_error


class CarrierError(Exception):
    pass


def raised_from(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


def client_error(code: str, status: int, message: str = "x") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutItem",
    )


class Response:
    """A ``requests`` response: its status is kept, nothing else of it."""

    status_code = 502
    text = "upstream said card 4111"


class RequestsHTTPError(OSError):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.response = Response()


@pytest.mark.parametrize(
    ("error", "stored"),
    [
        (
            urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "refused")),
            "URLError (reason ConnectionRefusedError (ECONNREFUSED))",
        ),
        (
            urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "not known")),
            "URLError (reason gaierror (EAI_NONAME))",
        ),
        (urllib.error.URLError(TimeoutError("timed out")), "URLError (reason TimeoutError)"),
        (
            urllib.error.HTTPError("https://carrier/ship?card=4111", 503, "Busy", {}, None),  # type: ignore[arg-type]
            "HTTPError (HTTP 503)",
        ),
        (client_error("ThrottlingException", 400), "ClientError (ThrottlingException, HTTP 400)"),
        (
            RequestsHTTPError("502 for url https://carrier/?card=4111"),
            "RequestsHTTPError (HTTP 502)",
        ),
        (OSError(errno.EHOSTUNREACH, "no route"), "OSError (EHOSTUNREACH)"),
        (
            raised_from(
                CarrierError("carrier failed for card 4111"),
                urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "refused")),
            ),
            "CarrierError (from URLError (reason ConnectionRefusedError (ECONNREFUSED)))",
        ),
        (TransientError("carrier down"), "TransientError: carrier down"),
        (PermanentError("quantity must be positive"), "PermanentError: quantity must be positive"),
        (ValueError("invalid literal for int() with base 10: '4111'"), "ValueError"),
        (urllib.error.URLError("unknown url type: card-4111"), "URLError"),
    ],
)
def test_a_stored_error_says_why_in_codes_and_names(error: BaseException, stored: str) -> None:
    assert describe_error(error) == stored


def test_a_chain_of_causes_is_followed_a_few_errors_deep_and_no_further() -> None:
    error: BaseException = OSError(errno.ECONNRESET, "reset")
    for _ in range(10):
        error = raised_from(CarrierError("again"), error)
    stored = describe_error(error)
    assert stored.count("from CarrierError") == _CAUSES and "ECONNRESET" not in stored
    assert len(stored) <= c.ERROR_MAX_CHARS


_SECRET = st.text(min_size=8, max_size=40).map(lambda s: "SECRET" + s)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(secret=_SECRET, status=st.integers(0, 1000), number=st.integers(-20, 200))
def test_no_message_url_host_or_reason_phrase_is_ever_kept(
    secret: str, status: int, number: int
) -> None:
    """Property: whatever text an error holds (its message, its URL, its reason phrase, its
    strerror, AWS's message), none of it is stored, at any depth of the chain; only the
    classes, codes and numbers are."""
    errors: list[BaseException] = [
        ValueError(secret),
        OSError(number, secret),
        urllib.error.URLError(secret),
        urllib.error.URLError(OSError(number, secret)),
        urllib.error.HTTPError(secret, status, secret, {}, None),  # type: ignore[arg-type]
        client_error("ValidationException", status, secret),
        RequestsHTTPError(secret),
        socket.gaierror(number, secret),
    ]
    for error in errors:
        chained: Any = raised_from(CarrierError(secret), error)
        for candidate in (error, chained):
            assert "SECRET" not in describe_error(candidate)
