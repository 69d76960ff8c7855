"""The ``once`` command a team runs on its own app: ``up``, ``send``, ``status``,
``inspect``, ``dlq``, ``redrive``, ``logs``, ``event``, ``invoke``.

Why one thin module: argument parsing, exit codes and signal handling live here; the work
lives in ``localcloud`` and ``operate``. Expected failures are ``CliError``s, printed as one
line with their own exit code (see ``errors``); ``guarded`` does that for any command, the
repository's proof (``make demo``, ``make chaos``) included.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from oncecli.aws import (
    LOCAL_ACCESS_KEY_ID,
    LOCAL_PORT,
    LOCAL_REGION,
    LOCAL_SECRET_ACCESS_KEY,
    STACK_ENV,
)
from oncecli.errors import (
    EXIT_SIGNALS,
    CliError,
    EngineFailed,
    EngineNotInstalled,
    JavaMissing,
    NoCredentials,
    RecordNotFound,
    StackNotFound,
    SynthFailed,
    UnshareNotPermitted,
    epilog,
)
from oncecli.localcloud import cloud
from oncecli.localcloud.engines import ENGINES
from oncecli.project import Project

# The commands import the once layer, whose logger reads its level
# from the environment when first imported. Worker processes (multiprocessing "spawn")
# import this module as their main module before they set the function's environment, so
# those imports happen inside the functions that need them, never at the top.


def context_pairs(pairs: list[str] | None) -> dict[str, str]:
    """``-c KEY=VALUE`` pairs as CDK context."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"-c expects key=value, got {pair!r}")
        out[key] = value
    return out


def add_local_args(parser: argparse.ArgumentParser) -> None:
    """The arguments of a command that starts a local cloud: engine, app, assembly, context."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="moto",
        help="where the tables live; SQS is always moto (default: %(default)s)",
    )
    parser.add_argument(
        "--app",
        metavar="CMD",
        help='the command that synthesizes the CDK app, e.g. "python3 app.py", run in the '
        "working directory (default: the app of the nearest cdk.json at or above it)",
    )
    parser.add_argument(
        "--template-dir",
        type=Path,
        metavar="DIR",
        help="a synthesized cloud assembly to deploy (default: synthesize the app's local "
        "stage, cached in build/localcloud beside its cdk.json)",
    )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        metavar="KEY=VALUE",
        help="CDK context for the local stage, repeatable, e.g. -c function_timeout_s=2 "
        "(default: none)",
    )


def _target_args(parser: argparse.ArgumentParser, every_consumer: bool = False) -> None:
    parser.add_argument(
        "--stack",
        help=f"the CloudFormation stack whose outputs name the queues and table (default: "
        f"${STACK_ENV}; with --endpoint-url, the local cloud's one once stack)",
    )
    parser.add_argument(
        "--consumer",
        metavar="NAME",
        help="the consumer of the stack, by its construct id, where the stack holds several "
        + (
            "(default: every consumer of the stack)"
            if every_consumer
            else "(default: the stack's only one; the error lists them)"
        ),
    )
    parser.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="a local cloud's endpoint, the one `once up` prints (default: none, AWS itself)",
    )
    parser.add_argument(
        "--dynamodb-endpoint-url",
        metavar="URL",
        help="where the tables are, if not at --endpoint-url: DynamoDB Local "
        "(default: --endpoint-url)",
    )
    parser.add_argument(
        "--region",
        help="AWS region (default: $AWS_REGION, then $AWS_DEFAULT_REGION, then the profile's "
        f"region, as the AWS CLI does; with --endpoint-url, the local cloud's {LOCAL_REGION})",
    )


def _sub(sub: Any, name: str, help: str, epilog: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="once",
        description="Run the once stack on a local cloud, or operate a deployed one.",
        epilog="`once COMMAND --help` says what each command does and its exit codes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('once')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    local_failures = (EngineNotInstalled, JavaMissing, UnshareNotPermitted, EngineFailed)

    up = _sub(
        sub,
        "up",
        "run the local cloud and its event source mapping until Ctrl-C",
        epilog(*local_failures, SynthFailed, failure="failed"),
    )
    up.add_argument(
        "--workers",
        type=int,
        help="worker processes (default and cap: the mapping's maximum concurrency)",
    )
    up.add_argument(
        "--port",
        type=int,
        default=LOCAL_PORT,
        metavar="N",
        help="serve the endpoint on 127.0.0.1:N; 0 picks a free port (default: %(default)s)",
    )
    up.add_argument(
        "--no-mapping",
        action="store_true",
        help="deploy only: nothing consumes the queue (default: the mapping runs)",
    )
    up.add_argument(
        "--for",
        dest="for_s",
        type=float,
        metavar="S",
        help="stop after S seconds (default: run until Ctrl-C)",
    )
    add_local_args(up)

    env = _sub(
        sub,
        "env",
        "print the shell exports (and a function, awsonce) with which the AWS CLI, version 1 "
        "or 2, and "
        'the SDKs reach the local cloud: eval "$(once env)"',
        epilog(),
    )
    env.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=f"http://127.0.0.1:{LOCAL_PORT}",
        help="the local cloud's endpoint, as `once up` prints it (default: %(default)s)",
    )
    env.add_argument(
        "--dynamodb-endpoint-url",
        metavar="URL",
        help="where the tables are, if not at --endpoint-url: DynamoDB Local "
        "(default: --endpoint-url)",
    )

    target_failures = (NoCredentials, StackNotFound, EngineFailed)
    send = _sub(
        sub,
        "send",
        "send messages to the stack's queue: exactly one of --count N and FILE",
        epilog(*target_failures, failure="a message was not sent; or " + CliError.meaning),
    )
    what = send.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="N new random payments, as the example's service takes them (no default: "
        "--count or FILE is required)",
    )
    what.add_argument("file", nargs="?", type=Path, help="JSONL: one message body a line")
    send.add_argument(
        "--key",
        default="paymentId",
        metavar="JMESPATH",
        help="where each body's business key is, to print it (default: %(default)s)",
    )
    send.add_argument(
        "--group",
        metavar="JMESPATH",
        help="where each body's message group id is, for a FIFO queue, e.g. customerId "
        "(default: none; a FIFO queue requires it)",
    )
    send.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="also write what was sent (keys, message ids) as JSON here (default: none)",
    )
    _target_args(send)

    status = _sub(
        sub,
        "status",
        "show queue depth, messages in flight, DLQ depth, records by status and the "
        "outcome counts (Processed, Duplicate, ...) of the last 24 h",
        epilog(*target_failures),
    )
    status.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        default=None,
        metavar="S",
        help="refresh in place every S seconds until Ctrl-C (S defaults to 2; default: print once)",
    )
    _target_args(status, every_consumer=True)

    inspect = _sub(
        sub,
        "inspect",
        "show one record: status, fence, lease, result",
        epilog(*target_failures, RecordNotFound),
    )
    inspect.add_argument(
        "key", help="a business key: the value the handler's key expression selects"
    )
    _target_args(inspect)

    logs = _sub(
        sub,
        "logs",
        "print the consumer's function's log lines (the team's and once's) from its "
        "CloudWatch Logs group, on AWS or on the local cloud",
        epilog(*target_failures),
    )
    logs.add_argument(
        "--since",
        type=float,
        default=60.0,
        metavar="MIN",
        help="the lines of the last MIN minutes (default: %(default)g)",
    )
    logs.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="then print each new line as it comes, until Ctrl-C (default: print and exit)",
    )
    _target_args(logs)

    event = _sub(
        sub,
        "event",
        "write an SQS event for Lambda holding the given message bodies, to stdout (for "
        "once invoke)",
        epilog(),
    )
    event.add_argument("body", nargs="*", help='a message body, e.g. \'{"orderId": "o-1"}\'')
    event.add_argument(
        "--file", metavar="JSONL", help="also one body per line of this file (default: none)"
    )
    event.add_argument(
        "--fifo-group",
        metavar="G",
        help="from a FIFO queue, every record in message group G (default: a standard queue)",
    )
    from oncecli.invoke import add_event_arguments

    add_event_arguments(event)

    invoke = _sub(
        sub,
        "invoke",
        "run a consumer's function once on an SQS event file, against the local cloud "
        "`once up` runs; print its log, each record's outcome and the batch response",
        epilog(
            *target_failures,
            SynthFailed,
            failure="the function raised, timed out or crashed; or " + CliError.meaning,
        ),
    )
    invoke.add_argument(
        "event", metavar="EVENT.json", help="the event (`once event` writes one; - reads stdin)"
    )
    invoke.add_argument(
        "--stack",
        help=f"the stack of the consumer (default: ${STACK_ENV}, then the app's only one)",
    )
    invoke.add_argument(
        "--consumer",
        metavar="NAME",
        help="the consumer, by its construct id (default: the stack's only one)",
    )
    invoke.add_argument(
        "--endpoint-url",
        metavar="URL",
        default=f"http://127.0.0.1:{LOCAL_PORT}",
        help="the local cloud's endpoint, as `once up` prints it (default: %(default)s)",
    )
    invoke.add_argument(
        "--dynamodb-endpoint-url",
        metavar="URL",
        help="where the tables are, if not at --endpoint-url (default: --endpoint-url)",
    )
    invoke.add_argument(
        "--app",
        metavar="CMD",
        help="the command that synthesizes the CDK app, as for `once up` (default: the "
        "nearest cdk.json's)",
    )
    invoke.add_argument(
        "--template-dir",
        type=Path,
        metavar="DIR",
        help="the cloud assembly `once up` deployed (default: synthesize the app, cached)",
    )
    invoke.add_argument(
        "-c",
        "--context",
        action="append",
        metavar="KEY=VALUE",
        help="CDK context, as given to `once up` (default: none)",
    )

    from oncecli import dlq as dlq_command

    dlq = _sub(sub, "dlq", dlq_command.HELP, epilog(*target_failures))
    dlq_command.add_arguments(dlq)
    _target_args(dlq, every_consumer=True)

    redrive = _sub(
        sub,
        "redrive",
        "move the DLQ's messages back to the source queue, except LEASE_EXPIRED ones",
        epilog(*target_failures),
    )
    redrive.add_argument(
        "--max",
        type=int,
        metavar="N",
        help="move at most N messages, one by one (default: all the DLQ holds now)",
    )
    redrive.add_argument(
        "--include-lease-expired",
        action="store_true",
        help="move the messages quarantined with once.reason=LEASE_EXPIRED too, once a "
        "person has checked their effect (default: leave them in the DLQ and say how "
        "many); without --max, all with SQS's own StartMessageMoveTask where the "
        "endpoint has it",
    )
    redrive.add_argument(
        "--rate",
        type=int,
        metavar="N",
        help="with --include-lease-expired and StartMessageMoveTask: at most N messages a "
        "second (default: SQS's own, up to 500)",
    )
    _target_args(redrive)

    return parser


def _env(args: argparse.Namespace) -> int:
    """The exports for a shell, printed plain so that ``eval "$(once env)"`` takes them.

    The rules they follow: the AWS CLI v2 and the SDKs take ``AWS_ENDPOINT_URL`` and
    ``AWS_ENDPOINT_URL_<SERVICE>`` (AWS SDKs and Tools Reference Guide, "Service-specific
    endpoints"); version 1 of the CLI reads neither for SQS and takes its region from
    ``AWS_DEFAULT_REGION``, not ``AWS_REGION``: both regions are set, and the function
    ``awsonce`` passes ``--endpoint-url`` on every call, which both versions honour. A shell
    function, not an alias: a non-interactive shell (a script) does not expand aliases."""
    region = LOCAL_REGION
    lines = [
        "# once env: the local cloud for the AWS CLI (v1 and v2) and the SDKs",
        f"export AWS_ACCESS_KEY_ID={LOCAL_ACCESS_KEY_ID}",
        f"export AWS_SECRET_ACCESS_KEY={LOCAL_SECRET_ACCESS_KEY}",
        "unset AWS_PROFILE AWS_SESSION_TOKEN",
        f"export AWS_REGION={region} AWS_DEFAULT_REGION={region}",
        f"export AWS_ENDPOINT_URL={args.endpoint_url}",
    ]
    if args.dynamodb_endpoint_url:
        lines.append(f"export AWS_ENDPOINT_URL_DYNAMODB={args.dynamodb_endpoint_url}")
    lines += [
        "# AWS CLI v1 ignores AWS_ENDPOINT_URL for SQS: call it as awsonce (a function, so",
        "# that it works in a script as in a terminal, where an alias would not; an alias of",
        "# that name, from an earlier once env, would be expanded in its definition)",
        "unalias awsonce 2>/dev/null || true",
        f'awsonce() {{ aws --endpoint-url {args.endpoint_url} "$@"; }}',
    ]
    print("\n".join(lines))
    return 0


#: Columns when stdout is no terminal (a pipe, a file, CI's log): wide enough that no title
#: or row wraps where a script or a person's ``grep`` would cut it. A terminal's own width
#: is kept.
_PIPE_WIDTH = 4096


def _console() -> Console:
    """The commands' console: the terminal's width, or, piped, one line per table row."""
    console = Console()
    return console if console.is_terminal else Console(width=_PIPE_WIDTH)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _up(args: argparse.Namespace, argv: list[str], console: Console) -> int:
    from oncecli.localcloud.emf import Shipper

    local = cloud.start(
        args.engine,
        argv,
        assembly=args.template_dir,
        context=context_pairs(args.context),
        project=None if args.template_dir else Project.find(app=args.app),
        port=args.port,
    )
    mappings = []
    shipper = Shipper(local.client("cloudwatch"), local.client("logs"))
    try:
        # soft_wrap: URLs and flags stay on one line, whatever the width or the pipe.
        not_run = {str(part) for part in local.stripped}
        for note in local.notes:
            if note not in not_run:
                console.print(f"  local patch: {note}", soft_wrap=True)
        for part in local.stripped:  # named, never dropped in silence
            console.print(f"  not run locally: {part}", soft_wrap=True)
        flags = f"--endpoint-url {local.endpoints['sqs']} --region {LOCAL_REGION}"
        if local.endpoints["dynamodb"] != local.endpoints["sqs"]:
            flags += f" --dynamodb-endpoint-url {local.endpoints['dynamodb']}"
        for stack in local.stacks:
            names = [c.name for c in local.consumers if c.stack == stack.name]
            console.print(
                f"[bold]{stack.name}[/] is up ({', '.join(names) or 'no consumer'}): "
                f"once status --stack {stack.name} {flags}"
                + (" (every consumer; --consumer NAME for one)" if len(names) > 1 else ""),
                soft_wrap=True,
            )
            for key, value in local.outputs_of(stack.name).items():
                console.print(f"  {key} = {value}", soft_wrap=True)
        console.print(f"  Region = {LOCAL_REGION}", soft_wrap=True)
        sys.stdout.flush()
        if not args.no_mapping:
            mappings = local.run_consumers(
                lambda c: args.workers or c.mapping.max_concurrency or 2, shipper
            )
            for consumer, mapping in zip(local.consumers, mappings, strict=True):
                console.print(
                    f"{consumer.stack} ({consumer.name}): mapping running with "
                    f"{mapping.concurrency} workers; logs in {local.log_dir / consumer.log_name}",
                    soft_wrap=True,
                )
            shipper.start()
            console.print("Ctrl-C stops")
        sys.stdout.flush()
        deadline = None if args.for_s is None else time.monotonic() + args.for_s
        try:
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            for mapping in mappings:
                mapping.stop()
            shipper.stop()
    finally:
        local.stop()
    return 0


def guarded(name: str, work: Callable[[], int]) -> int:
    """Run a command's ``work`` and return its exit code: an expected failure (``CliError``)
    as one line under the command's ``name`` with its own code, Ctrl-C as 130, SIGTERM and
    SIGHUP as an orderly exit (engines stopped) with 128 + the signal."""
    err = Console(stderr=True)
    for signum in EXIT_SIGNALS:
        signal.signal(signum, _on_signal)
    try:
        return work()
    except CliError as error:
        err.print(f"[bold red]{name}:[/] {error}", soft_wrap=True)
        return error.exit_code
    except KeyboardInterrupt:
        err.print(f"{name}: interrupted; engines stopped")
        return 130


def main(argv: list[str] | None = None) -> int:
    """Console script entry point; returns (and exits with) the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    console = _console()

    def work() -> int:
        if args.command == "up":
            return _up(args, argv, console)
        if args.command == "env":
            return _env(args)
        if args.command == "event":
            from oncecli.invoke import write_event

            return write_event(args)
        if args.command == "invoke":
            from oncecli.invoke import invoke

            return invoke(args, console, context_pairs(args.context))
        if args.command == "dlq":
            from oncecli.dlq import dlq

            return dlq(args, console)
        if args.command == "logs":
            from oncecli.logs import logs

            return logs(args, console)
        from oncecli import operate

        return operate.dispatch(args, console)

    return guarded(f"once {args.command}", work)


if __name__ == "__main__":
    sys.exit(main())
