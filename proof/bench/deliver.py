"""What once.testing costs a team's test suite: the time of one ``once_env.deliver``.

    python -m proof.bench.deliver [--n 100]

Each row is one kind of delivery to a handler whose business code does nothing, repeated
``n`` times in an ``OnceEnv`` of its own (in-process moto, an empty table), after a few
unmeasured warm-up runs; the table gives the median and the 90th percentile in milliseconds.
A takeover row times only the delivery after ``expire_leases``, not the crash that set it
up. The first row is the fixture itself: entering and leaving ``OnceEnv`` (moto's mock, the
table, the queues). The runtime's log lines and metrics are written to /dev/null, as a test
run's capture would swallow them, so the terminal does not time itself.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from once import make_handler
from once.observability import logger as runtime_logger
from once.testing import OnceEnv

WARMUP = 5
BODY = {"orderId": "o-dup", "qty": 1}


def _ship(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
    return {"orderId": body["orderId"], "fence": attempt.fence}


def _timed(run: Callable[[], Any], n: int, prepare: Callable[[], Any] | None = None) -> list[float]:
    """Milliseconds of ``run``, ``n`` times after the warm-up; ``prepare`` is not timed."""
    times = []
    for index in range(WARMUP + n):
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        run()
        if index >= WARMUP:
            times.append((time.perf_counter() - start) * 1000)
    return times


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The runtime's log handler and metrics' print go to /dev/null meanwhile."""
    handlers = logging.getLogger(runtime_logger.name).handlers
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        streams = [h.setStream(sink) for h in handlers if isinstance(h, logging.StreamHandler)]
        try:
            yield
        finally:
            for handler, stream in zip(handlers, streams, strict=False):
                if stream is not None and isinstance(handler, logging.StreamHandler):
                    handler.setStream(stream)


def _row(
    name: str, delivery: Callable[[OnceEnv, Any, Iterator[str]], list[float]]
) -> tuple[str, list[float]]:
    """One row, in an OnceEnv of its own: every row starts from an empty table."""
    keys = (f"o-{i}" for i in itertools.count())
    with OnceEnv() as env:
        handler = make_handler(_ship, key="orderId")
        env.deliver(handler, [BODY])
        return name, delivery(env, handler, keys)


def _takeovers(env: OnceEnv, handler: Any, keys: Iterator[str], n: int) -> list[float]:
    stuck: dict[str, Any] = {}

    def crash_and_expire() -> None:
        stuck["body"] = {"orderId": next(keys)}
        env.deliver(handler, [stuck["body"]], crash="after_process")
        env.expire_leases()

    return _timed(lambda: env.deliver(handler, [stuck["body"]]), n, crash_and_expire)


def measure(n: int) -> list[tuple[str, list[float]]]:
    def enter_and_leave() -> None:
        with OnceEnv():
            pass

    return [
        ("OnceEnv setup and teardown", _timed(enter_and_leave, n)),
        _row(
            "new key, 1 body",
            lambda env, h, keys: _timed(lambda: env.deliver(h, [{"orderId": next(keys)}]), n),
        ),
        _row("duplicate, 1 body", lambda env, h, _: _timed(lambda: env.deliver(h, [BODY]), n)),
        _row(
            "10 new keys, one batch",
            lambda env, h, keys: _timed(
                lambda: env.deliver(h, [{"orderId": next(keys)} for _ in range(10)]), n
            ),
        ),
        _row(
            'crash="after_process", 1 body',
            lambda env, h, keys: _timed(
                lambda: env.deliver(h, [{"orderId": next(keys)}], crash="after_process"), n
            ),
        ),
        _row(
            "takeover after expire_leases",
            lambda env, h, keys: _takeovers(env, h, keys, n),
        ),
    ]


def render(rows: list[tuple[str, list[float]]], n: int) -> str:
    lines = [
        f"once_env.deliver on in-process moto, {n} runs per row, Python {sys.version.split()[0]}",
        "",
        "| delivery | median ms | p90 ms |",
        "|---|---:|---:|",
    ]
    for name, times in rows:
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
        lines.append(f"| {name} | {statistics.median(times):.1f} | {p90:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="measured runs per row")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    with _quiet():
        rows = measure(args.n)
    print(render(rows, args.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
