"""OnceConsumer on an existing queue (``queue=``): it builds neither queue nor DLQ, consumes
the one it is given with the same mapping and grants, refuses a queue of this app that
breaks once's rules (naming the setting and what to set), and warns about what it cannot
read of an imported one. A chain, upstream consumer -> shared queue -> downstream consumer,
synthesizes with its grants, cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs

from infra.app import add_compliance_checks
from once import constants as c
from once_cdk import ConfigurationError, OnceConsumer, add_cli_outputs, permissions
from once_cdk.existing_queue import QUEUE_NOT_CHECKED

HANDLER = "shop.handler.lambda_handler"
NOTICES_URL = "NOTICES_QUEUE_URL"
IMPORTED_ARN = "arn:aws:sqs:us-east-1:123456789012:notices"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
#: What a team's DLQ acknowledges, as infra/notifications.py does.
DLQ_REASON = (
    "This queue is the dead-letter queue of the notices queue: the end of the line, whose "
    "messages wait 14 days for a human to inspect and redrive them."
)


def _code(root: Path) -> Path:
    if not (root / "shop").exists():
        (root / "shop").mkdir(parents=True)
        (root / "shop" / "__init__.py").write_text("")
        (root / "shop" / "handler.py").write_text("lambda_handler = None\n")
    return root


def _dlq(scope: Any, name: str = "NoticesDlq", **overrides: Any) -> sqs.Queue:
    props = {
        "encryption": sqs.QueueEncryption.SQS_MANAGED,
        "enforce_ssl": True,
        "retention_period": Duration.days(14),
        **overrides,
    }
    dlq = sqs.Queue(scope, name, **props)
    cdk.Validations.of(dlq).acknowledge(
        cdk.Acknowledgment(id="Serverless::Serverless-SQSRedrivePolicy", reason=DLQ_REASON)
    )
    return dlq


def _queue(
    scope: Any, name: str = "Notices", *, dlq: Any = "build", receives: int = 10, **overrides: Any
) -> sqs.Queue:
    """A queue as once builds its own, for a 30 s timeout: what overrides break is refused."""
    fifo = overrides.get("fifo", False)
    if dlq == "build":
        dlq = _dlq(scope, f"{name}Dlq", **({"fifo": True} if fifo else {}))
    props = {
        "encryption": sqs.QueueEncryption.SQS_MANAGED,
        "enforce_ssl": True,
        "visibility_timeout": Duration.seconds(180),
        "dead_letter_queue": None
        if dlq is None
        else sqs.DeadLetterQueue(queue=dlq, max_receive_count=receives),
        **overrides,
    }
    return sqs.Queue(scope, name, **props)


def _stack(root: Path, name: str = "Shop") -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App(outdir=str(root / "cdk.out"))
    env = cdk.Environment(account="123456789012", region="us-east-1")
    return app, cdk.Stack(app, name, env=env)


def _consumer(stack: cdk.Stack, root: Path, construct_id: str = "Shipping", **kw: Any) -> Any:
    return OnceConsumer(
        stack, construct_id, code_dir=_code(root), handler=HANDLER, service_name="shipping", **kw
    )


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _logical_id(construct: Any) -> str:
    stack = cdk.Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))


def _statements(template: dict[str, Any], consumer: Any) -> list[dict[str, Any]]:
    role = _logical_id(consumer.role)
    return [
        statement
        for policy in _resources(template, "AWS::IAM::Policy").values()
        if policy["Properties"]["Roles"] == [{"Ref": role}]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def _arn(construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [_logical_id(construct), "Arn"]}


# --- a chain on a shared queue --------------------------------------------------------------
@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Orders (upstream, its own queue) announces on Notices, a queue of the app that
    Shipping (downstream) consumes with ``queue=``; cdk-nag on."""
    root = tmp_path_factory.mktemp("chain")
    app, stack = _stack(root, "Chain")
    notices = _queue(stack)
    upstream = _consumer(stack, root, "Orders", environment={NOTICES_URL: notices.queue_url})
    notices.grant_send_messages(upstream.function)
    downstream = _consumer(stack, root, queue=notices)
    add_cli_outputs(downstream)
    add_compliance_checks(app)
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    return {
        "stack": stack,
        "notices": notices,
        "upstream": upstream,
        "downstream": downstream,
        "assembly": assembly,
        "template": assembly.get_stack_by_name("Chain").template,
        "outdir": Path(app.outdir),
    }


def test_a_consumer_on_an_existing_queue_builds_no_queue_of_its_own(chain):
    downstream, notices = chain["downstream"], chain["notices"]
    assert downstream.queue is notices
    assert downstream.dlq is notices.dead_letter_queue.queue
    inside = [n for n in downstream.node.find_all() if isinstance(n, sqs.CfnQueue)]
    assert inside == []
    queues = set(_resources(chain["template"], "AWS::SQS::Queue"))
    upstream = chain["upstream"]
    assert queues == {
        _logical_id(notices), _logical_id(downstream.dlq),
        _logical_id(upstream.queue), _logical_id(upstream.dlq),
    }  # fmt: skip


def test_its_mapping_polls_the_existing_queue_with_the_same_settings(chain):
    template, downstream, upstream = chain["template"], chain["downstream"], chain["upstream"]
    mapping = template["Resources"][_logical_id(downstream.mapping)]["Properties"]
    assert mapping["EventSourceArn"] == _arn(chain["notices"])
    own = template["Resources"][_logical_id(upstream.mapping)]["Properties"]
    different = {"EventSourceArn", "FunctionName"}
    assert {k: v for k, v in mapping.items() if k not in different} == {
        k: v for k, v in own.items() if k not in different
    }
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_its_function_may_consume_the_queue_and_quarantine_to_its_dlq_only(chain):
    template, downstream = chain["template"], chain["downstream"]
    by_resource = {
        json.dumps(s["Resource"], sort_keys=True): _actions(s)
        for s in _statements(template, downstream)
    }
    assert by_resource[json.dumps(_arn(chain["notices"]), sort_keys=True)] == set(
        permissions.SOURCE_QUEUE_ACTIONS
    )
    assert by_resource[json.dumps(_arn(downstream.dlq), sort_keys=True)] == set(
        permissions.DLQ_ACTIONS
    )
    assert not any(a.startswith("kms:") for actions in by_resource.values() for a in actions)
    function = template["Resources"][_logical_id(downstream.function)]["Properties"]
    env = function["Environment"]["Variables"]
    assert env[c.ENV_DLQ_URL] == {"Ref": _logical_id(downstream.dlq)}


def test_the_upstream_may_send_to_the_queue_the_downstream_consumes(chain):
    template, upstream, notices = chain["template"], chain["upstream"], chain["notices"]
    sends = [s for s in _statements(template, upstream) if s["Resource"] == _arn(notices)]
    assert len(sends) == 1 and "sqs:SendMessage" in _actions(sends[0])
    function = template["Resources"][_logical_id(upstream.function)]["Properties"]
    assert function["Environment"]["Variables"][NOTICES_URL] == {"Ref": _logical_id(notices)}


def test_the_settings_and_alarms_follow_the_queue(chain):
    template, downstream = chain["template"], chain["downstream"]
    settings = downstream.settings
    assert (settings.visibility_timeout_s, settings.receive_count) == (180, 10)
    assert settings.record_retention_s == c.DEFAULT_RETENTION_S
    alarm = template["Resources"][_logical_id(downstream.alarms["OldestMessageAge"])]
    assert alarm["Properties"]["Threshold"] == 10 * 180
    depth = template["Resources"][_logical_id(downstream.alarms["DlqDepth"])]["Properties"]
    assert depth["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [_logical_id(downstream.dlq), "QueueName"]}}
    ]


def test_cli_outputs_name_the_existing_queue_and_its_dlq(chain):
    outputs, downstream = chain["template"]["Outputs"], chain["downstream"]
    assert outputs["QueueUrl"]["Value"] == {"Ref": _logical_id(chain["notices"])}
    assert outputs["DlqUrl"]["Value"] == {"Ref": _logical_id(downstream.dlq)}
    assert outputs["ServiceName"]["Value"] == "shipping"


def test_a_queue_the_construct_could_read_whole_gets_no_warning(chain):
    messages = chain["assembly"].get_stack_by_name("Chain").messages
    assert not [m for m in messages if QUEUE_NOT_CHECKED in str(m.entry.data)]


def test_cdk_nag_finds_nothing_and_the_downstream_acknowledges_no_dlq_of_its_own(chain):
    report = json.loads((chain["outdir"] / "validation-report.json").read_text())
    acknowledged: set[tuple[str, str]] = set()
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["violations"]
        assert plugin["conclusion"] == "success"
        for suppressed in plugin.get("suppressedViolations", []):
            for construct in suppressed["violatingConstructs"]:
                path = construct["constructPath"].removeprefix("Chain/")
                acknowledged.add((suppressed["ruleName"], path))
    upstream = {(rule, path.removeprefix("Orders/")) for rule, path in acknowledged
                if path.startswith("Orders/")}  # fmt: skip
    downstream = {(rule, path.removeprefix("Shipping/")) for rule, path in acknowledged
                  if path.startswith("Shipping/")}  # fmt: skip
    assert downstream == upstream - {("Serverless-SQSRedrivePolicy", "Dlq/Resource")}
    assert ("Serverless-SQSRedrivePolicy", "NoticesDlq/Resource") in acknowledged


def test_cfn_lint_finds_no_error_or_warning_in_the_chain(chain, cfn_lint):
    cfn_lint([chain["outdir"] / "Chain.template.json"])


def test_a_fifo_queue_takes_a_fifo_consumer(tmp_path):
    _, stack = _stack(tmp_path)
    queue = _queue(stack, fifo=True, content_based_deduplication=True)
    consumer = _consumer(stack, tmp_path, queue=queue, fifo=True)
    assert consumer.queue is queue and consumer.dlq.fifo


def test_a_longer_retention_keeps_records_longer(tmp_path):
    _, stack = _stack(tmp_path)
    queue = _queue(stack, retention_period=Duration.days(7))
    consumer = _consumer(stack, tmp_path, queue=queue)
    assert consumer.settings.source_retention_s == 7 * c.DAY_S
    assert consumer.settings.record_retention_s == (7 + 14 + 1) * c.DAY_S


# --- refusals -------------------------------------------------------------------------------
def _refusal(tmp_path: Path, build: Any, **kw: Any) -> str:
    _, stack = _stack(tmp_path)
    queue = build(stack)
    with pytest.raises(ConfigurationError) as refused:
        _consumer(stack, tmp_path, queue=queue, **kw)
    assert stack.node.try_find_child("Shipping") is None  # nothing half built
    return str(refused.value)


REFUSED: dict[str, tuple[Any, dict[str, Any], list[str]]] = {
    "fifo queue, fifo=False": (
        lambda s: _queue(s, fifo=True),
        {},
        ["queue=Shop/Notices: it is a FIFO queue and fifo=False: pass fifo=True"],
    ),
    "standard queue, fifo=True": (
        lambda s: _queue(s),
        {"fifo": True},
        ["it is a standard queue and fifo=True: pass fifo=False"],
    ),
    "SQS's default visibility timeout": (
        lambda s: _queue(s, visibility_timeout=None),
        {},
        ["its visibility timeout, 30 s, is shorter than 6 x the function timeout (30 s)",
         "= 180 s", "visibility_timeout=Duration.seconds(180)"],
    ),
    "visibility timeout short of the batching window": (
        lambda s: _queue(s),
        {"max_batching_window": Duration.seconds(5)},
        ["its visibility timeout, 180 s, is shorter than", "= 185 s"],
    ),
    "no DLQ": (
        lambda s: _queue(s, dlq=None),
        {},
        ["it has no dead-letter queue", "a message that keeps failing is retried until the "
         "queue's retention deletes it, lost", "max_receive_count=N) with N from 10 to"],
    ),
    "too few receives": (
        lambda s: _queue(s, receives=5),
        {},
        ["its redrive policy's maxReceiveCount is 5: under the runtime's default backoff (2 s "
         "doubling up to 300 s) its retries end after 62 s, before 5 of its visibility "
         "timeouts (900 s)", "give its sqs.DeadLetterQueue max_receive_count from 10 to 1000"],
    ),
    "a retention too short for the retries": (
        lambda s: _queue(s, retention_period=Duration.minutes(30)),
        {},
        ["its redrive policy's maxReceiveCount is 10: 10 x its visibility timeout 180 s is "
         "not shorter than its retention (1800 s): messages would expire before reaching the "
         "DLQ", "no maxReceiveCount passes with this visibility timeout and retention"],
    ),
    "unencrypted": (
        lambda s: _queue(s, encryption=sqs.QueueEncryption.UNENCRYPTED),
        {},
        ["it is not encrypted at rest", "encryption=sqs.QueueEncryption.SQS_MANAGED"],
    ),
    "plain HTTP": (
        lambda s: _queue(s, enforce_ssl=False),
        {},
        ["it accepts requests without TLS", "enforce_ssl=True"],
    ),
    "a FIFO DLQ behind a standard queue": (
        lambda s: _queue(s, dlq=_dlq(s, fifo=True)),
        {},
        ["its DLQ Shop/NoticesDlq is a FIFO queue and the queue a standard one"],
    ),
    "an unencrypted DLQ": (
        lambda s: _queue(s, dlq=_dlq(s, encryption=sqs.QueueEncryption.UNENCRYPTED)),
        {},
        ["its DLQ Shop/NoticesDlq is not encrypted at rest"],
    ),
    "a DLQ that keeps messages no longer than the queue": (
        lambda s: _queue(s, dlq=_dlq(s, retention_period=Duration.days(4))),
        {},
        ["its DLQ Shop/NoticesDlq keeps messages 345600 s, not longer than the queue's "
         "345600 s", "retention_period=Duration.days(14)"],
    ),
    "max_receive_count beside queue=": (
        lambda s: _queue(s),
        {"max_receive_count": 10},
        ["max_receive_count=10 with queue=: the existing queue's redrive policy holds "
         "maxReceiveCount"],
    ),
    "not a queue": (
        lambda s: "arn:aws:sqs:us-east-1:123456789012:notices",
        {},
        ["expected an aws_sqs.IQueue"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_queue_that_breaks_a_rule_is_refused_with_what_to_set(tmp_path, case):
    build, kw, expected = REFUSED[case]
    message = _refusal(tmp_path, build, **kw)
    for part in expected:
        assert part in message, message


def test_every_broken_rule_is_named_at_once(tmp_path):
    message = _refusal(
        tmp_path,
        lambda s: _queue(s, fifo=True, visibility_timeout=None, enforce_ssl=False),
    )
    assert message.startswith("OnceConsumer queue= refused:\n- ")
    for part in ("fifo=False", "30 s", "without TLS"):
        assert part in message


def test_a_queue_another_consumer_polls_is_refused(tmp_path):
    _, stack = _stack(tmp_path)
    upstream = _consumer(stack, tmp_path, "Orders")
    with pytest.raises(ConfigurationError) as refused:
        _consumer(stack, tmp_path, queue=upstream.queue)
    assert (
        "queue=Shop/Orders/Queue: the event source mapping Shop/Orders/Mapping/Resource "
        "already polls it: a once consumer must be its queue's only consumer"
    ) in str(refused.value)
    imported = sqs.Queue.from_queue_arn(stack, "Imported", IMPORTED_ARN)
    _consumer(stack, tmp_path, "Refunds", queue=imported)
    with pytest.raises(ConfigurationError, match="Shop/Refunds/Mapping/Resource already polls"):
        _consumer(stack, tmp_path, queue=sqs.Queue.from_queue_arn(stack, "Again", IMPORTED_ARN))


def test_the_arguments_are_checked_before_the_queue(tmp_path):
    message = _refusal(tmp_path, lambda s: _queue(s, dlq=None), batch_size=0)
    assert message.startswith("OnceConsumer settings refused:")


# --- a queue defined elsewhere --------------------------------------------------------------
def _synth(app: cdk.App, stack: cdk.Stack) -> tuple[dict[str, Any], list[str]]:
    assembly = app.synth()
    artifact = assembly.get_stack_by_name(stack.stack_name)
    warnings = [
        str(m.entry.data) for m in artifact.messages if QUEUE_NOT_CHECKED in str(m.entry.data)
    ]
    return artifact.template, warnings


def test_an_imported_queue_is_consumed_and_what_could_not_be_read_is_a_warning(tmp_path):
    app, stack = _stack(tmp_path)
    queue = sqs.Queue.from_queue_arn(stack, "Notices", IMPORTED_ARN)
    consumer = _consumer(stack, tmp_path, queue=queue)
    assert consumer.queue is queue and consumer.dlq is None
    template, warnings = _synth(app, stack)
    assert _resources(template, "AWS::SQS::Queue") == {}
    mapping = template["Resources"][_logical_id(consumer.mapping)]["Properties"]
    assert mapping["EventSourceArn"] == IMPORTED_ARN
    statements = _statements(template, consumer)
    assert [_actions(s) for s in statements if s["Resource"] == IMPORTED_ARN] == [
        set(permissions.SOURCE_QUEUE_ACTIONS)
    ]
    assert not any("sqs:SendMessage" in _actions(s) for s in statements)
    function = template["Resources"][_logical_id(consumer.function)]["Properties"]
    assert c.ENV_DLQ_URL not in function["Environment"]["Variables"]
    assert "DlqDepth" not in consumer.alarms and len(consumer.alarms) == 8
    [warning] = warnings
    for part in (
        "OnceConsumer Shop/Shipping consumes the queue Shop/Notices",
        "a visibility timeout of at least 180 s",
        "a redrive policy to a DLQ with maxReceiveCount from 10 to",
        "a retention of at most 4 days",
        "encryption at rest",
        "denies requests without TLS",
        "its DLQ, unknown to the construct",
        f"acknowledge_warning('{QUEUE_NOT_CHECKED}')",
    ):
        assert part in warning, warning
    assert "fifo=" not in warning  # the ARN names a standard queue: checked


def test_an_imported_queue_has_no_cli_outputs(tmp_path):
    _, stack = _stack(tmp_path)
    consumer = _consumer(stack, tmp_path, queue=sqs.Queue.from_queue_arn(stack, "N", IMPORTED_ARN))
    with pytest.raises(ConfigurationError, match="so its DLQ is unknown to the construct"):
        add_cli_outputs(consumer)


def test_an_imported_fifo_arn_needs_fifo_true(tmp_path):
    message = _refusal(
        tmp_path, lambda s: sqs.Queue.from_queue_arn(s, "Notices", IMPORTED_ARN + ".fifo")
    )
    assert "it is a FIFO queue and fifo=False: pass fifo=True" in message


def test_an_imported_queue_from_a_token_names_its_type_among_the_unchecked(tmp_path):
    app, stack = _stack(tmp_path)
    arn = cdk.Fn.import_value("NoticesArn")
    _consumer(stack, tmp_path, queue=sqs.Queue.from_queue_arn(stack, "Notices", arn))
    _, [warning] = _synth(app, stack)
    assert "a standard queue, as fifo=False says" in warning


def test_the_warning_can_be_acknowledged(tmp_path):
    app, stack = _stack(tmp_path)
    queue = sqs.Queue.from_queue_arn(stack, "Notices", IMPORTED_ARN)
    consumer = _consumer(stack, tmp_path, queue=queue)
    cdk.Annotations.of(consumer).acknowledge_warning(QUEUE_NOT_CHECKED)
    assert _synth(app, stack)[1] == []


def test_an_imported_dlq_behind_a_queue_of_the_app_is_a_warning(tmp_path):
    app, stack = _stack(tmp_path)
    dlq = sqs.Queue.from_queue_arn(stack, "NoticesDlq", IMPORTED_ARN + "-dlq")
    consumer = _consumer(stack, tmp_path, queue=_queue(stack, dlq=dlq))
    assert consumer.dlq.node.path == dlq.node.path  # a jsii proxy of the same import
    _, [warning] = _synth(app, stack)
    assert "its DLQ Shop/NoticesDlq (imported): a standard queue like it" in warning
    assert "visibility timeout" not in warning  # the queue itself was read


def test_a_customer_managed_key_is_granted_on_that_key_only(tmp_path):
    app, stack = _stack(tmp_path)
    key, dlq_key = kms.Key(stack, "Key"), kms.Key(stack, "DlqKey")
    dlq = _dlq(stack, encryption=sqs.QueueEncryption.KMS, encryption_master_key=dlq_key)
    queue = _queue(stack, dlq=dlq, encryption=sqs.QueueEncryption.KMS, encryption_master_key=key)
    consumer = _consumer(stack, tmp_path, queue=queue)
    template, warnings = _synth(app, stack)
    assert warnings == []
    statements = _statements(template, consumer)
    assert [_actions(s) for s in statements if s["Resource"] == _arn(key)] == [
        set(permissions.SOURCE_QUEUE_KEY_ACTIONS)
    ]
    assert [_actions(s) for s in statements if s["Resource"] == _arn(dlq_key)] == [
        set(permissions.DLQ_KEY_ACTIONS)
    ]


def test_an_imported_queue_with_its_key_gets_decrypt_on_the_key(tmp_path):
    app, stack = _stack(tmp_path)
    queue = sqs.Queue.from_queue_attributes(
        stack, "Notices", queue_arn=IMPORTED_ARN, key_arn=KEY_ARN
    )
    consumer = _consumer(stack, tmp_path, queue=queue)
    template, _ = _synth(app, stack)
    assert [_actions(s) for s in _statements(template, consumer) if s["Resource"] == KEY_ARN] == [
        set(permissions.SOURCE_QUEUE_KEY_ACTIONS)
    ]
