"""What a fresh interpreter loads and does to import once, build a handler and handle its
first record: only what that record needs. Tracing (aws_xray_sdk), the testing kit, and boto3
with its s3transfer (once builds its clients on botocore when nothing loaded boto3) stay out;
so do Powertools' package of event classes (once reads the SQS records itself), botocore's
scan of every service it knows for each model type once loads (once asks for its services by
name), and the send rules' regular expressions (compiled at their first use). Checked in a
subprocess, by its ``sys.modules``, against a local endpoint that answers every AWS call with
an empty success, in both modes (``effects="any"`` and ``"staged"``)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import UnknownServiceError
from botocore.loaders import Loader

from once import botoloader, sqsrecord
from proof.bench.coldstart import _answers, _one_record_event

FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"
NEVER = ("aws_xray_sdk", "once.testing", "boto3", "s3transfer", "pytest", "moto")
#: Powertools' package of event classes: its ``__init__`` imports every one of them.
EVENT_CLASSES = "aws_lambda_powertools.utilities.data_classes"

PROBE = """
import json, sys

import botocore.loaders

EVENT = json.loads({event!r})
SCANS = []
scan = botocore.loaders.Loader.list_available_services


def counted(self, type_name):
    SCANS.append(type_name)
    return scan(self, type_name)


botocore.loaders.Loader.list_available_services = counted


def loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] in {never!r} or m in {never!r})


def event_classes():
    return sorted(m for m in sys.modules if m.startswith({event_classes!r}))


from once import make_handler


def process(body, attempt):
    return body


handler = make_handler(
    process, key="paymentId", table_name="idem", key_prefix="cold", effects={effects!r}
)
after_build = loaded()


class Context:
    aws_request_id = "cold"

    def get_remaining_time_in_millis(self):
        return 60000


response = handler(EVENT, Context())
from once import sendrules

print(json.dumps({{"after_build": after_build, "after_record": loaded(), "response": response,
                  "event_classes": event_classes(), "scans": SCANS,
                  "patterns": sendrules.pattern.cache_info().currsize}}))
"""


def _run(extra_env: dict[str, str], effects: str = "any") -> dict[str, Any]:
    with _answers() as url:
        env = {
            k: v
            for k, v in os.environ.items()
            if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")
            and not k.startswith("AWS_ENDPOINT_URL")
            and k not in ("LAMBDA_TASK_ROOT", "_X_AMZN_TRACE_ID")
        }
        env.update(
            {
                "PYTHONPATH": str(FUNCTIONS),
                "AWS_ENDPOINT_URL": url,
                "NO_PROXY": "127.0.0.1",
                **extra_env,
            }
        )
        probe = PROBE.format(
            event=_one_record_event(), never=NEVER, event_classes=EVENT_CLASSES, effects=effects
        )
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@functools.cache
def _first_record(effects: str) -> dict[str, Any]:
    """``_run`` in the function's environment, once per mode for the module's tests."""
    return _run({}, effects)


@pytest.mark.parametrize("effects", ["any", "staged"])
def test_import_build_and_first_record_load_only_what_the_record_needs(effects: str) -> None:
    result = _first_record(effects)
    assert result["response"] == {"batchItemFailures": []}
    assert result["after_build"] == []
    assert result["after_record"] == []


@pytest.mark.parametrize("effects", ["any", "staged"])
def test_the_first_record_scans_no_list_of_every_service(effects: str) -> None:
    # botocore's loader lists every service it knows (some 400 directories) before it loads
    # a model of one, once per model type: about 7 ms each, two types for DynamoDB.
    assert _first_record(effects)["scans"] == []


@pytest.mark.parametrize("effects", ["any", "staged"])
def test_a_record_that_sends_nothing_compiles_no_send_rule(effects: str) -> None:
    # once.sendrules' regular expressions are for sends and DLQ copies: compiled at first use.
    assert _first_record(effects)["patterns"] == 0


def test_the_sqs_records_are_read_without_powertools_event_classes() -> None:
    # once reads its SQS records itself (once.sqsrecord): Powertools' SQSRecord would bring its
    # package of event classes, whose __init__ imports every one of them (some 10 ms).
    assert _first_record("any")["event_classes"] == []


def test_tracing_is_loaded_only_where_it_is_on() -> None:
    # In Lambda with active tracing the first batch opens its subsegment: X-Ray is loaded
    # then, and only then.
    result = _run({"LAMBDA_TASK_ROOT": "/var/task", "_X_AMZN_TRACE_ID": "Root=1-0-0;Sampled=0"})
    assert result["after_build"] == []
    assert any(m.startswith("aws_xray_sdk") for m in result["after_record"])


@pytest.mark.parametrize(
    "type_name", ["service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2"]
)
def test_once_loader_knows_every_service_botocores_knows(type_name: str) -> None:
    plain = botocore.session.get_session()
    ours = botoloader.named_service_loader(plain)
    assert isinstance(ours, botoloader.NamedServiceLoader)
    assert ours.search_paths == plain.get_component("data_loader").search_paths
    every = Loader.list_available_services(ours, "service-2")
    available = ours.list_available_services(type_name)
    known = plain.get_component("data_loader").list_available_services(type_name)
    for name in [*every, "nope", "", ".", "..", "dynamodb/2012-08-10", "../data/dynamodb", 7]:
        assert (name in available) == (name in known), name
    assert list(available) == known
    assert len(available) == len(known)


def test_once_loader_loads_the_models_botocores_loads() -> None:
    plain = botocore.session.get_session()
    ours = botoloader.named_service_loader(plain)
    theirs = plain.get_component("data_loader")
    for service in ("dynamodb", "sqs", "sns"):
        for type_name in ("service-2", "endpoint-rule-set-1"):
            assert ours.load_service_model(service, type_name) == theirs.load_service_model(
                service, type_name
            )
    with pytest.raises(UnknownServiceError) as refused:
        ours.load_service_model("nope", "service-2")
    with pytest.raises(UnknownServiceError) as refused_too:
        theirs.load_service_model("nope", "service-2")
    assert str(refused.value) == str(refused_too.value)


def test_once_reads_an_sqs_record_as_powertools_reads_it() -> None:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    standard = json.loads(_one_record_event())["Records"][0]
    fifo = json.loads(json.dumps(standard))
    fifo["attributes"]["MessageGroupId"] = "g-1"
    fifo["eventSourceARN"] += ".fifo"
    for raw in (standard, fifo):
        ours, theirs = sqsrecord.SqsRecord(raw), SQSRecord(raw)
        for name in ("message_id", "receipt_handle", "body", "event_source_arn", "raw_event"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.raw_event is raw
        assert ours.attributes.message_group_id == theirs.attributes.message_group_id
        for key in ("ApproximateReceiveCount", "MessageGroupId", "absent"):
            assert ours.attributes.get(key) == theirs.attributes.get(key)
