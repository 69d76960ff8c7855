"""The page's footprint section and goal rows: log bytes per record, happy path, and the
peak RSS of a warm function after a batch (``footprint.py`` measures them)."""

from __future__ import annotations

from typing import Any

from proof.bench.page import Rows, verdict


def _config(result: dict[str, Any], module: str, level: str) -> dict[str, Any]:
    return next(c for c in result["configs"] if c["module"] == module and c["level"] == level)


def _last(config: dict[str, Any]) -> dict[str, Any]:
    """The figures of the configuration's largest (last) batch."""
    last: dict[str, Any] = config["batches"][-1]
    return last


def _total(batch: dict[str, Any]) -> float:
    """Bytes per record shipped to CloudWatch Logs: log lines and EMF blobs."""
    return float(batch["log_bytes_per_record"] + batch["emf_bytes_per_record"])


def goal_rows(result: dict[str, Any]) -> Rows:
    once = _config(result, "once_handler", "INFO")
    pt = _config(result, "powertools_handler", "INFO")
    size = result["batches"][-1]
    return [
        [
            f"log bytes per record at INFO, happy path (batch of {size}), once / Powertools",
            f"{_total(_last(once)):.0f} / {_total(_last(pt)):.0f} B",
            "",
            "",
            "measured",
        ],
        [
            f"peak RSS after a batch of {size}, once / Powertools",
            f"{once['rss_peak_mib']:.1f} / {pt['rss_peak_mib']:.1f} MiB",
            "",
            "≤ Powertools",
            verdict(once["rss_peak_mib"] <= pt["rss_peak_mib"]),
        ],
    ]


def log_rows(result: dict[str, Any]) -> Rows:
    return [
        [
            config["label"],
            config["level"],
            str(batch["batch"]),
            f"{batch['log_lines_per_record']:.2f}",
            f"{batch['log_bytes_per_record']:.0f}",
            f"{batch['emf_lines']:.0f}",
            f"{batch['emf_bytes_per_record']:.1f}",
            f"{_total(batch):.0f}",
        ]
        for config in result["configs"]
        for batch in config["batches"]
    ]


def rss_rows(result: dict[str, Any]) -> Rows:
    return [
        [
            config["label"],
            config["level"],
            f"{config['rss_before_mib']:.1f}",
            f"{config['rss_peak_mib']:.1f}",
            f"{config['rss_peak_mib_min']:.1f}-{config['rss_peak_mib_max']:.1f}",
            f"{config['rss_peak_mib'] - config['rss_before_mib']:+.1f}",
        ]
        for config in result["configs"]
    ]


def section(page: Any, result: dict[str, Any]) -> None:
    """Render the section on ``page`` (anything with ``text`` and ``table``)."""
    once = _config(result, "once_handler", "INFO")
    quiet = _config(result, "once_handler", "WARNING")
    size = result["batches"][-1]
    saved = _total(_last(once)) - _total(_last(quiet))
    pt = _config(result, "powertools_handler", "INFO")
    quiet_pt = (
        " Powertools' documented consumer writes nothing on the happy path at INFO: no "
        "line per record, and no metrics."
        if all(_total(b) == 0 for b in pt["batches"])
        else ""
    )
    page.text(f"""
## Footprint: logs and memory

What each function writes to stdout and stderr (what Lambda ships to CloudWatch Logs) per
new record, happy path, for the minimal once module beside the minimal Powertools one, in
fresh interpreters against the local endpoint of the cold start section (every call
succeeds, so every record is new and handled). After a cold batch of one record, each
batch is counted on its own; EMF metric blobs (JSON lines with `_aws`) apart from log
lines. Medians of {result["runs"]} processes per row.{quiet_pt}
""")
    page.table(
        "Log output per new record (bytes)",
        [
            "module",
            "level",
            "batch",
            "log lines",
            "log bytes",
            "EMF blobs in batch",
            "EMF bytes",
            "total",
        ],
        log_rows(result),
    )
    sample = once["sample_line"]
    page.text(
        "once writes one JSON line per record: `message_id`, `key`, `fence`, `outcome`, "
        "and `reason` when there is one, beside the request id and the service. It is what "
        "lets an operator trace one message's fate (the key it claimed, under which fence, "
        "and how it ended) with a Logs Insights query on its message id. The line is INFO "
        "when the record is done (processed, duplicate, its owed messages sent) or waits "
        "for a live claim (busy), WARNING otherwise (`Outcome.log_level`). At WARNING "
        "(`POWERTOOLS_LOG_LEVEL`) an operator keeps the line of every record that failed, "
        "was refused, went to the DLQ, lost its lease or still owes messages, and once's "
        "own warnings and errors; what goes is the happy path's trace (which message "
        "completed, when, under which fence), still counted per batch in the EMF blob. "
        "That saves "
        f"{saved:.0f} bytes per record in batches of {size}, "
        f"{saved:.0f} MB per million records."
        + (f" A happy-path line:\n\n```json\n{sample}\n```" if sample else "")
    )
    before = "".join(f" and a batch of {n}" for n in result["batches"][:-1])
    page.text(f"""
Memory of a warm function: peak RSS (`ru_maxrss`) of the process before and after a batch
of {size} new records, handled after the cold batch{before}.
""")
    page.table(
        f"Peak RSS around a batch of {size} (MiB)",
        ["module", "level", "before", "after (median)", "after min-max", "growth"],
        rss_rows(result),
    )
