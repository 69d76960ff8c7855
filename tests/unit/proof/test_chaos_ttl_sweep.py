"""The harness's TTL sweep deletes what DynamoDB's TTL would, and nothing live.

Between the sweep's scan and its delete a consumer may claim an expired record again; the
delete must then leave it, as DynamoDB's TTL leaves an item updated out of its expiry.
Otherwise the harness itself removes a live lease and lets a second owner in, and the run
reports a violation no consumer caused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from proof.chaos.harness import _ttl_sweep

TABLE = "records"
TTL = "expires_at"


@pytest.fixture(scope="module")
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


class ClaimsDuringTheSweep:
    """The client the sweep sees: after its scan, and before any delete, the items in
    ``reclaimed`` are written again with an expiry in the future, as a claim does."""

    def __init__(self, client: Any, reclaimed: set[str], future: int) -> None:
        self._client = client
        self._reclaimed = reclaimed
        self._future = future
        self.exceptions = client.exceptions

    def get_paginator(self, name: str) -> Any:
        real = self._client.get_paginator(name)
        outer = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
                pages = list(real.paginate(**kwargs))  # the scan is over
                for key in outer._reclaimed:
                    outer._client.put_item(
                        TableName=TABLE,
                        Item={"id": {"S": key}, TTL: {"N": str(outer._future)}},
                    )
                yield from pages

        return Paginator()

    def delete_item(self, **kwargs: Any) -> Any:
        return self._client.delete_item(**kwargs)


def _keys(client: Any) -> set[str]:
    return {item["id"]["S"] for item in client.scan(TableName=TABLE)["Items"]}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    expired=st.sets(st.sampled_from("abcdefgh"), max_size=8),
    live=st.sets(st.sampled_from("ijklmn"), max_size=6),
    data=st.data(),
)
def test_a_sweep_deletes_only_what_is_still_expired_when_it_deletes(
    ddb: Any, expired: set[str], live: set[str], data: st.DataObject
) -> None:
    for key in _keys(ddb):
        ddb.delete_item(TableName=TABLE, Key={"id": {"S": key}})
    now = int(time.time())
    for key in expired:
        ddb.put_item(TableName=TABLE, Item={"id": {"S": key}, TTL: {"N": str(now - 5)}})
    for key in live:
        ddb.put_item(TableName=TABLE, Item={"id": {"S": key}, TTL: {"N": str(now + 600)}})
    reclaimed = data.draw(st.sets(st.sampled_from(sorted(expired))) if expired else st.just(set()))

    swept = _ttl_sweep(ClaimsDuringTheSweep(ddb, reclaimed, now + 600), TABLE, TTL)

    assert swept == len(expired - reclaimed)
    assert _keys(ddb) == live | reclaimed
