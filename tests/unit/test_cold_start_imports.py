"""What a fresh interpreter loads to import once, build a handler and handle its first
record: only what that record needs. Tracing (aws_xray_sdk), the testing kit, and boto3 with
its s3transfer (once builds its clients on botocore when nothing loaded boto3) stay out.
Checked in a subprocess, by its ``sys.modules``, against a local endpoint that answers every
AWS call with an empty success."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from proof.bench.coldstart import _answers, _one_record_event

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
NEVER = ("aws_xray_sdk", "once.testing", "boto3", "s3transfer", "pytest", "moto")

PROBE = """
import json, sys

EVENT = json.loads({event!r})


def loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] in {never!r} or m in {never!r})


from once import make_handler


def process(body, attempt):
    return body


handler = make_handler(process, key="paymentId", table_name="idem", key_prefix="cold")
after_build = loaded()


class Context:
    aws_request_id = "cold"

    def get_remaining_time_in_millis(self):
        return 60000


response = handler(EVENT, Context())
print(json.dumps({{"after_build": after_build, "after_record": loaded(), "response": response}}))
"""


def _run(extra_env: dict[str, str]) -> dict[str, object]:
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
        probe = PROBE.format(event=_one_record_event(), never=NEVER)
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_import_build_and_first_record_load_only_what_the_record_needs() -> None:
    result = _run({})
    assert result["response"] == {"batchItemFailures": []}
    assert result["after_build"] == []
    assert result["after_record"] == []


def test_tracing_is_loaded_only_where_it_is_on() -> None:
    # In Lambda with active tracing the first batch opens its subsegment: X-Ray is loaded
    # then, and only then.
    result = _run({"LAMBDA_TASK_ROOT": "/var/task", "_X_AMZN_TRACE_ID": "Root=1-0-0;Sampled=0"})
    assert result["after_build"] == []
    assert any(m.startswith("aws_xray_sdk") for m in result["after_record"])  # type: ignore[union-attr]
