"""``once send | status | inspect | redrive``: operate a deployed stack or the local cloud.

Why they find everything through CloudFormation outputs: the stack is the single source of
the queue URLs and table names, so the commands never need them typed in. A deployed stack
is reached with the standard AWS credential chain and region (``--stack NAME``); the local
cloud with ``--endpoint-url`` (its stack is ``Once-local`` unless ``--stack`` says otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)
from rich.console import Console
from rich.table import Table

from once import constants as c
from oncecli.aws import (
    LOCAL_ACCESS_KEY_ID,
    LOCAL_REGION,
    LOCAL_SECRET_ACCESS_KEY,
    queue_depth,
    record_id,
    scan,
)
from oncecli.errors import CliError, EngineFailed, NoCredentials, StackNotFound
from oncecli.localcloud.template import STACK_NAME
from oncecli.redrive import move

_REQUIRED_OUTPUTS = ("QueueUrl", "DlqUrl", "IdempotencyTableName", "LedgerTableName")


class RecordNotFound(CliError):
    exit_code = 10


class UsageError(CliError):
    exit_code = 2


@dataclass
class Target:
    """The stack's resources and the clients to reach them."""

    stack: str
    outputs: dict[str, str]
    sqs: Any
    ddb: Any
    prefix: str

    def record_id(self, key: str) -> str:
        return record_id(self.prefix, key)


def _session(args: argparse.Namespace) -> boto3.Session:
    session = boto3.Session(region_name=args.region)
    if args.endpoint_url and session.get_credentials() is None:
        # A local engine accepts any credentials; do not ask the user for some.
        session = boto3.Session(
            region_name=args.region or LOCAL_REGION,
            aws_access_key_id=LOCAL_ACCESS_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET_ACCESS_KEY,
        )
    if args.endpoint_url and session.region_name is None:
        session = boto3.Session(
            region_name=LOCAL_REGION,
            aws_access_key_id=session.get_credentials().access_key,
            aws_secret_access_key=session.get_credentials().secret_key,
        )
    return session


def resolve(args: argparse.Namespace) -> Target:
    """Find the stack's outputs and build the clients, or fail with a clear exit code."""
    stack = args.stack or (STACK_NAME if args.endpoint_url else os.environ.get("ONCE_STACK"))
    if not stack:
        raise UsageError(
            "which stack? pass --stack NAME (a deployed stack) or --endpoint-url "
            "URL (the local cloud)"
        )
    config = Config(retries={"mode": "standard", "max_attempts": 3})
    try:
        session = _session(args)
        endpoint = args.endpoint_url
        cfn = session.client("cloudformation", endpoint_url=endpoint, config=config)
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        missing = [k for k in _REQUIRED_OUTPUTS if k not in outputs]
        if missing:
            raise StackNotFound(
                f"stack {stack} has no output {', '.join(missing)}: is it a once stack?"
            )
        prefix = c.DEFAULT_SERVICE_NAME
        if outputs.get("FunctionName"):
            try:
                env = (
                    session.client("lambda", endpoint_url=endpoint, config=config)
                    .get_function_configuration(FunctionName=outputs["FunctionName"])
                    .get("Environment", {})
                    .get("Variables", {})
                )
                prefix = env.get(c.ENV_SERVICE_NAME, prefix)
            except ClientError:
                pass  # no lambda:GetFunctionConfiguration: the default prefix will do
        ddb_endpoint = args.dynamodb_endpoint_url or endpoint
        return Target(
            stack,
            outputs,
            session.client("sqs", endpoint_url=endpoint, config=config),
            session.client("dynamodb", endpoint_url=ddb_endpoint, config=config),
            prefix,
        )
    except NoCredentialsError as error:
        raise NoCredentials(
            "no AWS credentials found (environment, ~/.aws, SSO or instance "
            "role); for the local cloud pass --endpoint-url"
        ) from error
    except NoRegionError as error:
        raise CliError("no AWS region: pass --region or set AWS_REGION") from error
    except EndpointConnectionError as error:
        raise EngineFailed(
            f"cannot reach {error.kwargs.get('endpoint_url')}: is the local cloud up (`once up`)?"
        ) from error
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        if "does not exist" in message:
            raise StackNotFound(f"stack {stack} not found ({message})") from error
        raise CliError(f"describing stack {stack}: {message}") from error


def _bodies(args: argparse.Namespace) -> list[str]:
    if args.count is not None:
        if args.count < 1:
            raise UsageError("--count must be at least 1")
        run = uuid.uuid4().hex[:8]
        return [
            json.dumps(
                {
                    "paymentId": f"cli-{run}-{n:05d}",
                    "account": f"acct-{n % 7:02d}",
                    "amount": 100 + n,
                }
            )
            for n in range(args.count)
        ]
    path: Path = args.file
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    return [line for line in path.read_text().splitlines() if line.strip()]


def send(args: argparse.Namespace, console: Console) -> int:
    target = resolve(args)
    bodies = _bodies(args)
    sent = 0
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(n), "MessageBody": b} for n, b in enumerate(bodies[start : start + 10])
        ]
        response = target.sqs.send_message_batch(
            QueueUrl=target.outputs["QueueUrl"], Entries=entries
        )
        sent += len(response.get("Successful", []))
        for failed in response.get("Failed", []):
            console.print(
                f"[red]not sent[/]: entry {start + int(failed['Id'])}: "
                f"{failed.get('Message', failed.get('Code'))}"
            )
    console.print(f"sent {sent} of {len(bodies)} messages to {target.outputs['QueueUrl']}")
    return 0 if sent == len(bodies) else 1


def status(args: argparse.Namespace, console: Console) -> int:
    target = resolve(args)
    queue = queue_depth(target.sqs, target.outputs["QueueUrl"])
    dlq = queue_depth(target.sqs, target.outputs["DlqUrl"])
    now_ms = int(time.time() * 1000)
    counts: dict[str, int] = {}
    for item in scan(target.ddb, target.outputs["IdempotencyTableName"]):
        state = item.get(c.ATTR_STATUS, {}).get("S", "?")
        lease = item.get(c.ATTR_LEASE_EXPIRES_AT, {}).get("N")
        if state == c.STATUS_IN_PROGRESS and lease and int(lease) < now_ms:
            state += " (lease expired)"
        counts[state] = counts.get(state, 0) + 1
    table = Table(title=f"once status: {target.stack}", title_justify="left")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("queue: waiting", str(queue.visible))
    table.add_row("queue: in flight", str(queue.in_flight))
    table.add_row("DLQ depth", str(dlq.total))
    for state in sorted(counts):
        table.add_row(f"records {state}", str(counts[state]))
    console.print(table)
    return 0


def inspect(args: argparse.Namespace, console: Console) -> int:
    target = resolve(args)
    record_id = target.record_id(args.key)
    item = target.ddb.get_item(
        TableName=target.outputs["IdempotencyTableName"],
        Key={c.ATTR_ID: {"S": record_id}},
        ConsistentRead=True,
    ).get("Item")
    if not item:
        raise RecordNotFound(f"no record {record_id} in {target.outputs['IdempotencyTableName']}")

    def value(name: str) -> str | None:
        raw = item.get(name)
        return None if raw is None else next(iter(raw.values()))

    table = Table(title=f"once inspect: {record_id}", title_justify="left", show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("status", value(c.ATTR_STATUS))
    table.add_row("fence", value(c.ATTR_FENCE))
    lease = value(c.ATTR_LEASE_EXPIRES_AT)
    if lease is not None:
        left = int(lease) - int(time.time() * 1000)
        table.add_row("lease left", f"{left / 1000:.1f} s" if left > 0 else "expired")
    else:
        table.add_row("lease left", "-")
    for label, name in (
        ("owner", c.ATTR_OWNER),
        ("message_id", c.ATTR_MESSAGE_ID),
        ("expires_at", c.ATTR_EXPIRES_AT),
        ("updated_at", c.ATTR_UPDATED_AT),
        ("result", c.ATTR_RESULT),
        ("error", c.ATTR_ERROR),
    ):
        if value(name) is not None:
            table.add_row(label, value(name))
    console.print(table)
    return 0


def _arn(sqs: Any, url: str) -> str:
    return str(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    )


def redrive(args: argparse.Namespace, console: Console) -> int:
    """StartMessageMoveTask where the engine has it; otherwise ``oncecli.redrive.move``."""
    target = resolve(args)
    sqs, dlq, source = target.sqs, target.outputs["DlqUrl"], target.outputs["QueueUrl"]
    try:
        request: dict[str, Any] = {"SourceArn": _arn(sqs, dlq), "DestinationArn": _arn(sqs, source)}
        if args.max:
            request["MaxNumberOfMessagesPerSecond"] = min(args.max, 500)
        handle = sqs.start_message_move_task(**request)["TaskHandle"]
        console.print(
            f"StartMessageMoveTask started (task {handle}); SQS moves the messages "
            "in the background"
        )
        return 0
    except (ClientError, BotoCoreError) as error:
        console.print(
            f"StartMessageMoveTask unavailable here ({_short(error)}); moving the "
            "messages one by one"
        )
    moved = move(sqs, dlq, source, args.max)
    console.print(f"moved {moved} messages from the DLQ back to the source queue")
    return 0


def _short(error: Exception) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or error)
    return type(error).__name__


def dispatch(args: argparse.Namespace, console: Console) -> int:
    commands = {"send": send, "status": status, "inspect": inspect, "redrive": redrive}
    return commands[args.command](args, console)
