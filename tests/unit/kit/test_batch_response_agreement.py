"""The test kit (``once_env``) and the local cloud decide alike what Lambda deletes, for any
value a handler returns: both read it by ``once.batchresponse``, the kit in the process
(``judge``), the local cloud through its worker's answer (``invocation.answer_of``) and the
mapping's reading of it (``mapping.response_of``)."""

from __future__ import annotations

import functools
import math
import warnings
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import make_handler
from once.batchresponse import decide, judge
from once.testing import OnceEnv
from oncecli.localcloud.invocation import answer_of
from oncecli.localcloud.mapping import response_of

#: A message id of the batch, by its position ("@0"), substituted once the ids are known.
PLACES = ["@0", "@1", "@2"]

identifiers = st.one_of(
    st.sampled_from(PLACES), st.sampled_from(["", "zz", "m1"]), st.none(), st.integers(-2, 2)
)
entries = st.one_of(
    st.fixed_dictionaries({"itemIdentifier": identifiers}),
    st.fixed_dictionaries({"itemIdentifer": identifiers}),  # a bad key name
    st.dictionaries(st.sampled_from(["itemIdentifier", "why"]), identifiers, max_size=2),
    identifiers,
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(PLACES),
    st.decimals(allow_nan=True, allow_infinity=False),
    st.binary(max_size=5),
    st.sampled_from([b'{"batchItemFailures": []}', b"{}", b"null", frozenset({1})]),
)
anything = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["batchItemFailures", "itemIdentifier"]), st.text(max_size=3)
            ),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=8,
)
responses = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {"batchItemFailures": st.one_of(st.none(), st.lists(entries, max_size=4))}
    ),
    st.fixed_dictionaries(
        {
            "batchItemFailures": st.lists(
                st.fixed_dictionaries({"itemIdentifier": st.sampled_from(PLACES)}), max_size=4
            )
        }
    ),
    anything,
)


def placed(template: Any, ids: list[str]) -> Any:
    """``template`` with each ``"@i"`` the batch's i-th message id."""
    if isinstance(template, str) and template in PLACES:
        return ids[PLACES.index(template)]
    if isinstance(template, list):
        return [placed(item, ids) for item in template]
    if isinstance(template, dict):
        return {key: placed(value, ids) for key, value in template.items()}
    return template


def local_cloud(ids: list[str], returned: Any, report: bool = True) -> Any:
    """What the local cloud decides: the worker's answer, read by the mapping."""
    response, error = response_of(*answer_of(returned))
    return decide(ids, response, error=error, report_batch_item_failures=report)


def same(one: Any, other: Any) -> bool:
    return (one.delete, one.retry, one.full_failure) == (
        other.delete,
        other.retry,
        other.full_failure,
    )


@settings(max_examples=400, deadline=None)
@given(template=responses, report=st.booleans())
def test_the_kit_and_the_local_cloud_decide_alike_for_any_response(
    template: Any, report: bool
) -> None:
    ids = ["m1", "m2", "m3"]
    returned = placed(template, ids)
    assert same(
        judge(ids, returned, report_batch_item_failures=report), local_cloud(ids, returned, report)
    )


def business(body: dict[str, Any], attempt: Any) -> None:
    if body.get("fail"):
        raise ConnectionError("downstream is down")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=responses, fails=st.lists(st.booleans(), min_size=3, max_size=3))
def test_once_env_deletes_what_the_local_cloud_deletes(template: Any, fails: list[bool]) -> None:
    """End to end through ``deliver``: a wrapper returns the drawn response around the once
    handler; the kit leaves for redelivery exactly what the local cloud would."""
    handler = make_handler(business, key="orderId")
    seen: list[Any] = []

    @functools.wraps(handler)
    def lambda_handler(event: dict[str, Any], context: Any) -> Any:
        handler(event, context)
        returned = placed(template, [r["messageId"] for r in event["Records"]])
        seen.append(returned)
        return returned

    bodies = [{"orderId": f"o-{n}", "fail": fail} for n, fail in enumerate(fails)]
    with OnceEnv() as env, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        delivery = env.deliver(lambda_handler, bodies)
    expected = local_cloud(delivery.message_ids, seen[0])
    assert delivery.batch_item_failures == list(expected.retry)


def test_odd_returns_decide_alike() -> None:
    """NaN (no JSON), a Decimal (a number), bytes (the payload as they are) and what cannot
    be marshalled (a function error), each pinned besides the property's draws."""
    ids = ["m1", "m2", "m3"]
    for returned in (math.nan, Decimal("2.5"), b"null", {"batchItemFailures": frozenset()}):
        assert same(judge(ids, returned), local_cloud(ids, returned))
