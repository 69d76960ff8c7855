"""``once send | status | inspect | redrive``: operate a deployed stack or the local cloud.

Why they find everything through CloudFormation outputs: the stack is the single source of
the queue URLs and table names, so the commands never need them typed in. A deployed stack
is reached with the standard AWS credential chain and region (``--stack NAME``); the local
cloud with ``--endpoint-url`` (``--stack`` names one of its stacks; it may be left out when
the local cloud runs one once stack). ``status`` also reads the outcome counts the
function's EMF lines published to CloudWatch (locally, ``localcloud.emf`` keeps them), and
each of the stack's alarms with its state and reason, as ``DescribeAlarms`` gives them: on
AWS, CloudWatch evaluates them; locally, the local cloud does (``localcloud.alarms``), and
``status`` names those it does not (on AWS's own metrics). ``status`` only reads, on both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import jmespath
import jmespath.parser
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
)
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from once import constants as c
from once.models import Record
from oncecli.aws import (
    LOCAL_ACCESS_KEY_ID,
    LOCAL_REGION,
    LOCAL_SECRET_ACCESS_KEY,
    STACK_ENV,
    queue_depth,
    record_id,
    scan,
)
from oncecli.consumers import choose, consumers_in
from oncecli.errors import (
    CliError,
    EngineFailed,
    NoCredentials,
    RecordNotFound,
    StackNotFound,
    UsageError,
)
from oncecli.redrive import move


@dataclass
class Target:
    """The stack's resources and the clients to reach them."""

    stack: str
    #: The consumer's outputs under the plain keys (``once.constants.OUTPUT_KEYS``).
    outputs: dict[str, str]
    sqs: Any
    ddb: Any
    prefix: str
    #: Why the prefix is a guess, when the stack does not say it (no ``ServiceName`` output).
    prefix_note: str | None = None
    #: Where the function's metrics are (None: not asked for).
    cloudwatch: Any = None
    lambda_: Any = None
    cfn: Any = None
    #: CloudWatch Logs, where the function's lines are (``once logs``).
    logs: Any = None
    #: Whether it is the local cloud (``--endpoint-url``), whose alarms on AWS's own
    #: metrics are not evaluated.
    local: bool = False
    #: The consumer's name (its construct id; ``""`` for a stack's one unnamed consumer).
    consumer: str = ""
    #: The stack's consumers, each name with its outputs.
    siblings: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """The stack, and the consumer when the stack has several."""
        return f"{self.stack} / {self.consumer}" if len(self.siblings) > 1 else self.stack

    def record_id(self, key: str) -> str:
        return record_id(self.prefix, key)


def region_of(args: argparse.Namespace) -> str | None:
    """The region to work in, chosen as the AWS CLI does: ``--region``, then ``AWS_REGION``,
    then boto3's own chain (``AWS_DEFAULT_REGION``, then the profile: None here). With
    ``--endpoint-url`` the local cloud's region, unless ``--region`` says otherwise, so
    that a profile naming another region does not hide the local stack."""
    if args.region:
        return str(args.region)
    if args.endpoint_url:
        return LOCAL_REGION
    return os.environ.get("AWS_REGION") or None


def _session(args: argparse.Namespace) -> boto3.Session:
    session = boto3.Session(region_name=region_of(args))
    if args.endpoint_url and session.get_credentials() is None:
        # A local engine accepts any credentials; do not ask the user for some.
        session = boto3.Session(
            region_name=session.region_name,
            aws_access_key_id=LOCAL_ACCESS_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET_ACCESS_KEY,
        )
    return session


def _once_stacks(cfn: Any) -> list[str]:
    """The stacks at an endpoint whose outputs make them once stacks."""
    names = []
    for page in cfn.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            if consumers_in(stack.get("Outputs", [])):
                names.append(str(stack["StackName"]))
    return sorted(names)


def _stack_name(args: argparse.Namespace, cfn: Any) -> str:
    """``--stack``, else ``$ONCE_STACK``; with ``--endpoint-url``, else the local cloud's
    one once stack."""
    stack = args.stack or os.environ.get(STACK_ENV)
    if stack:
        return str(stack)
    if not args.endpoint_url:
        raise UsageError(
            f"which stack? pass --stack NAME or set {STACK_ENV} (a deployed stack), or pass "
            "--endpoint-url URL (the local cloud)"
        )
    found = _once_stacks(cfn)
    if len(found) == 1:
        return found[0]
    if not found:
        raise StackNotFound(
            f"the local cloud at {args.endpoint_url} runs no once stack: is `once up` running "
            "in your project, and does each stack call once_cdk's add_cli_outputs?"
        )
    raise UsageError(f"which stack? the local cloud runs {', '.join(found)}: pass --stack NAME")


def resolve(args: argparse.Namespace) -> Target:
    """Find the consumer's outputs (``--consumer``, or the stack's only one) and build the
    clients, or fail with a clear exit code."""
    target = _resolve(args)
    name, outputs = choose(target.stack, target.siblings, getattr(args, "consumer", None))
    return _consumer(target, name, outputs)


def resolve_each(args: argparse.Namespace) -> list[Target]:
    """The consumer ``--consumer`` names, else every consumer of the stack."""
    target = _resolve(args)
    if getattr(args, "consumer", None) is not None:
        return [resolve(args)]
    return [_consumer(target, name, outputs) for name, outputs in sorted(target.siblings.items())]


def _consumer(target: Target, name: str, outputs: dict[str, str]) -> Target:
    prefix, note = _record_prefix(target.stack, outputs, target.lambda_)
    return replace(target, outputs=outputs, consumer=name, prefix=prefix, prefix_note=note)


def _resolve(args: argparse.Namespace) -> Target:
    """The stack's consumers and the clients to reach them."""
    stack = args.stack or ""
    config = Config(retries={"mode": "standard", "max_attempts": 3})
    try:
        session = _session(args)
        endpoint = args.endpoint_url
        cfn = session.client("cloudformation", endpoint_url=endpoint, config=config)
        stack = _stack_name(args, cfn)
        stacks = cfn.describe_stacks(StackName=stack)["Stacks"]
        found = consumers_in(stacks[0].get("Outputs", []))
        if not found:
            choose(stack, found, None)  # raises: says what a once stack has
        ddb_endpoint = args.dynamodb_endpoint_url or endpoint
        return Target(
            stack,
            {},
            session.client("sqs", endpoint_url=endpoint, config=config),
            session.client("dynamodb", endpoint_url=ddb_endpoint, config=config),
            "",
            None,
            session.client("cloudwatch", endpoint_url=endpoint, config=config),
            session.client("lambda", endpoint_url=endpoint, config=config),
            cfn,
            session.client("logs", endpoint_url=endpoint, config=config),
            bool(endpoint),
            siblings=found,
        )
    except NoCredentialsError as error:
        raise NoCredentials(
            "no AWS credentials found (environment, ~/.aws, SSO or instance "
            "role); for the local cloud pass --endpoint-url"
        ) from error
    except NoRegionError as error:
        raise CliError(
            "no AWS region: pass --region, or set AWS_REGION or a region in your profile"
        ) from error
    except EndpointConnectionError as error:
        raise EngineFailed(
            f"cannot reach {error.kwargs.get('endpoint_url')}: is the local cloud up (`once up`)?"
        ) from error
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        if "does not exist" in message:
            raise StackNotFound(f"stack {stack} not found ({message})") from error
        raise CliError(f"describing stack {stack}: {message}") from error


def _record_prefix(stack: str, outputs: dict[str, str], lambda_: Any) -> tuple[str, str | None]:
    """The records' key prefix: the stack's ``ServiceName`` output; for a stack deployed
    before it had one, the function's configuration, else the runtime's default (with a
    note saying so)."""
    if outputs.get("ServiceName"):
        return outputs["ServiceName"], None
    if outputs.get("FunctionName"):
        try:
            env = (
                lambda_.get_function_configuration(FunctionName=outputs["FunctionName"])
                .get("Environment", {})
                .get("Variables", {})
            )
            if env.get(c.ENV_SERVICE_NAME):
                return str(env[c.ENV_SERVICE_NAME]), None
        except ClientError:
            pass  # no lambda:GetFunctionConfiguration: the note below says what to do
    return c.DEFAULT_SERVICE_NAME, (
        f"stack {stack} has no ServiceName output and its function's configuration could not "
        f"be read, so the record prefix is the default {c.DEFAULT_SERVICE_NAME!r}; deploy the "
        "stack with once_cdk's add_cli_outputs (it adds ServiceName)"
    )


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
    """Send the bodies in batches of ten; print each one's business key and message id."""
    target = resolve(args)
    bodies = _bodies(args)
    key_path = jmespath.compile(args.key)
    fifo = target.outputs["QueueUrl"].endswith(".fifo")
    if fifo and not args.group:
        raise UsageError(
            "the queue is FIFO: pass --group JMESPATH, where each body's message group is "
            "(e.g. --group customerId)"
        )
    group_path = jmespath.compile(args.group) if args.group else None
    sent: list[dict[str, str | None]] = []
    failed: list[dict[str, str | None]] = []
    for start in range(0, len(bodies), 10):
        chunk = bodies[start : start + 10]
        entries: list[dict[str, Any]] = [
            {"Id": str(n), "MessageBody": body} for n, body in enumerate(chunk)
        ]
        if group_path is not None:
            for entry in entries:
                group = _key(group_path, entry["MessageBody"])
                if group is None:
                    raise UsageError(
                        f"no message group at {args.group} in line "
                        f"{start + int(entry['Id']) + 1}: {entry['MessageBody'][:80]}"
                    )
                entry["MessageGroupId"] = group
        response = target.sqs.send_message_batch(
            QueueUrl=target.outputs["QueueUrl"], Entries=entries
        )
        for ok in response.get("Successful", []):
            body = chunk[int(ok["Id"])]
            sent.append({"key": _key(key_path, body), "message_id": ok["MessageId"]})
        for refused in response.get("Failed", []):
            body = chunk[int(refused["Id"])]
            reason = refused.get("Message", refused.get("Code"))
            failed.append({"key": _key(key_path, body), "error": reason})
            console.print(f"[red]not sent[/]: line {start + int(refused['Id']) + 1}: {reason}")
    for message in sent:
        console.print(f"{message['key'] or '-'}  {message['message_id']}", soft_wrap=True)
    console.print(
        f"sent {len(sent)} of {len(bodies)} messages to {target.outputs['QueueUrl']}",
        soft_wrap=True,
    )
    if args.json_path:
        document = {"queue_url": target.outputs["QueueUrl"], "sent": sent, "failed": failed}
        Path(args.json_path).write_text(json.dumps(document, indent=2) + "\n")
    return 0 if not failed else 1


def _key(path: jmespath.parser.ParsedResult, body: str) -> str | None:
    """The business key of a body, for the user's eyes; None if it has none there."""
    try:
        found = path.search(json.loads(body))
    except ValueError:
        return None
    return None if found is None else str(found)


#: The outcome counts ``status`` shows, in the order of the design's outcome table.
OUTCOME_METRICS = (
    c.METRIC_PROCESSED,
    c.METRIC_DUPLICATE,
    c.METRIC_CONFLICT,
    c.METRIC_BUSY,
    c.METRIC_FAILED,
    c.METRIC_QUARANTINED,
    c.METRIC_LEASE_LOST,
    c.METRIC_LEASE_EXPIRED,
    c.METRIC_DEADLINE,
    c.METRIC_TAKEOVER,
    c.METRIC_INTERNAL_ERROR,
    c.METRIC_OWED,
    c.METRIC_OWED_SENT,
    c.METRIC_WRITE_REFUSED,
)
#: How far back ``status`` sums the outcome counts.
METRICS_WINDOW_S = 24 * 3600


def _namespace(target: Target) -> str:
    """The function's metrics namespace: its environment's, else the runtime's default."""
    name = target.outputs.get("FunctionName")
    if name:
        with contextlib.suppress(ClientError, BotoCoreError):  # unreadable: the default
            env = (
                target.lambda_.get_function_configuration(FunctionName=name)
                .get("Environment", {})
                .get("Variables", {})
            )
            return str(env.get(c.ENV_METRICS_NAMESPACE) or c.DEFAULT_METRICS_NAMESPACE)
    return c.DEFAULT_METRICS_NAMESPACE


def outcome_counts(
    cloudwatch: Any, namespace: str, service: str, now: float | None = None
) -> dict[str, int]:
    """The sum of each outcome metric over the last ``METRICS_WINDOW_S``, dimension
    ``service`` = the stack's service, as the function published them."""
    end = now or time.time()
    queries = [
        {
            "Id": f"m{n}",
            "MetricStat": {
                "Metric": {
                    "Namespace": namespace,
                    "MetricName": name,
                    "Dimensions": [{"Name": "service", "Value": service}],
                },
                "Period": 60,
                "Stat": "Sum",
            },
            "ReturnData": True,
        }
        for n, name in enumerate(OUTCOME_METRICS)
    ]
    response = cloudwatch.get_metric_data(
        MetricDataQueries=queries,
        StartTime=datetime.fromtimestamp(end - METRICS_WINDOW_S, UTC),
        EndTime=datetime.fromtimestamp(end + 60, UTC),
    )
    counts = dict.fromkeys(OUTCOME_METRICS, 0)
    for result in response.get("MetricDataResults", []):
        name = OUTCOME_METRICS[int(result["Id"][1:])]
        counts[name] = int(sum(result.get("Values", [])))
    return counts


#: The tag the local cloud puts on each alarm it creates for a stack (moto's CloudFormation
#: does not list them among the stack's resources): ``localcloud.alarms.STACK_TAG``.
LOCAL_STACK_TAG = "once:local-stack"
_ALARM_TYPE = "AWS::CloudWatch::Alarm"
_STATE_STYLE = {"ALARM": "bold red", "OK": "green", "INSUFFICIENT_DATA": "yellow"}


def stack_alarms(target: Target) -> list[dict[str, Any]]:
    """The stack's metric alarms as ``DescribeAlarms`` gives them: those its CloudFormation
    resources name; on the local cloud, where moto's CloudFormation holds none of them,
    those the local cloud tagged with the stack's name."""
    names: list[str] = []
    for page in target.cfn.get_paginator("list_stack_resources").paginate(StackName=target.stack):
        names.extend(
            str(r["PhysicalResourceId"])
            for r in page.get("StackResourceSummaries", [])
            if r.get("ResourceType") == _ALARM_TYPE and r.get("PhysicalResourceId")
        )
    found: list[dict[str, Any]] = []
    for start in range(0, len(names), 100):
        response = target.cloudwatch.describe_alarms(
            AlarmNames=names[start : start + 100], AlarmTypes=["MetricAlarm"]
        )
        found.extend(response.get("MetricAlarms", []))
    if not names and target.local:
        for page in target.cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmTypes=["MetricAlarm"]
        ):
            for alarm in page.get("MetricAlarms", []):
                tags = target.cloudwatch.list_tags_for_resource(ResourceARN=alarm["AlarmArn"])
                if {"Key": LOCAL_STACK_TAG, "Value": target.stack} in tags.get("Tags", []):
                    found.append(alarm)
    return sorted(found, key=lambda a: str(a["AlarmName"]))


def alarm_namespaces(alarm: dict[str, Any]) -> set[str]:
    """The namespaces of the metrics an alarm reads (its metric's, or its metric math's)."""
    found = {str(alarm["Namespace"])} if alarm.get("Namespace") else set()
    for query in alarm.get("Metrics") or []:
        metric = query.get("MetricStat", {}).get("Metric", {})
        if metric.get("Namespace"):
            found.add(str(metric["Namespace"]))
    return found


def alarms_view(target: Target) -> Table:
    """Each alarm of the stack with its state and the reason CloudWatch gives; on the local
    cloud, which of them it does not evaluate (those on AWS's own metrics)."""
    table = Table(title=f"alarms ({target.stack})", title_justify="left")
    table.add_column("alarm", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("reason", overflow="fold")
    try:
        found = stack_alarms(target)
    except (ClientError, BotoCoreError) as error:
        table.add_row(f"unavailable: {_short(error)}", "-", "-")
        return table
    not_local: list[str] = []
    aws_namespaces: set[str] = set()
    for alarm in found:
        name, state = str(alarm["AlarmName"]), str(alarm.get("StateValue", "?"))
        short = name.removeprefix(f"{target.stack}-")
        aws = {n for n in alarm_namespaces(alarm) if n.startswith("AWS/")}
        if target.local and aws:
            not_local.append(short)
            aws_namespaces |= aws
        style = _STATE_STYLE.get(state, "")
        table.add_row(short, f"[{style}]{state}[/]" if style else state, alarm.get("StateReason"))
    if not found:
        table.add_row("none found", "-", "-")
    in_alarm = sum(1 for a in found if a.get("StateValue") == "ALARM")
    table.title = f"alarms ({target.stack}): {in_alarm} of {len(found)} in ALARM"
    if not_local:
        table.caption = (
            f"not evaluated locally: {', '.join(not_local)} (AWS publishes their metrics, "
            f"{' and '.join(sorted(aws_namespaces))}; the local cloud has none)"
        )
        table.caption_justify = "left"
    return table


def status_view(targets: list[tuple[Target, str]]) -> Group:
    """The tables ``status`` prints: for each consumer (with its metrics namespace) its
    queues and records and its outcome counts, then the stack's alarms."""
    tables: list[Table] = []
    for target, namespace in targets:
        tables.extend(_consumer_view(target, namespace))
    return Group(*tables, alarms_view(targets[0][0]))


#: A COMPLETED record whose outbox is not all sent yet: what a rollback would never send.
OWES_MESSAGES = " (owes messages)"


def _consumer_view(target: Target, namespace: str) -> tuple[Table, Table]:
    queue = queue_depth(target.sqs, target.outputs["QueueUrl"])
    dlq = queue_depth(target.sqs, target.outputs["DlqUrl"])
    now_ms = int(time.time() * 1000)
    counts: dict[str, int] = {}
    for item in scan(target.ddb, target.outputs["IdempotencyTableName"]):
        state = item.get(c.ATTR_STATUS, {}).get("S", "?")
        lease = item.get(c.ATTR_LEASE_EXPIRES_AT, {}).get("N")
        if state == c.STATUS_IN_PROGRESS and lease and int(lease) < now_ms:
            state += " (lease expired)"
        if state == c.STATUS_COMPLETED and c.ATTR_OUTBOX in item:
            state += OWES_MESSAGES
        counts[state] = counts.get(state, 0) + 1
    table = Table(title=f"once status: {target.title}", title_justify="left")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("queue: waiting", str(queue.visible))
    table.add_row("queue: in flight", str(queue.in_flight))
    table.add_row("DLQ depth", str(dlq.total))
    for state in sorted(counts):
        table.add_row(f"records {state}", str(counts[state]))
    outcomes = Table(
        title=f"outcomes, last {METRICS_WINDOW_S // 3600} h ({namespace}, service {target.prefix})",
        title_justify="left",
    )
    outcomes.add_column("metric")
    outcomes.add_column("count", justify="right")
    try:
        for name, count in outcome_counts(target.cloudwatch, namespace, target.prefix).items():
            outcomes.add_row(name, str(count))
    except (ClientError, BotoCoreError) as error:
        outcomes.add_row(f"unavailable: {_short(error)}", "-")
    return table, outcomes


def status(args: argparse.Namespace, console: Console) -> int:
    """The queues, records and outcome counts of the consumer ``--consumer`` names, else of
    each consumer of the stack; with ``--watch``, refreshed in place on a terminal, one
    frame after another into a pipe or a file (where nothing can be redrawn)."""
    # Each function's namespace once: a --watch frame reads the queues, records and metrics.
    targets = [(target, _namespace(target)) for target in resolve_each(args)]
    if not args.watch:
        console.print(status_view(targets))
        return 0
    try:
        if not console.is_terminal:
            while True:
                console.print(status_view(targets))
                console.file.flush()
                time.sleep(args.watch)
        with Live(status_view(targets), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(args.watch)
                live.update(status_view(targets), refresh=True)
    except KeyboardInterrupt:
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
        where = (
            f"no record {record_id} in {target.outputs['IdempotencyTableName']}: the key was "
            'never committed or claimed, or its record expired. Under effects="staged" a '
            "copy that failed writes nothing (a refused commit's message is in the DLQ with "
            "once.reason=WRITE_REFUSED): `once dlq` lists the DLQ's keys and why"
        )
        raise RecordNotFound(f"{where} ({target.prefix_note})" if target.prefix_note else where)

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
        ("review_fence", c.ATTR_REVIEW_FENCE),
    ):
        if value(name) is not None:
            table.add_row(label, _shown(name, value(name)))
    owed = Record.from_item(item).outbox
    if owed:
        # Where they go, never what they say: bodies are payload values.
        destinations = sorted({m.destination for m in owed})
        table.add_row(
            "owed",
            f"{_messages(len(owed))} not yet sent, to {', '.join(destinations)}: "
            "the next delivery of this key sends them",
        )
    console.print(table)
    return 0


#: The record's times, and their unit: ``expires_at`` is DynamoDB's TTL attribute, in epoch
#: seconds ("Unix epoch time format in seconds": https://docs.aws.amazon.com/amazondynamodb/
#: latest/developerguide/time-to-live-ttl-before-you-start.html); ``updated_at`` is once's,
#: in milliseconds (``store.py``'s ``:now_ms``).
_TIMES = {c.ATTR_EXPIRES_AT: 1, c.ATTR_UPDATED_AT: 1000}


def _shown(name: str, raw: str | None) -> str | None:
    """A record's attribute as ``once inspect`` shows it: a time as ISO 8601 in UTC (the
    stored number beside it), anything else as stored."""
    per_second = _TIMES.get(name)
    if raw is None or per_second is None:
        return raw
    try:
        moment = datetime.fromtimestamp(int(raw) / per_second, UTC)
    except (ValueError, OverflowError, OSError):
        return raw
    return f"{moment.isoformat(timespec='seconds').replace('+00:00', 'Z')} ({raw})"


def _arn(sqs: Any, url: str) -> str:
    return str(
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
    )


def redrive(args: argparse.Namespace, console: Console) -> int:
    """Move the DLQ's messages back, one by one with ``oncecli.redrive.move``, leaving
    LEASE_EXPIRED messages for a person's review. With ``--include-lease-expired`` (and no
    ``--max``) all of them with StartMessageMoveTask where the endpoint has it (``--rate``
    caps its speed): it cannot leave any message behind, so it is never used without."""
    target = resolve(args)
    sqs, dlq, source = target.sqs, target.outputs["DlqUrl"], target.outputs["QueueUrl"]
    if args.max is not None and args.max < 1:
        raise UsageError("--max must be at least 1")
    if args.rate is not None and not args.include_lease_expired:
        raise UsageError(
            "--rate uses StartMessageMoveTask, which moves every message, LEASE_EXPIRED ones "
            "too: review those first and pass --include-lease-expired with --rate, or drop "
            "--rate to move the others one by one"
        )
    if args.max is None and args.include_lease_expired:
        try:
            request: dict[str, Any] = {
                "SourceArn": _arn(sqs, dlq),
                "DestinationArn": _arn(sqs, source),
            }
            if args.rate:
                request["MaxNumberOfMessagesPerSecond"] = min(args.rate, 500)
            handle = sqs.start_message_move_task(**request)["TaskHandle"]
            console.print(
                f"StartMessageMoveTask started (task {handle}); SQS moves the messages "
                "in the background",
                soft_wrap=True,
            )
            return 0
        except (ClientError, BotoCoreError) as error:
            console.print(
                f"StartMessageMoveTask unavailable here ({_short(error)}); moving the "
                "messages one by one"
            )
    done = move(sqs, dlq, source, args.max, include_lease_expired=args.include_lease_expired)
    console.print(f"moved {_messages(done.moved)} from the DLQ back to the source queue")
    for message_id, why in done.refused:
        console.print(
            f"not moved: {message_id} (the source queue refused it: {why}); it stays in the "
            "DLQ (fix the cause, then redrive again)",
            soft_wrap=True,
        )
    if done.lease_expired_left:
        console.print(
            f"left {_messages(done.lease_expired_left, 'message')} for review in the DLQ "
            "(LEASE_EXPIRED, or a commit that landed nothing under "
            'on_expired_lease="quarantine"): their business code may have had its effect, '
            "so a person checks each effect first (`once inspect KEY`), then runs `once "
            "redrive --include-lease-expired` for the ones that must run",
            soft_wrap=True,
        )
    remaining = queue_depth(sqs, dlq).total
    if remaining > done.lease_expired_left + len(done.refused) and args.max is None:
        why = (
            " (on a FIFO queue, those behind a LEASE_EXPIRED message in its message group "
            "stay with it, in order)"
            if dlq.endswith(".fifo")
            else ""
        )
        console.print(
            f"{_messages(remaining)} {'remains' if remaining == 1 else 'remain'} in the DLQ{why}",
            soft_wrap=True,
        )
    return 1 if done.refused else 0


def _messages(count: int, noun: str = "message") -> str:
    """``1 message``, ``2 messages``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _short(error: Exception) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or error)
    return type(error).__name__


def dispatch(args: argparse.Namespace, console: Console) -> int:
    commands = {"send": send, "status": status, "inspect": inspect, "redrive": redrive}
    return commands[args.command](args, console)
