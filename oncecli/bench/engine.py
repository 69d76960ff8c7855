"""The engines for one benchmark run, through the local cloud's ``oncecli.localcloud.engines``.

The benchmarks need each engine in its own process (so that the engine's CPU is not the
consumer's GIL), reachable on 127.0.0.1. DynamoDB Local cannot choose its listen address,
so it is started only inside a private network namespace: ``oncecli.bench`` runs each
engine's measurements under ``unshare -n`` (see ``netns_argv``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from oncecli.localcloud.engines import DynamoDBLocal, Engine, MotoServer, in_private_netns

ENGINES = ("moto", "dynamodb-local")
CREDENTIALS = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
}

__all__ = ["ENGINES", "Engine", "create_table", "in_private_netns", "netns_argv", "running"]


@contextmanager
def running(name: str) -> Iterator[Engine]:
    """Start the engine in its own process for the duration of the block."""
    os.environ.update({k: v for k, v in CREDENTIALS.items() if k not in os.environ})
    engines = {"moto": MotoServer, "dynamodb-local": DynamoDBLocal}
    if name not in engines:
        raise ValueError(f"unknown engine {name!r}; one of {ENGINES}")
    with engines[name]() as engine:
        yield engine


def netns_argv(argv: list[str]) -> list[str]:
    """``argv`` wrapped to run in a new network namespace with loopback up."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        raise RuntimeError("`unshare` and `ip` are needed to run DynamoDB Local")
    return [unshare, "-n", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh", *argv]


def create_table(client: Any, name: str) -> None:
    """An on-demand table keyed by ``id`` (the shape of once's, Powertools' and naive's)."""
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
