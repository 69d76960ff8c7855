"""An ``OnceConsumer``'s alarms, their SNS topic and its dashboard: the signals that say the
consumer needs a human.

Each alarm watches one way the consumer can go wrong: messages given up on (DLQ depth), a
backlog that stopped moving (age of the oldest message), the function failing as a whole
(errors, throttles), a share of records failing that outlasts a transient blip (an
AccessDenied on a claim or a DLQ send fails records, not the function), and the protocol's
own warnings from its EMF metrics (a finalize that lost its lease, a key reused with a
different payload, an expired lease quarantined by policy). Every alarm has an explicit name
built from the stack's name, so the console shows what the alarm is. The dashboard shows the
same signals beside the throughput they belong to.
"""

from __future__ import annotations

import dataclasses
import re

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from once import constants as c
from once.models import METRIC_NAMES
from once_cdk.settings import ConsumerSettings

#: Powertools' EMF metrics carry the service name in this dimension by default.
SERVICE_DIMENSION = "service"
PERIOD = Duration.minutes(1)
#: The failed-records alarm fires when more than this share of the records reaching an
#: outcome failed ...
FAILED_SHARE_PERCENT = 10
#: ... in each of this many consecutive minutes: a transient failure retried with backoff
#: succeeds within a minute or two and does not page; failing permissions or a broken
#: dependency fail every record, minute after minute.
FAILED_SHARE_MINUTES = 3
#: Dashboard names allow letters, digits, '-' and '_' only.
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclasses.dataclass(frozen=True)
class AlarmSpec:
    """One alarm: what it watches and when it fires (value > threshold)."""

    construct_id: str
    description: str
    metric: cloudwatch.IMetric
    threshold: float
    periods: int = 1


def protocol_metric(namespace: str, service_name: str, name: str) -> cloudwatch.Metric:
    """A metric the once runtime emits in EMF, as Powertools names it."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={SERVICE_DIMENSION: service_name},
        statistic=cloudwatch.Stats.SUM,
        period=PERIOD,
    )


#: The outcomes that leave a record not done, to come back: failed (FIFO records skipped
#: after a failure in their group count as failed, as the runtime counts them), and owed (its
#: commit landed but its outbox is not all sent, as when the function may not send to it).
NOT_DONE_METRICS = (c.METRIC_FAILED, c.METRIC_OWED)
#: Left out of the share's total: an ``OwedSent`` delivery is the redelivery of a record
#: already counted once, as ``Owed``, so leaving it out only makes the share larger (and
#: keeps the alarm within CloudWatch's limit of 10 metrics per metric-math alarm).
UNCOUNTED_METRICS = (c.METRIC_OWED_SENT,)


def failed_share(namespace: str, service_name: str) -> cloudwatch.MathExpression:
    """Percentage of the records reaching an outcome that were not done (failed, or owing
    their outbox) and come back."""
    names = sorted(set(METRIC_NAMES.values()) - set(UNCOUNTED_METRICS))
    ids = {name: f"m{index}" for index, name in enumerate(names)}
    total = " + ".join(f"FILL({ids[name]}, 0)" for name in names)
    not_done = " + ".join(f"FILL({ids[name]}, 0)" for name in NOT_DONE_METRICS)
    return cloudwatch.MathExpression(
        expression=f"100 * ({not_done}) / ({total})",
        using_metrics={ids[name]: protocol_metric(namespace, service_name, name) for name in names},
        label="Failed records (%)",
        period=PERIOD,
    )


def resource_name(*parts: str) -> str:
    """A stable CloudWatch name from the stack's name and the construct's id."""
    return _NOT_IN_NAME.sub("-", "-".join(parts))


class Monitoring(Construct):
    """The alarm topic, the alarms and the dashboard of one consumer."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        settings: ConsumerSettings,
        namespace: str,
        source: sqs.IQueue,
        dlq: sqs.IQueue | None,
        function: lambda_.Function,
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(alarm_email)
        service = settings.service_name

        def metric(metric_name: str) -> cloudwatch.Metric:
            return protocol_metric(namespace, service, metric_name)

        # None: an imported queue's DLQ, unknown to the construct (no DlqDepth alarm).
        dlq_depth = (
            None
            if dlq is None
            else dlq.metric_approximate_number_of_messages_visible(
                statistic=cloudwatch.Stats.MAXIMUM, period=PERIOD
            )
        )
        oldest_age = source.metric_approximate_age_of_oldest_message(
            statistic=cloudwatch.Stats.MAXIMUM, period=PERIOD
        )
        errors = function.metric_errors(statistic=cloudwatch.Stats.SUM, period=PERIOD)
        throttles = function.metric_throttles(statistic=cloudwatch.Stats.SUM, period=PERIOD)
        failed = failed_share(namespace, service)
        lease_lost = metric(c.METRIC_LEASE_LOST)
        conflict = metric(c.METRIC_CONFLICT)
        lease_expired = metric(c.METRIC_LEASE_EXPIRED)
        internal_error = metric(c.METRIC_INTERNAL_ERROR)

        specs: list[AlarmSpec] = []
        if dlq_depth is not None:
            description = (
                f"Messages are waiting in the DLQ: they failed {settings.receive_count} "
                "receives or were quarantined as permanent failures. Inspect them, fix the "
                "cause, then redrive."
            )
            specs.append(AlarmSpec("DlqDepth", description, dlq_depth, 0))
        specs += [
            AlarmSpec("OldestMessageAge", "The oldest message in the source queue is older "
                      "than all its retries could make it: the consumer is stuck or too slow.",
                      oldest_age, settings.oldest_message_alarm_s),
            AlarmSpec("FunctionErrors", "The consumer failed as a whole (crash, timeout or "
                      "out of memory): the batch returns to the queue.", errors, 0),
            AlarmSpec("FunctionThrottles", "Invocations of the consumer were throttled: "
                      "check reserved concurrency against the mapping's maximum concurrency.",
                      throttles, 0),
            AlarmSpec("FailedRecords", f"More than {FAILED_SHARE_PERCENT}% of the records "
                      f"failed or owed their outbox in each of {FAILED_SHARE_MINUTES} "
                      "consecutive minutes: business code keeps raising, or the function may "
                      "not claim records, send to the DLQ or to an outbox's destination "
                      "(AccessDenied fails records, not the function). Read the function's "
                      "logs.", failed, FAILED_SHARE_PERCENT, FAILED_SHARE_MINUTES),
            AlarmSpec("LeaseLost", "A finalize lost its lease: a record ran longer than its "
                      "lease and another invocation took it over. Check the timeouts.",
                      lease_lost, 0),
            AlarmSpec("Conflict", "A business key arrived again with a different payload: the "
                      "message was quarantined to the DLQ, the effect was not applied.",
                      conflict, 0),
            AlarmSpec("LeaseExpired", "A claim found an expired lease and, by the "
                      "on_expired_lease='quarantine' policy, sent the message to the DLQ "
                      "without running it: check whether the effect happened, then redrive.",
                      lease_expired, 0),
            AlarmSpec("InternalError", "once's own code raised while handling a record (a "
                      "bug in once, not in business code): that record was reported failed "
                      "and comes back; the rest of its batch went on. Read the function's "
                      "'internal error' log lines and report them.", internal_error, 0),
        ]  # fmt: skip
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for spec in specs:
            alarm = cloudwatch.Alarm(
                self,
                spec.construct_id,
                alarm_name=resource_name(name, spec.construct_id),
                alarm_description=spec.description,
                metric=spec.metric,
                threshold=spec.threshold,
                evaluation_periods=spec.periods,
                datapoints_to_alarm=spec.periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
            self.alarms[spec.construct_id] = alarm

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=resource_name(name))
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms", alarms=list(self.alarms.values()), width=24, height=3
            )
        )
        self.dashboard.add_widgets(
            _graph("Source queue", [
                source.metric_number_of_messages_sent(period=PERIOD),
                source.metric_number_of_messages_deleted(period=PERIOD),
                source.metric_approximate_number_of_messages_visible(period=PERIOD),
            ], right=[oldest_age]),
            *([] if dlq_depth is None else [_graph("DLQ depth", [dlq_depth])]),
            _graph("Function", [
                function.metric_invocations(period=PERIOD), errors, throttles,
            ], right=[function.metric_duration(period=PERIOD, statistic="p99")]),
        )  # fmt: skip
        self.dashboard.add_widgets(
            _graph("Outcomes", [
                metric(metric_name)
                for metric_name in (c.METRIC_PROCESSED, c.METRIC_DUPLICATE, c.METRIC_BUSY,
                                    c.METRIC_FAILED, c.METRIC_QUARANTINED)
            ], right=[failed], width=12),
            _graph("Protocol warnings", [
                lease_lost, conflict, lease_expired, internal_error,
                metric(c.METRIC_TAKEOVER),
                metric(c.METRIC_DEADLINE),
            ], width=12),
        )  # fmt: skip

    def _topic(self, alarm_email: str | None) -> sns.Topic:
        # CloudWatch can publish to an encrypted topic only with a customer managed key
        # whose policy lets it: the AWS managed key for SNS does not.
        key = kms.Key(
            self,
            "TopicKey",
            description="Encrypts the once alarm topic.",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        topic = sns.Topic(self, "AlarmTopic", master_key=key, enforce_ssl=True)
        if alarm_email:
            subscription = topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
            Validations.of(subscription).acknowledge(
                Acknowledgment(
                    id="Serverless::Serverless-SNSRedrivePolicy",
                    reason="An alarm e-mail that SNS cannot deliver loses no data: the alarm "
                    "stays in ALARM state on the dashboard and in the CloudWatch console, "
                    "and a queue for undelivered e-mails would itself need watching.",
                )
            )
        return topic


def _graph(
    title: str,
    left: list[cloudwatch.IMetric],
    right: list[cloudwatch.IMetric] | None = None,
    width: int = 8,
) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, left=left, right=right or [], width=width, height=6)
