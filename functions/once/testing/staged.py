"""The staged mode's guard: a test fails when business code under ``effects="staged"`` changes
anything through AWS itself instead of staging it on the attempt.

Under ``effects="staged"`` no claim is made before business code runs: copies of a message in
flight at once may all run it, and only what it staged (``attempt.write``, ``attempt.send``)
is committed once. A ``PutItem``, a ``SendMessage`` or a ``Publish`` of its own would happen
once per copy. The kit cannot see every effect (an HTTP call to a payment API is invisible
to it), but it sees every AWS call made through botocore: during each invocation of such a
handler it wraps ``BaseClient._make_api_call``, and a call that changes something, made
while the business function's frame is on the calling thread's stack, is a violation. The
call still goes through (the test sees what AWS would do); ``deliver`` raises once the
invocation ended, naming each call.

A call changes something unless its operation reads: botocore names operations after AWS's
API actions, and AWS names its read actions ``Get*``, ``List*``, ``Describe*``, ``Query``,
``Scan``, ``BatchGet*``, ``TransactGet*``, ``Head*``... (the IAM action lists,
https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html,
class read and list actions so). ``ReceiveMessage`` changes a message's visibility: it is
not a read here. KMS's cryptographic calls change nothing and are allowed.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import CodeType
from typing import Any

from botocore.client import BaseClient

#: Operation-name prefixes of calls that read and change nothing.
READ_PREFIXES = (
    "Get",
    "List",
    "Describe",
    "Query",
    "Scan",
    "BatchGet",
    "TransactGet",
    "Head",
    "Lookup",
    "Search",
    "Select",
    "Filter",
    "Check",
)
#: Calls that are not reads by name but change nothing a retry would repeat.
UNCHANGING = frozenset(
    {"Decrypt", "Encrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext", "Sign", "Verify"}
)

#: The method every botocore client's operation goes through (botocore.client.BaseClient).
_PATCHED = "_make_api_call"
_lock = threading.RLock()  # one patch at a time; a nested guard chains to the outer one


def changes_something(operation: str) -> bool:
    """Whether a botocore operation (``PutItem``, ``GetItem``...) may change anything."""
    return operation not in UNCHANGING and not operation.startswith(READ_PREFIXES)


def _code_of(business: Any) -> CodeType | None:
    """The code object whose frame is on the stack while ``business`` runs: a function's,
    a bound method's, a ``functools.partial``'s function's, a callable object's ``__call__``."""
    for _ in range(100):
        if isinstance(business, functools.partial):
            business = business.func
            continue
        code = getattr(business, "__code__", None)
        if isinstance(code, CodeType):
            return code
        method = getattr(business, "__func__", None)
        if method is not None:
            business = method
            continue
        if not callable(business) or isinstance(business, type):
            return None
        business = type(business).__call__
    return None


def _from_business(code: CodeType) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@contextmanager
def guarded(business: Any) -> Iterator[list[str]]:
    """While the block runs: every AWS call that changes something, made from ``business``
    (on any thread), is listed in the yielded list as ``"<service> <operation>"``."""
    code = _code_of(business)
    seen: list[str] = []
    if code is None:  # no frame to recognise it by: nothing to check
        yield seen
        return
    with _lock:
        original = getattr(BaseClient, _PATCHED)

        def _make_api_call(client: Any, operation: str, params: Any) -> Any:
            if changes_something(operation) and _from_business(code):
                service = client.meta.service_model.service_name
                seen.append(f"{service} {operation}")
            return original(client, operation, params)

        setattr(BaseClient, _PATCHED, _make_api_call)
        try:
            yield seen
        finally:
            setattr(BaseClient, _PATCHED, original)


def violation(calls: list[str]) -> str:
    """What the test is told."""
    listed = ", ".join(dict.fromkeys(calls))
    return (
        f'business code under effects="staged" changed something through AWS itself: '
        f"{listed}. Under staged effects copies of a message may all run business code, so a "
        "call of its own happens once per copy: stage it on the attempt (attempt.write for "
        'DynamoDB, attempt.send for SQS and SNS), or use make_handler(effects="any") (the '
        "default), which claims the message before business code runs."
    )
