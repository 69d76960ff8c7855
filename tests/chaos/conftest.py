"""Engines for the chaos suite, started once per session inside this process's private
network namespace (``make test`` runs pytest under ``unshare -n``)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from once import constants as c
from oncecli.localcloud import engines


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[dict]:
    if not engines.in_private_netns():
        pytest.fail(
            "DynamoDB Local cannot choose its listen address, so these tests must run "
            "inside a private network namespace: run them through `make test`, or "
            "`unshare -n sh -c 'ip link set lo up && .venv/bin/python -m pytest ...'`. "
            "If unshare is not permitted on this machine, they cannot run here."
        )
    with engines.DynamoDBLocal() as ddb:
        client = boto3.client("dynamodb", endpoint_url=ddb.endpoint)
        client.create_table(
            TableName="idempotency",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": c.ATTR_ID, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": c.ATTR_ID, "AttributeType": "S"}],
        )
        yield {"endpoint": ddb.endpoint, "table": "idempotency"}


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    with engines.MotoServer() as moto:
        yield moto.endpoint
