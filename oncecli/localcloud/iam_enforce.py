"""The botocore hook: every AWS call of this process judged by a role before it is sent.

Why: the local cloud holds a worker's calls, once's and the business code's alike, to its
function's role, whichever client makes them (boto3's or botocore's, made before the role
was known or after). ``enforce`` wraps botocore's ``BaseClient._convert_to_request_dict``,
a step of every operation call, for as long as a role is enforced; a call the role refuses
is raised as botocore raises AWS's refusal (a ``ClientError`` of the service's modeled
class), never sent. What is judged, and how, is the role's (``iam_policy.RolePolicy``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar


class Refusal(Protocol):
    """A call refused: its error code, and the parsed response botocore raises it from."""

    @property
    def code(self) -> str: ...

    def response(self) -> dict[str, Any]: ...


class Judge(Protocol):
    """What judges each call (``iam_policy.RolePolicy``): None to let it through."""

    def authorize(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        *,
        signing_name: str | None = None,
        protocol: str = "json",
        region: str | None = None,
    ) -> Refusal | None: ...


J = TypeVar("J", bound=Judge)

_lock = threading.Lock()
_active: list[Judge] = []


def _judged(original: Callable[..., Any]) -> Callable[..., Any]:
    """botocore's ``BaseClient._convert_to_request_dict``, the step of every operation call
    that validates its parameters (after the events that build them) and serializes them:
    the call is judged once botocore accepted it, as AWS judges a request it received, and
    a refused one is raised as botocore raises a refusal, never sent. A presigned URL is
    not judged here: AWS judges it when it is used."""

    @functools.wraps(original)
    def _convert_to_request_dict(
        client: Any, api_params: Mapping[str, Any], operation_model: Any, *args: Any, **kwargs: Any
    ) -> Any:
        request_dict = original(client, api_params, operation_model, *args, **kwargs)
        context = kwargs.get("context") or {}
        if _active and not context.get("is_presign_request"):
            model = client.meta.service_model
            denial = _active[-1].authorize(
                model.service_name,
                operation_model.name,
                api_params,
                signing_name=model.signing_name,
                protocol=model.protocol,
                region=client.meta.region_name,
            )
            if denial is not None:
                # The modeled class of the code, if the service has one (SNS's
                # AuthorizationErrorException), as botocore's _make_api_call picks it.
                error_class = client.exceptions.from_code(denial.code)
                raise error_class(denial.response(), operation_model.name)
        return request_dict

    _convert_to_request_dict.__once_role__ = True  # type: ignore[attr-defined]
    return _convert_to_request_dict


@contextmanager
def enforce(policy: J) -> Iterator[J]:
    """Judge every AWS call of this process by ``policy`` until the block ends: every
    client's, boto3's or botocore's, made before or after (botocore's
    ``BaseClient._convert_to_request_dict``, a step of every operation call, is wrapped).
    A call that botocore itself refuses (a missing parameter) is refused as before."""
    import botocore.client

    base: Any = botocore.client.BaseClient  # its stubs leave the private step out
    with _lock:
        if not getattr(base._convert_to_request_dict, "__once_role__", False):
            base._convert_to_request_dict = _judged(base._convert_to_request_dict)
        _active.append(policy)
    try:
        yield policy
    finally:
        with _lock:
            _active.remove(policy)
            wrapped = base._convert_to_request_dict
            if not _active and getattr(wrapped, "__once_role__", False):
                base._convert_to_request_dict = wrapped.__wrapped__
