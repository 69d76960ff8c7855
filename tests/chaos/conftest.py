"""Engines for the chaos suite, started once per session inside this process's private
network namespace (``make test`` runs pytest under ``unshare -n``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from once import constants as c
from oncecli.aws import create_table, local_client
from oncecli.localcloud import engines
from proof.chaos.harness import Endpoints


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
        create_table(local_client("dynamodb", ddb.endpoint), "idempotency", key=c.ATTR_ID)
        yield {"endpoint": ddb.endpoint, "table": "idempotency"}


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    with engines.MotoServer() as moto:
        yield moto.endpoint


@pytest.fixture(scope="session")
def endpoints(dynamodb_local: dict, moto_server: str) -> Endpoints:
    return Endpoints(sqs=moto_server, dynamodb=dynamodb_local["endpoint"])
