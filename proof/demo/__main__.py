"""``make demo`` (``python -m proof.demo``): deploy the example app's local stage, run a
workload through it, check every message's fate.

Why its own entry point: the demo runs the example app of this checkout, which the wheel does
not ship, so the ``once`` command a team installs does not offer it; it takes the same local
cloud arguments as ``once up`` and reports failures as the command does (``guarded``).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from oncecli.cli import add_local_args, context_pairs, guarded
from oncecli.errors import (
    EngineFailed,
    EngineNotInstalled,
    JavaMissing,
    SynthFailed,
    UnshareNotPermitted,
    epilog,
)
from proof.errors import DemoFailed, ExampleShadowed

HELP = (
    "Deploy the example app's local stage, run a workload through it, check every message's fate."
)


def rate(text: str) -> float:
    """A share of the workload: a number in [0, 1)."""
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError("a rate is a number in [0, 1)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The demo's arguments; ``make demo ARGS="..."`` passes them."""
    demo = argparse.ArgumentParser(
        prog="python -m proof.demo",
        description=HELP,
        epilog=epilog(
            EngineNotInstalled,
            JavaMissing,
            UnshareNotPermitted,
            EngineFailed,
            SynthFailed,
            ExampleShadowed,
            failure=DemoFailed.meaning,
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--messages", type=int, default=300, help="messages to send (default: %(default)s)"
    )
    demo.add_argument(
        "--duplicate-rate",
        type=rate,
        default=0.2,
        help="share of duplicate messages (default: %(default)s)",
    )
    demo.add_argument(
        "--bad-rate",
        type=rate,
        default=0.05,
        help="share of malformed, mismatched and poison messages (default: %(default)s)",
    )
    demo.add_argument(
        "--workers",
        type=int,
        help="worker processes (default and cap: the mapping's maximum concurrency)",
    )
    demo.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="also write the report as JSON here (default: none)",
    )
    demo.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="give up draining after S seconds (default: from the messages, the visibility "
        "timeout and maxReceiveCount)",
    )
    demo.add_argument("--seed", type=int, default=7, help="workload seed (default: %(default)s)")
    demo.add_argument(
        "--fifo",
        action="store_true",
        help="the stack's FIFO variant (-c fifo=true): each account's payments in one "
        "message group, checked to take effect in the order sent (default: standard queue)",
    )
    add_local_args(demo)
    return demo


def _demo(args: argparse.Namespace, argv: list[str], console: Console) -> int:
    # The mapping's worker processes ("spawn") import this module as their main module before
    # they set the function's environment, and the once layer reads its log level when first
    # imported: what imports it is imported here, never at the top.
    from proof.demo import verdict
    from proof.demo.drive import DemoOptions, run

    context = context_pairs(args.context)
    if args.fifo:
        context["fifo"] = "true"
    options = DemoOptions(
        messages=args.messages,
        duplicate_rate=args.duplicate_rate,
        bad_rate=args.bad_rate,
        workers=args.workers,
        engine=args.engine,
        json_path=args.json_path,
        assembly=args.template_dir,
        context=context,
        timeout_s=args.timeout,
        seed=args.seed,
        fifo=context.get("fifo") == "true",
    )
    result = run(options, argv, console)
    verdict.render(result, console)
    if options.json_path:
        verdict.write_json(result, options.json_path)
    if result["lost"] or not result["ledger_ok"] or result["order_ok"] is False:
        raise DemoFailed(
            f"{result['lost']} messages lost, ledger_ok={result['ledger_ok']}, "
            f"order_ok={result['order_ok']}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    return guarded("demo", lambda: _demo(args, argv, Console()))


if __name__ == "__main__":
    sys.exit(main())
