"""``once logs``: a consumer's function's log lines, read from its CloudWatch Logs group.

Why from the log group: the same command then reads a deployed stack's lines and the local
cloud's, which ships its workers' lines there (``localcloud.emf``): the team's own and
once's alike, at the function's own log level. The group is the one the function logs to,
``LoggingConfig.LogGroup`` as ``GetFunctionConfiguration`` gives it (``/aws/lambda/<name>``
unless the function names another; ``OnceConsumer`` gives it one of its own).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from botocore.exceptions import ClientError
from rich.console import Console

from oncecli.errors import CliError, StackNotFound
from oncecli.operate import Target, resolve

#: How often ``--follow`` asks for new lines, in seconds.
FOLLOW_EVERY_S = 1.0


def log_group(target: Target) -> str:
    """The consumer's function's log group."""
    name = target.outputs.get("FunctionName")
    if not name:
        raise StackNotFound(
            f"stack {target.stack} has no FunctionName output for this consumer: deploy it "
            "with once_cdk's add_cli_outputs"
        )
    try:
        config = target.lambda_.get_function_configuration(FunctionName=name)
    except ClientError as error:
        raise CliError(f"reading function {name}: {error}") from error
    return str(config.get("LoggingConfig", {}).get("LogGroup") or f"/aws/lambda/{name}")


def _events(logs: Any, group: str, start_ms: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for page in logs.get_paginator("filter_log_events").paginate(
        logGroupName=group, startTime=start_ms
    ):
        events.extend(page.get("events", []))
    return sorted(events, key=lambda e: (int(e["timestamp"]), str(e.get("eventId", ""))))


def logs(args: argparse.Namespace, console: Console) -> int:
    """Print the lines of the last ``--since`` minutes; with ``--follow``, then each new
    line as it comes, until Ctrl-C."""
    target = resolve(args)
    group = log_group(target)
    start_ms = int((time.time() - args.since * 60) * 1000)
    shown: dict[str, int] = {}  # event id -> timestamp, of the lines at the newest instant
    said_empty = False
    try:
        while True:
            try:
                events = _events(target.logs, group, start_ms)
            except target.logs.exceptions.ResourceNotFoundException:
                events = []
                if not said_empty:
                    console.print(
                        f"no log group {group} yet: the function has not logged a line",
                        markup=False,
                        highlight=False,
                    )
                    said_empty = True
            for event in events:
                if event["eventId"] in shown:
                    continue
                console.print(
                    str(event["message"]).rstrip("\n"),
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
                start_ms = max(start_ms, int(event["timestamp"]))
                shown[event["eventId"]] = int(event["timestamp"])
            shown = {k: t for k, t in shown.items() if t >= start_ms}
            if not args.follow:
                return 0
            console.file.flush()
            time.sleep(FOLLOW_EVERY_S)
    except KeyboardInterrupt:
        return 0
