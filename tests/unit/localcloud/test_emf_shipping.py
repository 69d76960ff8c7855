"""The local cloud keeps what a function's EMF lines say, as CloudWatch Logs would: every
metric value of every blob Powertools writes (once's and a team's own), and nothing from a
line that is not EMF."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)
from hypothesis import given
from hypothesis import strategies as st

from oncecli.localcloud.emf import Shipper, parse

names = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,15}", fullmatch=True)


def _blob(namespace: str, metrics: dict[str, list[int]], dimensions: dict[str, str]) -> str:
    provider = AmazonCloudWatchEMFProvider(
        metric_set={}, dimension_set={}, metadata_set={}, default_dimensions={},
        namespace=namespace,
    )  # fmt: skip
    for name, values in metrics.items():
        for value in values:
            provider.add_metric(name=name, unit="Count", value=value)
    for key, value in {**dimensions, "service": "shop"}.items():
        provider.add_dimension(name=key, value=value)
    return json.dumps(provider.serialize_metric_set())


@given(
    namespace=names,
    metrics=st.dictionaries(
        names, st.lists(st.integers(0, 10**6), min_size=1, max_size=4), min_size=1, max_size=5
    ),
    dimensions=st.dictionaries(names, names, max_size=3),
)
def test_every_value_of_a_powertools_blob_is_kept_with_its_dimensions(
    namespace: str, metrics: dict[str, list[int]], dimensions: dict[str, str]
) -> None:
    dimensions.pop("service", None)
    metrics = {k: v for k, v in metrics.items() if k not in dimensions and k != "service"}
    if not metrics:
        return
    data = parse(_blob(namespace, metrics, dimensions))
    kept: dict[str, list[float]] = {}
    for datum in data:
        assert datum.namespace == namespace
        assert dict(datum.dimensions) == {**dimensions, "service": "shop"}
        kept.setdefault(datum.name, []).append(datum.value)
    assert {k: sorted(v) for k, v in kept.items()} == {
        k: sorted(float(x) for x in v) for k, v in metrics.items()
    }


@given(st.text())
def test_a_line_that_is_not_emf_is_no_metric(line: str) -> None:
    if '"_aws"' in line:
        return
    assert parse(line) == []


def test_a_json_log_line_with_an_aws_key_that_is_not_emf_is_no_metric() -> None:
    assert parse('{"_aws": "a team\'s own key", "level": "INFO"}') == []
    assert parse('{"_aws": {"Timestamp": 1}}') == []


class FakeCloudWatch:
    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []

    def put_metric_data(self, **request: Any) -> None:
        self.puts.append(request)


def test_the_shipper_ships_new_complete_lines_once_and_not_an_earlier_run_s(
    tmp_path: Path,
) -> None:
    log = tmp_path / "workers.log"
    earlier = _blob("Once", {"Processed": [1]}, {"service": "shop"})
    log.write_text(earlier + "\n")
    cloudwatch = FakeCloudWatch()
    shipper = Shipper(cloudwatch)
    shipper.follow(log)
    assert shipper.ship() == 0  # the earlier run's line stays unshipped
    now = _blob("Once", {"Duplicate": [1]}, {"service": "shop"})
    with log.open("a") as handle:
        handle.write("a team's own log line\n" + now + "\n" + now[:10])  # the last, unfinished
    assert shipper.ship() == 1
    with log.open("a") as handle:
        handle.write(now[10:] + "\n")
    assert shipper.ship() == 1
    assert shipper.ship() == 0
    shipped = [d["MetricName"] for put in cloudwatch.puts for d in put["MetricData"]]
    assert shipped == ["Duplicate", "Duplicate"]


class _Logs:
    """CloudWatch Logs as PutLogEvents sees a call: it refuses one over its limits."""

    class exceptions:
        class ResourceAlreadyExistsException(Exception):
            pass

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.groups: set[str] = set()

    def create_log_group(self, logGroupName: str) -> None:
        if logGroupName in self.groups:
            raise self.exceptions.ResourceAlreadyExistsException()
        self.groups.add(logGroupName)

    def create_log_stream(self, logGroupName: str, logStreamName: str) -> None:
        pass

    def put_log_events(self, logGroupName: str, logStreamName: str, logEvents: list) -> None:
        assert 0 < len(logEvents) <= 10_000
        assert sum(len(e["message"].encode()) + 26 for e in logEvents) <= 1_048_576
        self.calls.append(logEvents)


class _CloudWatch:
    def put_metric_data(self, **request: Any) -> None:
        pass


@given(st.lists(st.text(max_size=200_000).map(lambda t: t.replace("\n", " ")), max_size=30))
def test_every_line_reaches_the_log_group_in_order_within_put_log_events_limits(lines):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workers.log"
        path.write_text("")
        logs = _Logs()
        shipper = Shipper(_CloudWatch(), logs)
        shipper.follow(path, "/aws/lambda/team")
        shipper.follow(path, "/aws/lambda/team")  # a second follow finds the group made
        path.write_text("".join(f"{line}\n" for line in lines))
        shipper.ship()
    shipped = [event["message"] for call in logs.calls for event in call]
    assert shipped == [line for line in "".join(f"{x}\n" for x in lines).splitlines()]
