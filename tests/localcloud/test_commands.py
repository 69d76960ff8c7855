"""Each CLI command against the local cloud, and the CLI's exit codes."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from oncecli import operate
from oncecli.aws import queue_depth
from oncecli.cli import build_parser, main
from oncecli.errors import EngineNotInstalled, UnshareNotPermitted, UsageError
from oncecli.localcloud import engines
from oncecli.project import ROOT
from tests.localcloud.helpers import CONTEXT, mapping_for


def once(cloud, *args: str) -> int:
    return main([*args, "--endpoint-url", cloud.endpoints["sqs"]])


def depth(cloud, output: str) -> int:
    return queue_depth(cloud.client("sqs"), cloud.outputs[output]).total


def drain(cloud, output: str) -> None:
    """Delete every message of a queue (PurgeQueue may run once a minute)."""
    sqs = cloud.client("sqs")
    while messages := sqs.receive_message(
        QueueUrl=cloud.outputs[output], MaxNumberOfMessages=10
    ).get("Messages"):
        for m in messages:
            sqs.delete_message(QueueUrl=cloud.outputs[output], ReceiptHandle=m["ReceiptHandle"])


def test_send_status_inspect(cloud, tmp_path, capsys):
    bodies = tmp_path / "payments.jsonl"
    bodies.write_text(
        "\n".join(
            json.dumps({"paymentId": f"cmd-{n}", "account": "acct-x", "amount": 100 + n})
            for n in range(3)
        )
        + "\n"
    )
    assert once(cloud, "send", str(bodies)) == 0
    assert once(cloud, "send", "--count", "4") == 0
    assert once(cloud, "status") == 0
    out = capsys.readouterr().out
    assert "sent 3 of 3" in out and "sent 4 of 4" in out
    assert "queue: waiting" in out and " 7 " in out
    with mapping_for(cloud):
        deadline = time.monotonic() + 30
        while depth(cloud, "QueueUrl") and time.monotonic() < deadline:
            time.sleep(0.3)
    assert depth(cloud, "QueueUrl") == 0
    assert once(cloud, "inspect", "cmd-1") == 0
    out = capsys.readouterr().out
    assert "COMPLETED" in out and "fence" in out and '"amount":101' in out
    assert once(cloud, "status") == 0
    assert "records COMPLETED" in capsys.readouterr().out


def test_inspect_unknown_key(cloud, capsys):
    assert once(cloud, "inspect", "no-such-payment") == 10
    assert "no record payments#no-such-payment" in capsys.readouterr().err


def test_redrive_moves_without_loss(cloud, capsys):
    sqs = cloud.client("sqs")
    for n in range(3):
        sqs.send_message(
            QueueUrl=cloud.outputs["DlqUrl"],
            MessageBody=f"dead {n}",
            MessageAttributes={"why": {"DataType": "String", "StringValue": "t"}},
        )
    before = depth(cloud, "QueueUrl")
    assert once(cloud, "redrive") == 0
    assert "moved 3 messages" in capsys.readouterr().out
    assert depth(cloud, "DlqUrl") == 0
    assert depth(cloud, "QueueUrl") == before + 3
    moved = sqs.receive_message(
        QueueUrl=cloud.outputs["QueueUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    assert {m["Body"] for m in moved} >= {"dead 0", "dead 1", "dead 2"}
    assert all(
        m["MessageAttributes"]["why"]["StringValue"] == "t"
        for m in moved
        if m["Body"].startswith("dead")
    )
    for m in moved:
        sqs.delete_message(QueueUrl=cloud.outputs["QueueUrl"], ReceiptHandle=m["ReceiptHandle"])


def test_stack_not_found(cloud, capsys):
    assert main(["status", "--endpoint-url", cloud.endpoints["sqs"], "--stack", "Nope"]) == 4
    assert "stack Nope not found" in capsys.readouterr().err


def test_no_stack_given(capsys, monkeypatch):
    monkeypatch.delenv("ONCE_STACK", raising=False)
    assert main(["status"]) == 2


def test_no_credentials(capsys, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert main(["status", "--stack", "Once-prod"]) == 3
    assert "no AWS credentials" in capsys.readouterr().err


def test_engine_not_installed(monkeypatch, tmp_path):
    monkeypatch.setenv("ONCE_NODE_MODULES", str(tmp_path))
    with pytest.raises(EngineNotInstalled, match="npm install") as caught:
        engines.dynamodb_local_dir()
    assert caught.value.exit_code == 5


def test_unshare_missing(monkeypatch):
    monkeypatch.setattr(engines, "in_private_netns", lambda: False)
    monkeypatch.delenv(engines.NETNS_ENV, raising=False)
    monkeypatch.setattr(engines.shutil, "which", lambda name: None)
    with pytest.raises(UnshareNotPermitted) as caught:
        engines.enter_private_netns(["up"])
    assert caught.value.exit_code == 7


def test_a_profile_in_another_region_does_not_hide_the_local_stack(cloud, monkeypatch, capsys):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert once(cloud, "status") == 0
    assert "queue: waiting" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flag", "aws_region", "aws_default_region", "expected"),
    [
        (None, "eu-central-1", "eu-west-2", "eu-central-1"),  # AWS_REGION first
        (None, None, "eu-west-2", "eu-west-2"),  # then AWS_DEFAULT_REGION
        ("ap-south-1", "eu-central-1", "eu-west-2", "ap-south-1"),  # --region above both
    ],
)
def test_the_region_is_chosen_as_the_aws_cli_does(
    monkeypatch, tmp_path, flag, aws_region, aws_default_region, expected
):
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name, value in (("AWS_REGION", aws_region), ("AWS_DEFAULT_REGION", aws_default_region)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    argv = ["status", "--stack", "Once-prod", *(["--region", flag] if flag else [])]
    assert operate._session(build_parser().parse_args(argv)).region_name == expected


def test_no_region_anywhere_is_exit_1_with_what_to_do(monkeypatch, tmp_path, capsys):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert main(["status", "--stack", "Once-prod"]) == 1
    assert "no AWS region: pass --region, or set AWS_REGION" in capsys.readouterr().err


def test_send_prints_the_keys_it_sent_and_writes_them_as_json(cloud, tmp_path, capsys):
    bodies = tmp_path / "orders.jsonl"
    bodies.write_text('{"paymentId": "k-1", "amount": 1}\n{"no": "key"}\n')
    report = tmp_path / "sent.json"
    assert once(cloud, "send", str(bodies), "--json", str(report)) == 0
    lines = capsys.readouterr().out.splitlines()
    sent = json.loads(report.read_text())["sent"]
    assert [m["key"] for m in sent] == ["k-1", None]
    assert f"k-1  {sent[0]['message_id']}" in lines
    assert f"-  {sent[1]['message_id']}" in lines
    drain(cloud, "QueueUrl")


def test_redrive_max_is_a_count(cloud, capsys):
    sqs = cloud.client("sqs")
    for n in range(3):
        sqs.send_message(QueueUrl=cloud.outputs["DlqUrl"], MessageBody=f"dead {n}")
    before = depth(cloud, "QueueUrl")
    assert once(cloud, "redrive", "--max", "2") == 0
    assert "moved 2 messages" in capsys.readouterr().out
    assert depth(cloud, "DlqUrl") == 1 and depth(cloud, "QueueUrl") == before + 2
    drain(cloud, "DlqUrl")
    drain(cloud, "QueueUrl")


def test_redrive_leaves_lease_expired_messages_unless_told(cloud, capsys):
    sqs = cloud.client("sqs")
    expired = {"once.reason": {"DataType": "String", "StringValue": "LEASE_EXPIRED"}}
    sqs.send_message(
        QueueUrl=cloud.outputs["DlqUrl"], MessageBody="expired", MessageAttributes=expired
    )
    sqs.send_message(QueueUrl=cloud.outputs["DlqUrl"], MessageBody="poison")
    before = depth(cloud, "QueueUrl")

    assert once(cloud, "redrive") == 0
    out = capsys.readouterr().out
    assert "moved 1 message " in out and "left 1 message for review in the DLQ" in out
    assert "--include-lease-expired" in out
    assert depth(cloud, "DlqUrl") == 1 and depth(cloud, "QueueUrl") == before + 1

    assert once(cloud, "redrive", "--rate", "5") == 2  # the move task cannot leave it behind
    assert "--include-lease-expired" in capsys.readouterr().err
    assert depth(cloud, "DlqUrl") == 1

    assert once(cloud, "redrive", "--include-lease-expired") == 0
    out = capsys.readouterr().out
    assert "moving the messages one by one" in out  # moto: no move task
    assert "moved 1 message " in out and "LEASE_EXPIRED" not in out
    assert depth(cloud, "DlqUrl") == 0 and depth(cloud, "QueueUrl") == before + 2
    drain(cloud, "QueueUrl")


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"once {version('once')}"


def _commands() -> dict[str, argparse.ArgumentParser]:
    (choices,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(choices.choices)


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_option_says_its_default_and_every_command_its_exit_codes(command):
    parser = _commands()[command]
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and "default" in action.help, (command, action.option_strings)
    assert "exit codes:" in parser.epilog
    for code in ("0 ", "1 ", "2 ", "130", "143", "129"):
        assert f"\n  {code}" in parser.epilog, (command, code)
    stack = [a for a in parser._actions if "--stack" in a.option_strings]
    assert not stack or "ONCE_STACK" in stack[0].help


def test_up_prints_its_endpoint_region_and_urls_unbroken_into_a_pipe():
    context = [f"-c{k}={v}" for k, v in CONTEXT.items()]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "oncecli.cli",
            "up",
            "--port",
            "0",
            "--for",
            "0",
            "--no-mapping",
            *context,
        ],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "40"},  # narrower than any URL
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    (up,) = [line for line in lines if " is up (" in line]
    assert re.search(r"--endpoint-url http://127\.0\.0\.1:\d+ --region us-east-1$", up)
    assert "  Region = us-east-1" in lines
    (queue,) = [line for line in lines if line.startswith("  QueueUrl = ")]
    assert re.fullmatch(r"  QueueUrl = https://sqs\.us-east-1\.amazonaws\.com/\d+/\S+", queue)


def test_the_commands_work_on_a_stack_without_the_example_ledger(cloud, capsys):
    """Any stack made of an OnceConsumer: a queue, its DLQ and the idempotency table."""
    template = {
        "Resources": {
            "Dlq": {"Type": "AWS::SQS::Queue"},
            "Source": {"Type": "AWS::SQS::Queue"},
            "Records": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "BillingMode": "PAY_PER_REQUEST",
                    "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
                },
            },
        },
        "Outputs": {
            "QueueUrl": {"Value": {"Ref": "Source"}},
            "DlqUrl": {"Value": {"Ref": "Dlq"}},
            "IdempotencyTableName": {"Value": {"Ref": "Records"}},
        },
    }
    cloud.client("cloudformation").create_stack(
        StackName="Orders-local", TemplateBody=json.dumps(template)
    )
    target = ["--endpoint-url", cloud.endpoints["sqs"], "--stack", "Orders-local"]
    assert main(["send", "--count", "2", *target]) == 0
    assert main(["status", *target]) == 0
    assert main(["redrive", "--max", "1", *target]) == 0
    assert main(["inspect", "o-1", *target]) == 10  # no record yet: found the table, not it
    out = capsys.readouterr()
    assert "sent 2 of 2" in out.out and "queue: waiting" in out.out
    assert "no record once#o-1" in out.err
    assert "no ServiceName output" in out.err and "add_cli_outputs" in out.err


def _stack_on_the_cloud_s_table(cloud, name: str, *, service: str) -> str:
    """A stack of queues whose outputs name the cloud's idempotency table and ``service``;
    the table's name."""
    table = cloud.outputs["IdempotencyTableName"]
    template = {
        "Resources": {"Dlq": {"Type": "AWS::SQS::Queue"}, "Source": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "QueueUrl": {"Value": {"Ref": "Source"}},
            "DlqUrl": {"Value": {"Ref": "Dlq"}},
            "IdempotencyTableName": {"Value": table},
            "ServiceName": {"Value": service},
        },
    }
    cloud.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    return table


def test_inspect_finds_records_by_the_stacks_service_name_output(cloud, capsys):
    """Not the runtime's default prefix: the one the stack's consumer writes its records with."""
    table = _stack_on_the_cloud_s_table(cloud, "Named-local", service="orders")
    cloud.client("dynamodb").put_item(
        TableName=table,
        Item={"id": {"S": "orders#o-9"}, "status": {"S": "COMPLETED"}, "fence": {"N": "1"}},
    )
    target = ["--endpoint-url", cloud.endpoints["sqs"], "--stack", "Named-local"]
    assert main(["inspect", "o-9", *target]) == 0
    assert "orders#o-9" in capsys.readouterr().out


def test_a_taken_port_is_refused_with_the_process_that_holds_it():
    """`once up --port N` on a port another process listens on: EngineFailed naming it."""
    import os
    import socket

    from oncecli.errors import EngineFailed
    from oncecli.localcloud.engines import MotoServer

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(EngineFailed) as caught:
            MotoServer(port=port).start()
    message = str(caught.value)
    assert f"port {port} on 127.0.0.1 is taken by pid {os.getpid()}" in message
    assert "--port 0" in message


def test_a_taken_port_is_refused_before_the_app_is_synthesized(tmp_path):
    """`once up --port N` on a taken port says so at once: the app's synth (tens of seconds
    on a first start) never runs. Its app command leaves a mark if it runs."""
    import socket

    mark = tmp_path / "synthesized"
    (tmp_path / "cdk.json").write_text(json.dumps({"app": f"touch {mark} && sleep 60"}))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        ran = subprocess.run(
            [str(Path(sys.executable).parent / "once"), "up", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert ran.returncode == 8, ran.stdout + ran.stderr
    assert f"port {port} on 127.0.0.1 is taken" in ran.stderr
    assert not mark.exists()


def test_once_env_sets_what_aws_cli_v1_and_v2_read(capsys):
    """AWS CLI v1 takes its region from AWS_DEFAULT_REGION only and ignores
    AWS_ENDPOINT_URL for SQS: both regions are exported and the function awsonce passes
    --endpoint-url on every call; v2 and the SDKs read AWS_ENDPOINT_URL."""
    assert main(["env", "--endpoint-url", "http://127.0.0.1:4999"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1" in lines
    assert "export AWS_ENDPOINT_URL=http://127.0.0.1:4999" in lines
    assert 'awsonce() { aws --endpoint-url http://127.0.0.1:4999 "$@"; }' in lines
    assert "unset AWS_PROFILE AWS_SESSION_TOKEN" in lines
    assert not [line for line in lines if "DYNAMODB" in line]
    assert main(["env", "--dynamodb-endpoint-url", "http://127.0.0.1:5000"]) == 0
    assert "export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:5000" in capsys.readouterr().out


def test_once_env_works_in_a_script_where_an_alias_would_not(capsys, tmp_path):
    """A non-interactive shell (a script, CI) does not expand aliases: what ``eval "$(once
    env)"`` defines must work there. A stand-in ``aws`` on PATH prints what it was given."""
    assert main(["env", "--endpoint-url", "http://127.0.0.1:4999"]) == 0
    exports = capsys.readouterr().out
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "aws").write_text('#!/bin/sh\necho "aws $*"\n')
    (fake / "aws").chmod(0o755)
    script = tmp_path / "script.sh"
    script.write_text(f'eval "$(cat {tmp_path / "env.sh"})"\nawsonce sqs list-queues\n')
    (tmp_path / "env.sh").write_text(exports)
    for shell in ("sh", "bash"):
        ran = subprocess.run(
            [shell, str(script)],
            capture_output=True,
            text=True,
            env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
            check=True,
        )
        assert ran.stdout.strip() == "aws --endpoint-url http://127.0.0.1:4999 sqs list-queues"


def test_once_event_writes_an_sqs_event_that_once_invoke_reads(capsys, tmp_path):
    from oncecli.invoke import _read_event

    body = '{"orderId": "o-1"}'
    assert main(["event", body, body, "--fifo-group", "c-1"]) == 0
    written = capsys.readouterr().out
    event = json.loads(written)
    first, second = event["Records"]
    assert first["body"] == second["body"] == body
    assert first["messageId"] != second["messageId"]
    assert first["eventSource"] == "aws:sqs"
    assert first["eventSourceARN"].endswith(".fifo")
    assert first["attributes"]["MessageGroupId"] == "c-1"
    assert int(first["attributes"]["SequenceNumber"]) < int(second["attributes"]["SequenceNumber"])
    assert first["md5OfBody"] == hashlib.md5(body.encode()).hexdigest()
    path = tmp_path / "event.json"
    path.write_text(written)
    assert _read_event(str(path)) == event
    path.write_text('{"Records": []}')
    with pytest.raises(UsageError, match="not an SQS event"):
        _read_event(str(path))


def test_status_counts_the_records_that_still_owe_messages(cloud, capsys):
    """What a rollback would never send (docs/migrating.md, "Rolling back"): a COMPLETED record
    whose outbox is not all sent is counted apart."""
    table = _stack_on_the_cloud_s_table(cloud, "Owing-local", service="owing")
    done = {"status": {"S": "COMPLETED"}, "fence": {"N": "1"}}
    dynamodb = cloud.client("dynamodb")
    dynamodb.put_item(TableName=table, Item={"id": {"S": "owing#o-1"}, **done})
    dynamodb.put_item(
        TableName=table,
        Item={"id": {"S": "owing#o-2"}, **done, "outbox": {"L": [{"S": "{}"}]}},
    )
    target = ["--endpoint-url", cloud.endpoints["sqs"], "--stack", "Owing-local"]
    assert main(["status", *target]) == 0
    out = capsys.readouterr().out
    assert "records COMPLETED (owes messages)" in out
