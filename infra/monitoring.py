"""Alarms, their SNS topic and the dashboard: the signals that say once needs a human.

Each alarm watches one way the service can go wrong: messages given up on (DLQ depth), a
backlog that stopped moving (age of the oldest message), the function failing as a whole
(errors, throttles), and the protocol's own warnings from its EMF metrics (a finalize that
lost its lease, a key reused with a different payload). The dashboard shows the same signals
beside the throughput they belong to.
"""

from __future__ import annotations

import dataclasses

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

from infra.stages import StageSettings
from once import constants as c

#: Powertools' EMF metrics carry the service name in this dimension by default.
SERVICE_DIMENSION = "service"
PERIOD = Duration.minutes(1)


@dataclasses.dataclass(frozen=True)
class AlarmSpec:
    """One alarm: what it watches and when it fires (metric value > threshold)."""

    construct_id: str
    description: str
    metric: cloudwatch.IMetric
    threshold: float


def protocol_metric(settings: StageSettings, name: str) -> cloudwatch.Metric:
    """A metric the once layer emits in EMF, as Powertools names it."""
    return cloudwatch.Metric(
        namespace=settings.metrics_namespace,
        metric_name=name,
        dimensions_map={SERVICE_DIMENSION: settings.service_name},
        statistic=cloudwatch.Stats.SUM,
        period=PERIOD,
    )


class Monitoring(Construct):
    """The alarm topic, the alarms and the dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: StageSettings,
        source: sqs.Queue,
        dlq: sqs.Queue,
        function: lambda_.Function,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(settings)

        dlq_depth = dlq.metric_approximate_number_of_messages_visible(
            statistic=cloudwatch.Stats.MAXIMUM, period=PERIOD
        )
        oldest_age = source.metric_approximate_age_of_oldest_message(
            statistic=cloudwatch.Stats.MAXIMUM, period=PERIOD
        )
        errors = function.metric_errors(statistic=cloudwatch.Stats.SUM, period=PERIOD)
        throttles = function.metric_throttles(statistic=cloudwatch.Stats.SUM, period=PERIOD)
        lease_lost = protocol_metric(settings, c.METRIC_LEASE_LOST)
        conflict = protocol_metric(settings, c.METRIC_CONFLICT)

        specs = [
            AlarmSpec("DlqDepth", "Messages are waiting in the DLQ: they failed "
                      f"{settings.max_receive_count} times or were quarantined as permanent "
                      "failures. Inspect them, fix the cause, then redrive.", dlq_depth, 0),
            AlarmSpec("OldestMessageAge", "The oldest message in the source queue is older "
                      "than all its retries could make it: the consumer is stuck or too slow.",
                      oldest_age, settings.oldest_message_alarm_s),
            AlarmSpec("FunctionErrors", "The consumer failed as a whole (crash, timeout or "
                      "out of memory): the batch returns to the queue.", errors, 0),
            AlarmSpec("FunctionThrottles", "Invocations of the consumer were throttled: "
                      "check reserved concurrency against the mapping's maximum concurrency.",
                      throttles, 0),
            AlarmSpec("LeaseLost", "A finalize lost its lease: a record ran longer than its "
                      "lease and another invocation took it over. Check the timeouts.",
                      lease_lost, 0),
            AlarmSpec("Conflict", "A business key arrived again with a different payload: the "
                      "message was quarantined to the DLQ, the effect was not applied.",
                      conflict, 0),
        ]  # fmt: skip
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        for spec in specs:
            alarm = cloudwatch.Alarm(
                self,
                spec.construct_id,
                alarm_description=spec.description,
                metric=spec.metric,
                threshold=spec.threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
            self.alarms[spec.construct_id] = alarm

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
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
            _graph("DLQ depth", [dlq_depth]),
            _graph("Function", [
                function.metric_invocations(period=PERIOD), errors, throttles,
            ], right=[function.metric_duration(period=PERIOD, statistic="p99")]),
        )  # fmt: skip
        self.dashboard.add_widgets(
            _graph("Outcomes", [
                protocol_metric(settings, name)
                for name in (c.METRIC_PROCESSED, c.METRIC_DUPLICATE, c.METRIC_BUSY,
                             c.METRIC_FAILED, c.METRIC_QUARANTINED)
            ], width=12),
            _graph("Protocol warnings", [
                lease_lost, conflict,
                protocol_metric(settings, c.METRIC_TAKEOVER),
                protocol_metric(settings, c.METRIC_DEADLINE),
            ], width=12),
        )  # fmt: skip

    def _topic(self, settings: StageSettings) -> sns.Topic:
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
        if settings.alarm_email:
            subscription = topic.add_subscription(
                subscriptions.EmailSubscription(settings.alarm_email)
            )
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
