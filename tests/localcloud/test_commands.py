"""Each CLI command against the local cloud, and the CLI's exit codes."""

from __future__ import annotations

import json
import time

import pytest

from oncecli.aws import queue_depth
from oncecli.cli import main
from oncecli.errors import EngineNotInstalled, UnshareNotPermitted
from oncecli.localcloud import engines
from tests.localcloud.helpers import mapping_for


def once(cloud, *args: str) -> int:
    return main([*args, "--endpoint-url", cloud.endpoints["sqs"]])


def depth(cloud, output: str) -> int:
    return queue_depth(cloud.client("sqs"), cloud.outputs[output]).total


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
    assert "moving the messages one by one" in capsys.readouterr().out  # moto: no move task
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
        engines.enter_private_netns(["demo"])
    assert caught.value.exit_code == 7
