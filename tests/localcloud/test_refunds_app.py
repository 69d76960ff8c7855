"""A team's app with three consumers in one stack, as a new user writes it from the README
and the docs, in a temporary directory: its own ``cdk.json``, ``app.py``, ``src`` and tests.

The refunds team's stack ``Refunds`` holds:

- ``Refunds``, on its own queue: business code with its own Powertools ``Logger`` and
  ``Metrics``, shipped decorated (``logger.inject_lambda_context(metrics.log_metrics(
  make_handler(...)))``), its level INFO from the consumer's ``environment=``; each refund
  sends a notice with ``attempt.send`` (README, "A chain: once -> queue -> once");
- ``SnsRefunds``, whose queue a topic of the stack feeds (raw delivery off: its handler reads
  SNS's envelope with ``envelope="powertools_json(Message)"``, docs/handler.md);
- ``Notices``, on a queue the app defines and hands over with ``queue=`` (the README's
  settings: TLS only, a DLQ, 6 x the function's 30 s), keyed on ``SOURCE_KEY``, fed by
  Refunds' outbox.

``once up --port 0`` runs it; the ``once`` command reaches each consumer with ``--consumer``
(``status``, ``send``, ``inspect``, ``logs``, ``redrive``, ``invoke``). The team's own tests
(``once_env`` on the decorated handler as shipped, ``once_cloud`` on the whole stack) run
with pytest inside their project, at the same time as ``once up``: each keeps its local
cloud's files in ``build/localcloud`` beside its ``cdk.json``, so the team's pytest runs in
a second checkout of the same project (its CI's), not beside the running ``once up``.

Every wait polls with a deadline; nothing asserts on a duration.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from oncecli.aws import local_client
from oncecli.project import ROOT
from tests.localcloud.helpers import write_project

STACK = "Refunds"
CONSUMERS = ("Refunds", "Notices", "SnsRefunds")
#: The ``once`` command of this environment (installed editable from the checkout).
ONCE = str(Path(sys.executable).parent / "once")

HANDLER = '''
"""Refunds: each paid once, each with one notice. And refunds announced on a topic."""

import os

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from once import Attempt, make_handler

logger = Logger(service="refunds-team")
metrics = Metrics(namespace="RefundsTeam", service="refunds-team")


def refund(body: dict, attempt: Attempt) -> dict:
    logger.info("refund accepted", extra={"refund": attempt.key})
    metrics.add_metric(name="Refunded", unit=MetricUnit.Count, value=1)
    attempt.send(os.environ["NOTICES_QUEUE_URL"], {"refundId": body["refundId"]})
    return {"refunded": body["amount"]}


lambda_handler = logger.inject_lambda_context(
    metrics.log_metrics(make_handler(refund, key="refundId"))
)


def announced(body: dict, attempt: Attempt) -> dict:
    logger.info("refund announced", extra={"refund": attempt.key})
    return {"announced": body["refundId"]}


# SNS to SQS, raw delivery off: the body is SNS's envelope, the refund its Message.
topic_handler = make_handler(announced, key="refundId", envelope="powertools_json(Message)")
'''

NOTICES = '''
"""Notices of refunds, keyed on the identity of the message Refunds' outbox sent."""

from once import SOURCE_KEY, Attempt, make_handler


def notify(notice: dict, attempt: Attempt) -> dict:
    return {"noticed": notice["refundId"], "key": attempt.key}


lambda_handler = make_handler(notify, key=SOURCE_KEY)
'''

APP = """
import aws_cdk as cdk
from aws_cdk import Duration
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Refunds")
info = {"POWERTOOLS_LOG_LEVEL": "INFO"}  # what Powertools' Logger (and once's) reads

# The README's chain, but the queue's id is not the consumer's: one id per stack.
dlq = sqs.Queue(stack, "NoticesDlq", enforce_ssl=True, retention_period=Duration.days(14))
notices = sqs.Queue(stack, "NoticesQueue", enforce_ssl=True,
                    visibility_timeout=Duration.seconds(180),   # 6 x the function's 30 s
                    dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=10))
refunds = OnceConsumer(stack, "Refunds", code_dir="src", handler="refunds.handler.lambda_handler",
                       service_name="refunds",
                       environment={"NOTICES_QUEUE_URL": notices.queue_url, **info})
notices.grant_send_messages(refunds.function)
notified = OnceConsumer(stack, "Notices", queue=notices, code_dir="src",
                        handler="notices.handler.lambda_handler", service_name="notices")

topic = sns.Topic(stack, "RefundsAnnounced")
announced = OnceConsumer(stack, "SnsRefunds", code_dir="src",
                         handler="refunds.handler.topic_handler", service_name="sns-refunds",
                         environment=info)
topic.add_subscription(subscriptions.SqsSubscription(announced.queue))  # raw delivery off
cdk.CfnOutput(stack, "TopicArn", value=topic.topic_arn)

for consumer in (refunds, notified, announced):
    add_cli_outputs(consumer)
app.synth()
"""

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["src"]
testpaths = ["tests"]
"""

TEAM_HANDLER_TEST = '''
import json

import pytest
from once.identity import named


@pytest.fixture
def handler(once_env, monkeypatch):
    """The handler as shipped, decorators and all; its notices go to a queue of the mock."""
    url = once_env.sqs.create_queue(QueueName="notices")["QueueUrl"]
    monkeypatch.setenv("NOTICES_QUEUE_URL", url)
    from refunds.handler import lambda_handler

    return lambda_handler, url


def test_a_refund_is_paid_once_and_its_notice_sent_once(once_env, handler, caplog, capsys):
    lambda_handler, notices = handler
    refund = {"refundId": "r-1", "amount": 12}
    delivery = once_env.deliver(lambda_handler, [refund, refund])
    assert delivery.outcomes == ["processed", "duplicate"]
    assert delivery.response == {"batchItemFailures": []}  # what the decorators returned
    assert json.loads(once_env.record("r-1").result) == {"refunded": 12}
    (notice,) = once_env.sqs.receive_message(
        QueueUrl=notices, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )["Messages"]
    assert json.loads(notice["Body"]) == {"refundId": "r-1"}
    identity = notice["MessageAttributes"]
    assert named(identity["once.source"]["StringValue"]).endswith("#r-1")
    assert identity["once.seq"]["StringValue"] == "0"
    assert "refund accepted" in caplog.messages  # our Logger, under inject_lambda_context
    assert '"Refunded"' in capsys.readouterr().out  # our metric, flushed by log_metrics
'''

TEAM_STACK_TEST = """
import json

STACK = "Refunds"
CONSUMERS = ("Refunds", "Notices", "SnsRefunds")


def notice_keys(once_cloud, refund_id):
    \"\"\"The keys Notices gave the notices of a refund: one per operation of Refunds on it.\"\"\"
    table = once_cloud.outputs(STACK)["NoticesIdempotencyTableName"]
    items = once_cloud.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    ids = [item["id"]["S"].removeprefix("notices#") for item in items]
    return [key for key in ids if key.startswith(f"refunds#{refund_id}@")]


def test_a_refund_s_notice_is_processed_once_by_notices(once_cloud):
    refund = {"refundId": "r-10", "amount": 5}
    once_cloud.send(STACK, [refund, refund], consumer="Refunds")
    once_cloud.drain()
    record = once_cloud.record(STACK, "r-10", consumer="Refunds")
    assert record.status == "COMPLETED" and json.loads(record.result) == {"refunded": 5}
    # Notices keys on the outbox message's identity: the operation that sent it (Refunds'
    # record id and a token of its commit), then # and its index in the outbox.
    [key] = notice_keys(once_cloud, "r-10")
    assert key.startswith("refunds#r-10@") and key.endswith("#0")
    notice = once_cloud.record(STACK, key, consumer="Notices")
    assert notice is not None and notice.status == "COMPLETED" and notice.fence == 1
    assert json.loads(notice.result) == {"noticed": "r-10", "key": key}
    refunds = once_cloud.metrics(STACK, consumer="Refunds")
    # The copy finds the record done: a duplicate, or, while the first copy's notice is
    # still owed, the one that sends it (Notices runs it once either way).
    assert refunds["Processed"] == 1 and refunds["Duplicate"] + refunds["OwedSent"] == 1
    assert once_cloud.metrics(STACK, consumer="Notices")["Processed"] == 1
    assert once_cloud.dlq_messages(STACK, consumer="Notices") == []


def test_a_refund_announced_on_the_topic_completes_its_record(once_cloud):
    topic = once_cloud.outputs(STACK)["TopicArn"]
    once_cloud.client("sns").publish(
        TopicArn=topic, Message=json.dumps({"refundId": "r-20", "amount": 7})
    )
    once_cloud.drain()
    record = once_cloud.record(STACK, "r-20", consumer="SnsRefunds")
    assert record is not None and record.status == "COMPLETED"
    assert json.loads(record.result) == {"announced": "r-20"}


def test_each_consumer_has_its_own_queue_table_and_function(once_cloud):
    names = {name: once_cloud.names(STACK, consumer=name) for name in CONSUMERS}
    assert {n.consumer for n in names.values()} == set(CONSUMERS)
    for field in ("queue_url", "dlq_url", "table_name", "function_name"):
        assert len({getattr(n, field) for n in names.values()}) == 3, field
    assert names["Notices"].queue_url == once_cloud.outputs(STACK)["NoticesQueueUrl"]
    function = once_cloud.client("lambda").get_function_configuration(
        FunctionName=names["Refunds"].function_name
    )
    variables = function["Environment"]["Variables"]
    assert variables["NOTICES_QUEUE_URL"] == names["Notices"].queue_url  # the chain
    assert variables["POWERTOOLS_LOG_LEVEL"] == "INFO"
"""

PROJECT = {
    "cdk.json": '{"app": "python3 app.py"}\n',
    "pyproject.toml": PYPROJECT,
    "app.py": APP,
    "src/refunds/__init__.py": "",
    "src/refunds/handler.py": HANDLER,
    "src/notices/__init__.py": "",
    "src/notices/handler.py": NOTICES,
    "tests/test_handler.py": TEAM_HANDLER_TEST,
    "tests/test_stack.py": TEAM_STACK_TEST,
}

#: Set in this suite's process by tests/conftest.py for the example service: not the team's.
NOT_THE_TEAM_S = (
    "POWERTOOLS_SERVICE_NAME",
    "IDEMPOTENCY_TABLE_NAME",
    "LEDGER_TABLE_NAME",
    "DLQ_URL",
)


def _team_env() -> dict[str, str]:
    """A shell's environment: this environment's ``once`` and ``python3`` first on PATH,
    nothing of this suite's own settings."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in NOT_THE_TEAM_S and name != "PYTHONPATH" and not name.startswith("PYTEST_")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["COLUMNS"] = "200"
    return env


@dataclass
class Running:
    """``once up`` serving the project, and the team's own pytest running in its copy."""

    project: Path
    #: Where the test keeps its message and event files: outside the project, since each
    #: file added beside cdk.json changes the synth cache key, and ``once invoke`` would
    #: synthesize the app again (oncecli.localcloud.template._inputs_digest).
    data: Path
    endpoint: str
    printed: str
    env: dict[str, str]
    team: subprocess.Popen[str]
    team_log: Path

    def once(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``once ARGS`` in the project, against the local cloud ``once up`` serves."""
        return subprocess.run(
            [ONCE, *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    @property
    def where(self) -> list[str]:
        return ["--stack", STACK, "--endpoint-url", self.endpoint]


def _lines(stream: IO[str], into: list[str]) -> None:
    for line in stream:
        into.append(line)


def _poll(
    run: Callable[[], subprocess.CompletedProcess[str]],
    done: Callable[[subprocess.CompletedProcess[str]], bool],
    deadline_s: float = 90,
) -> subprocess.CompletedProcess[str]:
    """Run ``run`` until ``done`` holds or the deadline passes; the last run."""
    deadline = time.monotonic() + deadline_s
    result = run()
    while not done(result) and time.monotonic() < deadline:
        time.sleep(0.5)
        result = run()
    return result


def _flat(text: str) -> str:
    """Text with each run of whitespace as one space (rich wraps a title to its table)."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    base = tmp_path_factory.mktemp("refunds-team")
    project = write_project(base / "refunds", PROJECT)
    ci = write_project(base / "refunds-ci", PROJECT)
    env = _team_env()
    team_log = base / "team-pytest.log"
    with team_log.open("w") as log:
        team = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"],
            cwd=ci,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its local cloud's processes go with it
        )
    up = subprocess.Popen(
        [ONCE, "up", "--port", "0"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert up.stdout is not None
    threading.Thread(target=_lines, args=(up.stdout, lines), daemon=True).start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and up.poll() is None:
            if any("Ctrl-C stops" in line for line in lines):
                break
            time.sleep(0.2)
        printed = "".join(lines)
        assert "Ctrl-C stops" in printed, printed[-4000:]
        endpoint = re.search(r"--endpoint-url (http://127\.0\.0\.1:\d+)", printed)
        assert endpoint, printed
        data = base / "data"
        data.mkdir()
        yield Running(project, data, endpoint.group(1), printed, env, team, team_log)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        finally:
            if team.poll() is None:  # the module stopped early: the team's run goes too
                os.killpg(team.pid, signal.SIGTERM)
                team.wait(60)
    assert up.returncode in (0, 130), "".join(lines)[-4000:]


@pytest.fixture(scope="module")
def refund(running: Running) -> str:
    """One refund sent to the Refunds consumer with ``once send --consumer``: its key."""
    (running.data / "refund.jsonl").write_text('{"refundId": "r-up-1", "amount": 12}\n')
    sent = running.once(
        "send",
        "--consumer",
        "Refunds",
        str(running.data / "refund.jsonl"),
        "--key",
        "refundId",
        *running.where,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "r-up-1" in sent.stdout and "sent 1 of 1" in sent.stdout, sent.stdout
    return "r-up-1"


def test_once_up_runs_the_three_consumers_of_one_stack(running: Running) -> None:
    assert f"{STACK} is up (Refunds, Notices, SnsRefunds)" in running.printed, running.printed
    for consumer in CONSUMERS:
        assert f"{STACK} ({consumer}): mapping running" in running.printed
        assert f"{consumer}QueueUrl = " in running.printed  # add_cli_outputs, each
    assert re.search(r"local patch: Refunds: SNS subscription .*created", running.printed)


def test_once_status_without_consumer_shows_each_consumer_s_table(running: Running) -> None:
    status = running.once("status", *running.where)
    assert status.returncode == 0, status.stderr
    shown = _flat(status.stdout)
    for consumer, service in zip(CONSUMERS, ("refunds", "notices", "sns-refunds"), strict=True):
        assert shown.count(f"once status: {STACK} / {consumer} ") == 1, (consumer, shown)
        assert f"(Once, service {service})" in shown, service


def test_a_refund_sent_to_one_consumer_is_inspected_there(running: Running, refund: str) -> None:
    inspected = _poll(
        lambda: running.once("inspect", "--consumer", "Refunds", refund, *running.where),
        lambda run: "COMPLETED" in run.stdout,
    )
    assert "COMPLETED" in inspected.stdout, inspected.stdout + inspected.stderr
    assert f"refunds#{refund}" in inspected.stdout
    assert '{"refunded":12}' in inspected.stdout.replace(" ", "")


def test_the_refund_s_notice_runs_once_on_notices_through_the_existing_queue(
    running: Running, refund: str
) -> None:
    # Notices keys on SOURCE_KEY: the operation of Refunds that sent the notice (its record id
    # and a token of its commit) and the notice's index in its outbox. An operator finds it
    # where once logs it: Notices' line for the record.
    found = _poll(
        lambda: running.once("logs", "--consumer", "Notices", *running.where),
        lambda run: bool(re.search(rf'"key":"refunds#{refund}@[0-9a-f]{{32}}#0"', run.stdout)),
        deadline_s=120,
    )
    match = re.search(rf'"key":"(refunds#{refund}@[0-9a-f]{{32}}#0)"', found.stdout)
    assert match, found.stdout + found.stderr
    key = match.group(1)
    inspected = _poll(
        lambda: running.once("inspect", "--consumer", "Notices", key, *running.where),
        lambda run: "COMPLETED" in run.stdout,
    )
    assert "COMPLETED" in inspected.stdout, inspected.stdout + inspected.stderr
    assert f"notices#{key}" in inspected.stdout
    assert f'"noticed":"{refund}"' in inspected.stdout.replace(" ", "")
    assert re.search(r"fence\s*│\s*1\b", inspected.stdout), inspected.stdout
    status = running.once("status", "--consumer", "Notices", *running.where)
    assert status.returncode == 0, status.stderr
    assert f"once status: {STACK} / Notices " in _flat(status.stdout)
    assert "/ Refunds " not in _flat(status.stdout)  # that consumer's table only


def test_a_refund_published_on_the_topic_completes_on_sns_refunds(running: Running) -> None:
    topic = re.search(r"TopicArn = (arn:aws:sns:\S+)", running.printed)
    assert topic, running.printed
    local_client("sns", running.endpoint).publish(
        TopicArn=topic.group(1), Message=json.dumps({"refundId": "r-sns", "amount": 4})
    )
    inspected = _poll(
        lambda: running.once("inspect", "--consumer", "SnsRefunds", "r-sns", *running.where),
        lambda run: "COMPLETED" in run.stdout,
    )
    assert "COMPLETED" in inspected.stdout, inspected.stdout + inspected.stderr
    assert "sns-refunds#r-sns" in inspected.stdout
    assert '{"announced":"r-sns"}' in inspected.stdout.replace(" ", "")


def test_once_logs_of_one_consumer_show_the_team_s_info_line(running: Running, refund: str) -> None:
    def team_lines(run: subprocess.CompletedProcess[str]) -> list[dict]:
        found = []
        for line in run.stdout.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("message") == "refund accepted":
                found.append(entry)
        return found

    logs = _poll(
        lambda: running.once("logs", "--consumer", "Refunds", *running.where),
        lambda run: any(line.get("refund") == refund for line in team_lines(run)),
        deadline_s=120,
    )
    assert logs.returncode == 0, logs.stderr
    (line,) = [entry for entry in team_lines(logs) if entry.get("refund") == refund]
    assert line["level"] == "INFO" and line["service"] == "refunds-team", line
    assert line["function_name"].startswith(f"{STACK}-Refunds"), line  # inject_lambda_context
    # once's own line for the record stands beside it, in once's service.
    assert re.search(rf'"key":"{refund}".*"outcome":"processed"', logs.stdout), logs.stdout


def test_once_redrive_of_notices_moves_its_dlq_back(running: Running) -> None:
    # A message with no outbox identity: Notices (SOURCE_KEY) quarantines it at once.
    (running.data / "stray.jsonl").write_text('{"refundId": "stray"}\n')
    sent = running.once(
        "send",
        "--consumer",
        "Notices",
        str(running.data / "stray.jsonl"),
        "--key",
        "refundId",
        *running.where,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr
    status = _poll(
        lambda: running.once("status", "--consumer", "Notices", *running.where),
        lambda run: re.search(r"DLQ depth\s*│\s*1\b", run.stdout) is not None,
    )
    assert re.search(r"DLQ depth\s*│\s*1\b", status.stdout), status.stdout + status.stderr
    redriven = running.once("redrive", "--consumer", "Notices", *running.where)
    assert redriven.returncode == 0, redriven.stdout + redriven.stderr
    assert "moved 1 message from the DLQ back to the source queue" in redriven.stdout


def test_once_event_then_invoke_runs_one_refund_on_its_consumer(running: Running) -> None:
    made = running.once("event", '{"refundId": "r-invoke", "amount": 3}')
    assert made.returncode == 0, made.stderr
    (running.data / "event.json").write_text(made.stdout)
    (record,) = json.loads(made.stdout)["Records"]
    invoked = running.once(
        "invoke", "--stack", STACK, "--consumer", "Refunds", str(running.data / "event.json"),
        "--endpoint-url", running.endpoint,
    )  # fmt: skip
    assert invoked.returncode == 0, invoked.stdout + invoked.stderr
    assert f"once invoke: {STACK} (Refunds)" in invoked.stdout
    assert re.search(rf"{record['messageId']}\s*│\s*processed\s*│\s*delete it", invoked.stdout)
    assert 'batch response: {"batchItemFailures": []}' in invoked.stdout, invoked.stdout
    assert "by AWS's rules: success" in invoked.stdout
    assert "refund accepted" in invoked.stderr  # the function's log: the team's line
    # Its lines and metrics went where a worker's go: `once logs`, `once status`.
    logs = running.once("logs", "--consumer", "Refunds", "--since", "10", *running.where)
    assert record["messageId"] in logs.stdout, logs.stdout + logs.stderr


def test_an_unknown_consumer_is_refused_naming_the_stack_s_consumers(running: Running) -> None:
    (running.data / "nope.jsonl").write_text('{"refundId": "r-nope", "amount": 1}\n')
    event = running.once("event", '{"refundId": "r-nope", "amount": 1}')
    (running.data / "nope-event.json").write_text(event.stdout)
    nope = ["--consumer", "Nope", *running.where]
    commands = {
        "send": ["send", str(running.data / "nope.jsonl"), "--key", "refundId", *nope],
        "status": ["status", *nope],
        "inspect": ["inspect", "r-nope", *nope],
        "logs": ["logs", *nope],
        "redrive": ["redrive", *nope],
        "invoke": ["invoke", str(running.data / "nope-event.json"), *nope],
    }
    started = {
        name: subprocess.Popen(
            [ONCE, *args],
            cwd=running.project,
            env=running.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in commands.items()
    }
    for name, process in started.items():
        out, err = process.communicate(timeout=120)
        assert process.returncode == 2, (name, out, err)
        if name == "invoke":  # the local cloud's own words, each consumer with its stack
            for consumer in CONSUMERS:
                assert f"{STACK} ({consumer})" in err, (name, err)
        else:
            assert "its consumers: Notices, Refunds, SnsRefunds" in _flat(err), (name, err)


def test_the_team_s_own_tests_pass_in_their_project(running: Running) -> None:
    try:
        running.team.wait(600)
    except subprocess.TimeoutExpired:
        pytest.fail(running.team_log.read_text()[-6000:])
    report = running.team_log.read_text()
    assert running.team.returncode == 0, report[-6000:]
    assert "4 passed" in report, report[-3000:]
    for test in (
        "test_handler.py::test_a_refund_is_paid_once_and_its_notice_sent_once",
        "test_stack.py::test_a_refund_s_notice_is_processed_once_by_notices",
        "test_stack.py::test_a_refund_announced_on_the_topic_completes_its_record",
        "test_stack.py::test_each_consumer_has_its_own_queue_table_and_function",
    ):
        assert f"PASSED tests/{test}" in report, test


def test_the_readme_s_chain_wiring_synthesizes(tmp_path: Path) -> None:
    """The README's ``app.py`` of the chain, as printed, in a stack: a new user's first try."""
    readme = (ROOT / "README.md").read_text()
    chain = readme.split("## A chain: once → queue → once", 1)[1]
    wiring = chain.split("# app.py\n", 1)[1].split("```", 1)[0]
    assert "queue=notices" in wiring and "grant_send_messages" in wiring, wiring
    app = (
        "import aws_cdk as cdk\n"
        "from aws_cdk import Duration\n"
        "from aws_cdk import aws_sqs as sqs\n"
        "from once_cdk import OnceConsumer\n\n"
        'app = cdk.App(outdir="cdk.out")\n'
        'stack = cdk.Stack(app, "Refunds")\n' + wiring + "app.synth()\n"
    )
    project = write_project(
        tmp_path,
        {name: text for name, text in PROJECT.items() if name.startswith("src/")},
    )
    (project / "app.py").write_text(app)
    synth = subprocess.run(
        [sys.executable, "app.py"],
        cwd=project,
        env=_team_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in synth.stderr.splitlines() if "Error" in line]
    assert synth.returncode == 0, f"the README's wiring does not synthesize: {errors[-1:]}"
