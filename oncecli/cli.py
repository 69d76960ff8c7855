"""The ``once`` command: ``demo``, ``up``, ``send``, ``status``, ``inspect``, ``redrive``,
``chaos``.

Why one thin module: argument parsing, exit codes and signal handling live here; the work
lives in ``demo``, ``localcloud`` and ``operate``. Expected failures are ``CliError``s,
printed as one line with their own exit code (see ``errors``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from rich.console import Console

from oncecli.chaos.command import add_parser as add_chaos_parser
from oncecli.errors import CliError, DemoFailed
from oncecli.localcloud import cloud
from oncecli.localcloud.template import STACK_NAME
from oncecli.project import BUILD_DIR

# The demo, the report and the commands import the once layer, whose logger reads its level
# from the environment when first imported. Worker processes (multiprocessing "spawn")
# import this module as their main module before they set the function's environment, so
# those imports happen inside the functions that need them, never at the top.


def _rate(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError("a rate is a number in [0, 1)")
    return value


def _context(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"-c expects key=value, got {pair!r}")
        out[key] = value
    return out


def _local_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=cloud.ENGINES,
        default="moto",
        help="where the tables live (SQS is always moto); default moto",
    )
    parser.add_argument(
        "--template-dir",
        type=Path,
        metavar="DIR",
        help="a synthesized cloud assembly to deploy instead of synthesizing",
    )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        metavar="KEY=VALUE",
        help="CDK context for the local stage, e.g. -c function_timeout_s=2",
    )


def _target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack",
        help="CloudFormation stack whose outputs name the queue "
        "and tables (default Once-local with --endpoint-url)",
    )
    parser.add_argument(
        "--endpoint-url", help="a local cloud (moto) endpoint, e.g. the one `once up` prints"
    )
    parser.add_argument(
        "--dynamodb-endpoint-url", help="where the tables are, if elsewhere (DynamoDB Local)"
    )
    parser.add_argument("--region", help="AWS region (default: the standard chain)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="once", description=("Run the once stack on a local cloud, or operate a deployed one.")
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="deploy the local stage, run a workload, check it")
    demo.add_argument("--messages", type=int, default=300, help="messages to send (300)")
    demo.add_argument(
        "--duplicate-rate", type=_rate, default=0.2, help="share of duplicate messages (0.2)"
    )
    demo.add_argument(
        "--bad-rate",
        type=_rate,
        default=0.05,
        help="share of malformed, mismatched and poison messages (0.05)",
    )
    demo.add_argument(
        "--workers",
        type=int,
        help="worker processes (default and cap: the mapping's maximum concurrency)",
    )
    demo.add_argument("--json", dest="json_path", metavar="PATH", help="write the report here")
    demo.add_argument("--timeout", type=float, help="give up draining after this many s")
    demo.add_argument("--seed", type=int, default=7, help="workload seed (7)")
    _local_args(demo)

    up = sub.add_parser("up", help="run the local cloud and its mapping until Ctrl-C")
    up.add_argument("--workers", type=int)
    up.add_argument("--no-mapping", action="store_true", help="deploy only; nothing consumes")
    up.add_argument("--for", dest="for_s", type=float, help="stop after this many seconds")
    _local_args(up)

    send = sub.add_parser("send", help="send payments: --count N, or a JSONL file of bodies")
    what = send.add_mutually_exclusive_group(required=True)
    what.add_argument("--count", type=int, help="N new random payments")
    what.add_argument("file", nargs="?", type=Path, help="JSONL: one message body a line")
    _target_args(send)

    status = sub.add_parser("status", help="queue depth, in flight, DLQ depth, records")
    _target_args(status)

    inspect = sub.add_parser("inspect", help="one record: status, fence, lease, result")
    inspect.add_argument("key", help="the business key (paymentId)")
    _target_args(inspect)

    redrive = sub.add_parser("redrive", help="move the DLQ's messages back to the source")
    redrive.add_argument("--max", type=int, help="move at most this many")
    _target_args(redrive)

    add_chaos_parser(sub)
    return parser


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _demo(args: argparse.Namespace, argv: list[str], console: Console) -> int:
    from oncecli.demo import verdict
    from oncecli.demo.drive import DemoOptions, run

    options = DemoOptions(
        messages=args.messages,
        duplicate_rate=args.duplicate_rate,
        bad_rate=args.bad_rate,
        workers=args.workers,
        engine=args.engine,
        json_path=args.json_path,
        assembly=args.template_dir,
        context=_context(args.context),
        timeout_s=args.timeout,
        seed=args.seed,
    )
    result = run(options, argv, console)
    verdict.render(result, console)
    if options.json_path:
        verdict.write_json(result, options.json_path)
    if result["lost"] or not result["ledger_ok"]:
        raise DemoFailed(f"{result['lost']} messages lost, ledger_ok={result['ledger_ok']}")
    return 0


def _up(args: argparse.Namespace, argv: list[str], console: Console) -> int:
    local = cloud.start(
        args.engine, argv, assembly=args.template_dir, context=_context(args.context)
    )
    try:
        for note in local.notes:
            console.print(f"  local patch: {note}")
        console.print(
            f"[bold]{STACK_NAME}[/] is up: --endpoint-url "
            f"{local.endpoints['sqs']}"
            + (
                f" --dynamodb-endpoint-url {local.endpoints['dynamodb']}"
                if local.endpoints["dynamodb"] != local.endpoints["sqs"]
                else ""
            )
        )
        for key, value in local.outputs.items():
            console.print(f"  {key} = {value}")
        sys.stdout.flush()
        mapping = None
        if not args.no_mapping:
            from oncecli.localcloud.mapping import Mapping

            config = local.mapping_config()
            mapping = Mapping(
                config,
                local.function_config(),
                sqs_factory=lambda: local.client("sqs"),
                workers=args.workers or config.max_concurrency or 2,
                env=local.worker_env(),
                log_path=str(BUILD_DIR / "workers.log"),
            ).start()
            console.print(f"mapping running with {mapping.concurrency} workers; Ctrl-C stops")
        sys.stdout.flush()
        deadline = time.monotonic() + args.for_s if args.for_s else None
        try:
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            if mapping is not None:
                mapping.stop()
    finally:
        local.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Console script entry point; returns (and exits with) the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    console = Console()
    err = Console(stderr=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        if args.command == "demo":
            code = _demo(args, argv, console)
        elif args.command == "up":
            code = _up(args, argv, console)
        elif args.command == "chaos":
            code = args.func(args)
        else:
            from oncecli import operate

            code = operate.dispatch(args, console)
    except CliError as error:
        err.print(f"[bold red]once {args.command}:[/] {error}")
        code = error.exit_code
    except KeyboardInterrupt:
        err.print(f"once {args.command}: interrupted; engines stopped")
        code = 130
    return code


if __name__ == "__main__":
    sys.exit(main())
