"""``make demo``: the local cloud, the emulated mapping and the workload, end to end.

Why a module apart from the CLI: the tests drive the same function the command runs, and
the orchestration (start, send, drain, check, stop) is easier to read without argparse.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from once import constants as c
from oncecli.aws import queue_depth
from oncecli.localcloud import cloud as localcloud
from oncecli.project import Project
from proof import example
from proof.demo import verdict, workload


@dataclass
class DemoOptions:
    messages: int = 300
    duplicate_rate: float = 0.2
    bad_rate: float = 0.05
    workers: int | None = None
    engine: str = "moto"
    json_path: str | None = None
    assembly: Path | None = None
    context: dict[str, str] = field(default_factory=dict)
    timeout_s: float | None = None
    seed: int = 7
    #: The FIFO variant of the stack (``-c fifo=true``), its order checked.
    fifo: bool = False


def run(options: DemoOptions, argv: list[str], console: Console) -> dict[str, Any]:
    """Run the demo and return its report (the caller decides the exit code)."""
    # The example app's handler and ledger, from the checkout (the wheel does not ship them);
    # the mapping's worker processes inherit the sys.path this sets.
    functions = example.require()
    plan = workload.build(options.messages, options.duplicate_rate, options.bad_rate, options.seed)
    started = time.monotonic()
    with console.status(f"starting the local cloud ({options.engine})..."):
        cloud = localcloud.start(
            options.engine,
            argv,
            module="proof.demo",
            assembly=options.assembly,
            context=options.context,
            # The example's app, wherever in the checkout the demo is started.
            project=None if options.assembly else Project.at(functions.parent),
        )
    try:
        setup_s = time.monotonic() - started
        config, function = cloud.mapping_config(), cloud.function_config()
        workers = options.workers or config.max_concurrency or 2
        mapping = cloud.mapping(workers, "workers.log")
        console.print(
            f"[bold]local cloud[/] {cloud.only().stack} on {options.engine} "
            f"(sqs {cloud.endpoints['sqs']}, dynamodb {cloud.endpoints['dynamodb']}) "
            f"ready in {setup_s:.1f} s; {len(cloud.notes)} local patches "
            f"(see `once up` for the list)"
        )
        console.print(
            f"[bold]mapping[/] batch {config.batch_size}, window {config.batching_window_s:g} s, "
            f"max concurrency {config.max_concurrency}, visibility {config.visibility_timeout_s}"
            f" s, maxReceiveCount {config.max_receive_count}, function timeout "
            f"{function.timeout_s} s, {mapping.concurrency} worker processes"
        )
        timeout_s = options.timeout_s or (
            60
            + options.messages / 10
            + (config.max_receive_count or 5) * config.visibility_timeout_s * 1.5
        )
        sqs, ddb = cloud.client("sqs"), cloud.client("dynamodb")
        producer = workload.Producer(sqs, config.queue_url, fifo=options.fifo)
        prefix = function.environment.get(c.ENV_SERVICE_NAME, c.DEFAULT_SERVICE_NAME)
        is_done = workload.completed_check(ddb, cloud.outputs["IdempotencyTableName"], prefix)
        drain_started = time.monotonic()
        with (
            mapping,
            Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=console,
                transient=False,
            ) as bar,
        ):
            task = bar.add_task("draining", total=plan.size, note="")
            for group in plan.groups:
                producer.send_group(group)
            producer.send_late(plan.late, is_done, timeout_s / 2)
            deadline = drain_started + timeout_s
            while time.monotonic() < deadline:
                left = queue_depth(sqs, config.queue_url).total
                stats = mapping.snapshot()
                bar.update(
                    task,
                    completed=len(producer.sent) - left,
                    note=f"{stats['invocations']} invocations, {stats['retried']} to redeliver",
                )
                if left == 0 and stats["deleted"] > 0:
                    break
                time.sleep(0.5)
        wall_s = time.monotonic() - started
        drain_s = time.monotonic() - drain_started
        with console.status("checking the ledger, the records and the DLQ..."):
            result = verdict.check(
                workload=plan,
                sent=producer.sent,
                deleted=mapping.stats.deleted_ids,
                ddb=ddb,
                sqs=sqs,
                # The consumer's outputs and the example's own (its ledger, its notifications).
                outputs={**cloud.outputs_of(cloud.only().stack), **cloud.outputs},
                prefix=prefix,
                fifo=options.fifo,
            )
        result.update(
            {
                "engine": options.engine,
                "workers": mapping.concurrency,
                "wall_s": round(wall_s, 1),
                "drain_s": round(drain_s, 1),
                "setup_s": round(setup_s, 1),
                "mapping": mapping.snapshot(),
                "local_patches": cloud.notes,
            }
        )
        return result
    finally:
        cloud.stop()
