"""``make chaos`` (``python -m proof.chaos``): run the harness and print (and optionally
save) its report.

DynamoDB Local is the default engine, because its conditional writes are atomic; it runs
with the workers inside a private network namespace. moto is for a quick smoke run only:
its conditional writes are not atomic, so its figures prove nothing about races.

The last line it prints says why it exits as it does: which of once's consumers broke which
invariant how often, or that the harness itself failed (its own exit code).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from oncecli.errors import (
    EngineFailed,
    EngineNotInstalled,
    JavaMissing,
    UnshareNotPermitted,
    UsageError,
    epilog,
)
from oncecli.localcloud import engines
from proof import example
from proof.chaos import summary, twohop
from proof.chaos.harness import (
    DEFAULT_RATES,
    IMPLEMENTATIONS,
    PAUSE_MAX_S,
    TIMEOUT_S,
    Endpoints,
    Run,
    chaos,
)
from proof.errors import ExampleShadowed, HarnessFailed

#: The per-fault sweep: each fault kind alone (rates of the others at zero).
SINGLE_FAULTS: dict[str, dict[str, float]] = {
    "duplicates only": {},
    "kill after claim": {"kill_after_claim": 0.02},
    "kill after effect": {"kill_after_effect": 0.02},
    "kill before finalize": {"kill_before_finalize": 0.02},
    "pause past lease": {"pause": 0.02},
    "throttling": {"throttle": 0.2},
    "lost response": {"lost_response": 0.1},
    "clock skew": {"skew": 1},
    "DLQ redrive": {"redrive": 1},
    "TTL sweep": {"ttl_sweep": 1},
    "DynamoDB outage": {"outage": 0.05},
    "delete fails after success": {"delete_failed": 0.05},
    "visibility < timeout": {"short_visibility": 0.05},
}
#: Every consumer ``--implementations`` takes: the default ones and the controls.
KNOWN_IMPLEMENTATIONS = (
    *IMPLEMENTATIONS,
    "once-unfenced",
    "naive-unordered",
    "once-atomic",
    "once-staged",
    "once-atomic-sns",
    "once-atomic-events",
    "powertools-two-hop",
)
#: The consumers that must keep every invariant (the exit code says whether they did).
ONCE_CONSUMERS = (
    "once",
    "once-nobackoff",
    "once-atomic",
    "once-staged",
    "once-atomic-sns",
    "once-atomic-events",
)
_ALL_OFF = {k: 0.0 for k in DEFAULT_RATES} | {"skew": 0, "redrive": 0, "ttl_sweep": 0}
#: The shortest ``--retention-s``: longer than an invocation can run from its claim to its
#: business code, so that a retention window is something the invariants can judge.
MIN_RETENTION_S = int(TIMEOUT_S + PAUSE_MAX_S) + 10


#: ``make chaos``'s one-line help, and its exit codes.
HELP = "fault-injection harness: once (with and without retry backoff) vs Powertools vs naive"
EPILOG = epilog(
    EngineNotInstalled,
    JavaMissing,
    UnshareNotPermitted,
    EngineFailed,
    HarnessFailed,
    ExampleShadowed,
    failure="once (with or without backoff, once-atomic, once-staged, once-atomic-sns or "
    "once-atomic-events) violated an invariant or lost a message",
)


def build_parser() -> argparse.ArgumentParser:
    """``make chaos``'s options (``make chaos ARGS="..."`` passes them); ``run`` is what it
    does."""
    parser = argparse.ArgumentParser(
        prog="python -m proof.chaos",
        description=HELP[0].upper() + HELP[1:] + ".",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--engine",
        choices=engines.ENGINES,
        default="dynamodb-local",
        help="where the tables live; moto's conditional writes are not atomic, so only "
        "DynamoDB Local's figures say anything about races (default: %(default)s)",
    )
    parser.add_argument(
        "--deliveries",
        type=int,
        default=2000,
        help="deliveries to aim for, per consumer (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="workload and fault seed (default: %(default)s)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=4,
        help="worker processes per consumer (default: %(default)s)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the report as JSON here (default: none)",
    )
    parser.add_argument(
        "--keep-history",
        type=Path,
        metavar="DIR",
        help="keep each consumer's event history (JSON lines) in DIR, to study a violation "
        "(default: deleted after the run)",
    )
    parser.add_argument(
        "--per-fault",
        type=Path,
        metavar="PNG",
        help="also run each fault kind alone and plot violations to PNG (default: no)",
    )
    parser.add_argument(
        "--per-fault-deliveries",
        type=int,
        metavar="N",
        help="deliveries per consumer for each fault of --per-fault (default: --deliveries "
        "/ 20, at least 300)",
    )
    parser.add_argument(
        "--implementations",
        default=",".join(IMPLEMENTATIONS),
        help="comma-separated, of once, once-nobackoff (once with its retry backoff off: "
        "failed and BUSY records wait for the queue's visibility timeout), once-unfenced "
        "(the control run: once without its fence), powertools, naive, naive-unordered "
        "(the FIFO control: a loop that ignores message groups), once-atomic (the two-hop "
        "workload: the credit committed with attempt.write, a notification sent through the "
        "outbox to a second queue, applied by a second once consumer keyed on SOURCE_KEY), "
        'once-staged (the same business code built with effects="staged": no claim, one '
        "write commits it), once-atomic-sns (once-atomic with an SNS hop: hop 1 publishes to "
        "a topic that feeds hop 2's queue, raw message delivery off), once-atomic-events "
        "(once-atomic through EventBridge: hop 1 puts events on a bus, a rule of which sends "
        "each whole to hop 2's queue), powertools-two-hop (the "
        "same workload written the documented way with Powertools) "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--fifo",
        action="store_true",
        help="FIFO queues, message group = account; adds the order checks (default: standard)",
    )
    parser.add_argument(
        "--retention-s",
        type=int,
        metavar="N",
        help=f"keep records N seconds (at least {MIN_RETENTION_S}) and sweep them as "
        "DynamoDB's TTL does, the first wave lasting until a sweep has deleted a record; a "
        "repeat after a record expired is allowed, within its window it is a violation "
        "(default: each consumer's own retention)",
    )
    parser.add_argument(
        "--reuse",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="once's two-hop consumers: send about SHARE of the first wave's payment ids again "
        "in a third wave, once the harness let their hop-1 records' retention pass (each "
        "done, expired and swept): new operations on old keys, while hop 2 keeps its records "
        "of the first ones (default: %(default)s)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the harness as ``args`` say, print its report; the exit code is ``verdict``'s."""
    if args.retention_s is not None and args.retention_s < MIN_RETENTION_S:
        raise UsageError(
            f"--retention-s {args.retention_s} is too short: the harness needs at least "
            f"{MIN_RETENTION_S} s to tell a record's lifetime from one invocation's run"
        )
    unknown = set(args.implementations.split(",")) - set(KNOWN_IMPLEMENTATIONS)
    if unknown:
        raise UsageError(
            f"--implementations: unknown {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(KNOWN_IMPLEMENTATIONS)}"
        )
    reusing = set(args.implementations.split(",")) - set(twohop.ONCE_EFFECTS)
    if args.reuse and reusing:
        raise UsageError(
            f"--reuse is for once's two-hop consumers ({', '.join(twohop.ONCE_EFFECTS)}), "
            f"not {', '.join(sorted(reusing))}: the one-hop ledger refuses an id's other amount"
        )
    example.require()  # before any engine starts: the harness runs the checkout's example
    if args.engine == "dynamodb-local":
        engines.enter_private_netns(sys.argv[1:], "proof.chaos")
    console = Console(stderr=True)
    impls = tuple(args.implementations.split(","))
    with engines.MotoServer() as moto:
        if args.engine == "dynamodb-local":
            with engines.DynamoDBLocal() as ddb:
                runs, per_fault = _run_all(
                    args, impls, Endpoints(moto.endpoint, ddb.endpoint), console
                )
        else:
            runs, per_fault = _run_all(
                args, impls, Endpoints(moto.endpoint, moto.endpoint), console
            )
    out = Console()
    summary.show(runs, out)
    if per_fault and args.per_fault:
        summary.plot(per_fault, args.per_fault, "FIFO" if args.fifo else "standard")
        out.print(f"plot written to {args.per_fault}")
    if args.json:
        doc = summary.document(
            runs,
            engine=args.engine,
            seed=args.seed,
            per_fault={k: summary.document(v) for k, v in per_fault.items()},
            fifo=args.fifo,
            retention_s=args.retention_s,
        )
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    code, why = verdict(runs, args.keep_history)
    out.print(why)
    return code


def verdict(runs: list[Run], history_dir: Path | None) -> tuple[int, str]:
    """The exit code and the sentence that says why: which of once's consumers broke which
    invariant how often (the peers' violations are measured, never a failure)."""
    broken = {
        r.impl: {name: n for name, n in r.violations.items() if n}
        for r in runs
        if r.impl in ONCE_CONSUMERS and any(r.violations.values())
    }
    if not broken:
        checked = [r.impl for r in runs if r.impl in ONCE_CONSUMERS]
        if not checked:
            return 0, "exit 0: no once consumer was in this run, so nothing was asserted"
        return 0, f"exit 0: {' and '.join(checked)} kept every invariant and lost nothing"
    never = {r.impl: r.faults.get("lost_never_delivered", 0) for r in runs}
    found = "; ".join(
        f"{impl}: "
        + ", ".join(f"{name} {n}" for name, n in counts.items())
        + (f" ({never[impl]} lost never delivered: the queue engine's)" if never[impl] else "")
        for impl, counts in broken.items()
    )
    where = (
        f"the histories are in {history_dir}"
        if history_dir
        else "run again with --keep-history DIR to keep the events behind it"
    )
    return 1, f"exit 1: {found}; {where}"


def _run_all(
    args: argparse.Namespace, impls: tuple[str, ...], endpoints: Endpoints, console: Console
) -> tuple[list[Run], dict[str, list[Run]]]:
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(impl: str, done: float) -> None:
            if impl not in tasks:
                tasks[impl] = bar.add_task(f"chaos {impl}", total=1.0)
            bar.update(tasks[impl], completed=max(0.0, min(1.0, done)))

        runs = chaos(
            args.deliveries,
            args.seed,
            endpoints,
            workers=args.workers,
            implementations=impls,
            progress=progress,
            history_dir=args.keep_history,
            fifo=args.fifo,
            retention_s=args.retention_s,
            reuse=args.reuse,
        )
        per_fault: dict[str, list[Run]] = {}
        if args.per_fault:
            for name, rates in SINGLE_FAULTS.items():
                tasks.clear()
                per_fault[name] = chaos(
                    args.per_fault_deliveries or max(300, args.deliveries // 20),
                    args.seed,
                    endpoints,
                    workers=args.workers,
                    implementations=impls,
                    rates=_ALL_OFF | rates,
                    progress=progress,
                    fifo=args.fifo,
                    retention_s=args.retention_s,
                )
    return runs, per_fault
