"""The source queue and the DLQ: encryption, TLS, retention and redelivery timing."""

from __future__ import annotations

from infra.stages import MIN_MAX_RECEIVE_COUNT, VISIBILITY_TIMEOUT_FACTOR
from once import constants as c


def _queues(synth):
    source_id = synth.logical_id(synth.stack.queues.source)
    dlq_id = synth.logical_id(synth.stack.queues.dlq)
    resources = synth.template["Resources"]
    return resources[source_id]["Properties"], resources[dlq_id]["Properties"], source_id, dlq_id


def test_both_queues_are_encrypted_with_sse_sqs(synth):
    queues = synth.resources("AWS::SQS::Queue")
    assert len(queues) == 2
    for queue in queues.values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True


def test_both_queues_refuse_requests_without_tls(synth):
    _, _, source_id, dlq_id = _queues(synth)
    protected = set()
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if (
                statement["Effect"] == "Deny"
                and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
                and statement["Action"] == "sqs:*"
            ):
                protected.add(statement["Resource"]["Fn::GetAtt"][0])
    assert protected == {source_id, dlq_id}


def test_dlq_keeps_messages_14_days_longer_than_the_source_queue(synth):
    source, dlq, _, _ = _queues(synth)
    assert dlq["MessageRetentionPeriod"] == c.DLQ_RETENTION_S == 14 * c.DAY_S
    assert source["MessageRetentionPeriod"] == c.DEFAULT_SOURCE_RETENTION_S
    assert dlq["MessageRetentionPeriod"] > source["MessageRetentionPeriod"]


def test_source_queue_redrives_to_the_dlq_after_at_least_five_receives(synth):
    source, _, _, dlq_id = _queues(synth)
    redrive = source["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    assert redrive["maxReceiveCount"] >= MIN_MAX_RECEIVE_COUNT
    assert redrive["maxReceiveCount"] == synth.settings.max_receive_count


def test_visibility_timeout_covers_six_function_timeouts_plus_the_batching_window(synth):
    source, _, _, _ = _queues(synth)
    _, function = synth.one("AWS::Lambda::Function")
    _, mapping = synth.one("AWS::Lambda::EventSourceMapping")
    timeout = function["Properties"]["Timeout"]
    window = mapping["Properties"]["MaximumBatchingWindowInSeconds"]
    assert source["VisibilityTimeout"] == VISIBILITY_TIMEOUT_FACTOR * timeout + window
    assert source["VisibilityTimeout"] >= 6 * timeout + window


def test_dlq_is_the_end_of_the_line_with_no_redrive_of_its_own(synth):
    _, dlq, _, _ = _queues(synth)
    assert "RedrivePolicy" not in dlq
