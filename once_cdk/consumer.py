"""``OnceConsumer``: an SQS queue, its DLQ, an idempotency table and a Lambda function that
runs every record of the queue through the once protocol, with its alarms; or, with
``queue=``, the same on an existing queue (``once_cdk.existing_queue``).

It knows no handler and no business resource: the user names a code folder and a handler,
and grants the function whatever its business code touches. Everything else is derived
(``once_cdk.settings``) or fixed by the protocol: the visibility timeout, maxReceiveCount,
retentions, ``ReportBatchItemFailures``, an IAM role with one explicit statement per resource
(``once_cdk.permissions``), and cdk-nag's acknowledgments next to the resources they concern,
so that an app holding an ``OnceConsumer`` inherits no finding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, Annotations, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from once import constants as c
from once import event_filters
from once.backoff import Backoff, to_env
from once_cdk import existing_queue, permissions
from once_cdk.bundling import (
    ARCHITECTURE,
    RUNTIME,
    check_code_dir,
    function_code,
)
from once_cdk.monitoring import Monitoring, resource_name
from once_cdk.settings import DEFAULT_BACKOFF, ConfigurationError, ConsumerSettings

#: The retentions CloudWatch Logs accepts, in days (RetentionDays' values).
LOG_RETENTION_DAYS: dict[int, logs.RetentionDays] = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    2192: logs.RetentionDays.SIX_YEARS,
    2557: logs.RetentionDays.SEVEN_YEARS,
    2922: logs.RetentionDays.EIGHT_YEARS,
    3288: logs.RetentionDays.NINE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention_days(value: logs.RetentionDays | int) -> logs.RetentionDays:
    """A ``RetentionDays``, or a number of days CloudWatch Logs accepts."""
    if isinstance(value, logs.RetentionDays):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in LOG_RETENTION_DAYS:
        return LOG_RETENTION_DAYS[value]
    raise ConfigurationError(
        f"log_retention={value!r}: CloudWatch Logs keeps logs for one of "
        f"{sorted(LOG_RETENTION_DAYS)} days (or RetentionDays.INFINITE); pass a "
        "logs.RetentionDays"
    )


def _seconds(name: str, value: Duration) -> float:
    if not isinstance(value, Duration):
        raise ConfigurationError(f"{name}={value!r}: expected an aws_cdk.Duration")
    return value.to_seconds(integral=False)


#: The oldest Python runtime Lambda SnapStart supports.
SNAP_START_MIN_PYTHON = (3, 12)
#: The alias the event source mapping invokes with SnapStart on: its published version.
SNAP_START_ALIAS = "live"


def _python_version(runtime: lambda_.Runtime) -> tuple[int, ...] | None:
    """(3, 13) for ``python3.13``; None for a runtime that is not a Python one."""
    name = runtime.name.removeprefix("python")
    if name == runtime.name or not all(part.isdigit() for part in name.split(".")):
        return None
    return tuple(int(part) for part in name.split("."))


def snap_start_problem(snap_start: object, runtime: lambda_.Runtime) -> str | None:
    """Why ``snap_start`` cannot be given to a function on ``runtime``, or None.

    The construct sets neither provisioned concurrency, nor EFS, nor ephemeral storage (it
    stays at Lambda's 512 MB), which SnapStart refuses: the runtime is all there is to check.
    """
    if not isinstance(snap_start, bool):
        return (
            f"snap_start={snap_start!r}: pass True to restore the function from a snapshot "
            "of its initialized environment, or False (the default)"
        )
    version = _python_version(runtime)
    if snap_start and (version is None or version < SNAP_START_MIN_PYTHON):
        minimum = ".".join(map(str, SNAP_START_MIN_PYTHON))
        return (
            f"snap_start=True: Lambda SnapStart for Python needs the python{minimum} runtime "
            f"or later, and the function runs on {runtime.name} (RUNTIME in "
            "once_cdk/bundling.py); leave snap_start off"
        )
    return None


#: The warning for more filters than Lambda's default quota per mapping; acknowledge it once
#: the account's quota was raised.
FILTERS_ABOVE_DEFAULT_QUOTA = "once-cdk:filtersAboveDefaultQuota"


def _filter_criteria(settings: ConsumerSettings) -> dict[str, Any]:
    """The mapping's ``filters`` argument: each pattern's text as once checked it (not
    ``FilterCriteria.filter``'s, which Node writes: once_env and the local cloud match the
    text deployed), or nothing at all, so that a consumer without filters keeps its
    template."""
    texts = settings.filter_patterns
    return {"filters": [{"pattern": text} for text in texts]} if texts else {}


def _poller_config(pollers: tuple[int, int] | None) -> lambda_.ProvisionedPollerConfig | None:
    """Provisioned mode's (minimum, maximum) event pollers, or None for Lambda's scaling."""
    if pollers is None:
        return None
    minimum, maximum = pollers
    return lambda_.ProvisionedPollerConfig(minimum_pollers=minimum, maximum_pollers=maximum)


class OnceConsumer(Construct):
    """The queue, DLQ, idempotency table, function, mapping, alarms and dashboard of one
    once consumer; it knows nothing of the handler it runs (``code_dir``, ``handler``).

    Attributes: ``queue``, ``dlq``, ``table``, ``function``, ``alarm_topic``; also
    ``settings`` (the derived values), ``role``, ``log_group``, ``mapping``, ``alias``
    (with ``snap_start=True``, else None), ``alarms`` and ``dashboard``. It derives what
    must not be typed (the visibility timeout, ``maxReceiveCount`` from ``backoff``, which
    it also passes to the function, the retentions) and refuses at synth a setting that
    breaks a rule, naming it. Every argument, what it derives and why, an existing queue
    (``queue=``), the opt-in mapping settings, the mapping's ``filters`` and SnapStart:
    docs/construct.md."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code_dir: str | Path,
        handler: str,
        service_name: str,
        fifo: bool = False,
        timeout: Duration = Duration.seconds(30),  # noqa: B008 (immutable, as in CDK's own)
        memory_size: int = 512,
        batch_size: int = 10,
        max_batching_window: Duration = Duration.seconds(0),  # noqa: B008
        max_concurrency: int | None = None,
        reserved_concurrency: int | None = None,
        max_receive_count: int | None = None,
        retain_data: bool = False,
        log_retention: logs.RetentionDays | int = logs.RetentionDays.TWO_WEEKS,
        alarm_email: str | None = None,
        environment: Mapping[str, str] | None = None,
        backoff: Backoff | None = DEFAULT_BACKOFF,
        provisioned_pollers: tuple[int, int] | None = None,
        event_count_metrics: bool = False,
        snap_start: bool = False,
        queue: sqs.IQueue | None = None,
        filters: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        # Everything is checked before the construct joins the tree: a refused setting
        # leaves no half-built consumer behind.
        environment = dict(environment or {})
        settings = ConsumerSettings(
            service_name=service_name,
            fifo=fifo,
            timeout_s=_seconds("timeout", timeout),
            memory_mb=memory_size,
            batch_size=batch_size,
            batching_window_s=_seconds("max_batching_window", max_batching_window),
            max_concurrency=max_concurrency,
            reserved_concurrency=reserved_concurrency,
            max_receive_count=max_receive_count,
            environment=tuple(environment),
            backoff=backoff,
            provisioned_pollers=provisioned_pollers,
            event_count_metrics=event_count_metrics,
            filters=filters,
        )
        existing = (
            None if queue is None else existing_queue.read(queue, settings, max_receive_count)
        )
        if existing is not None:
            # What the queue holds replaces what the construct would derive for it.
            settings = dataclasses.replace(
                settings,
                max_receive_count=existing.max_receive_count,
                queue_visibility_timeout_s=existing.visibility_timeout_s,
                queue_retention_s=existing.retention_s,
            )
        snap_start_refused = snap_start_problem(snap_start, RUNTIME)
        if snap_start_refused:
            raise ConfigurationError(snap_start_refused)
        retention = retention_days(log_retention)
        code_path = Path(code_dir).resolve()
        problem = check_code_dir(code_path, handler)
        if problem:
            raise ConfigurationError(problem)
        super().__init__(scope, construct_id)
        self.settings = settings
        removal = RemovalPolicy.RETAIN if retain_data else RemovalPolicy.DESTROY

        self.queue: sqs.IQueue
        self.dlq: sqs.IQueue | None
        if existing is None:
            self.dlq, self.queue = self._queues(settings)
        else:
            self.queue, self.dlq = existing.queue, existing.dlq
            if existing.unchecked:
                Annotations.of(self).add_warning_v2(
                    existing_queue.QUEUE_NOT_CHECKED, existing.warning(self.node.path)
                )
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(
                name=c.PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=c.TTL_ATTRIBUTE,
            removal_policy=removal,
            deletion_protection=retain_data,
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=retention, removal_policy=removal)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"once consumer {service_name}: its table, its queues, its log group; "
            "the application grants its own resources.",
        )
        namespace = environment.get(c.ENV_METRICS_NAMESPACE, c.DEFAULT_METRICS_NAMESPACE)
        # Off, the function gets no snap_start property at all: the template stays as it was.
        snap_start_config: dict[str, Any] = (
            {"snap_start": lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS} if snap_start else {}
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=function_code(code_path, for_host=bool(self.node.try_get_context(c.HOST_CONTEXT))),
            timeout=Duration.seconds(int(settings.timeout_s)),
            memory_size=settings.memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            role=self.role,
            reserved_concurrent_executions=settings.reserved_concurrency,
            environment={
                **environment,
                c.ENV_TABLE_NAME: self.table.table_name,
                # An imported queue's DLQ is unknown: no quarantine fast path.
                **({} if self.dlq is None else {c.ENV_DLQ_URL: self.dlq.queue_url}),
                c.ENV_SERVICE_NAME: service_name,
                c.ENV_METRICS_NAMESPACE: namespace,
                c.ENV_RETENTION_S: str(settings.record_retention_s),
                # The backoff maxReceiveCount was derived from, run by make_handler.
                c.ENV_BACKOFF: to_env(settings.backoff),
            },
            description=f"once consumer {service_name}: {handler} behind a fenced "
            "lock/finalize protocol on DynamoDB.",
            **snap_start_config,
        )
        # SnapStart restores published versions only: the mapping invokes an alias of one.
        self.alias: lambda_.Alias | None = (
            lambda_.Alias(
                self,
                "Live",
                alias_name=SNAP_START_ALIAS,
                version=self.function.current_version,
            )
            if snap_start
            else None
        )
        self._allow(permissions.IDEMPOTENCY_TABLE_ACTIONS, self.table.table_arn)
        self._allow(permissions.SOURCE_QUEUE_ACTIONS, self.queue.queue_arn)
        if self.dlq is not None:
            self._allow(permissions.DLQ_ACTIONS, self.dlq.queue_arn)
        self._allow(permissions.LOG_GROUP_ACTIONS, self.log_group.log_group_arn)
        # An existing queue may be encrypted with a customer managed key (the queues the
        # construct builds are SQS-managed: no key, no statement).
        if self.queue.encryption_master_key is not None:
            self._allow(
                permissions.SOURCE_QUEUE_KEY_ACTIONS, self.queue.encryption_master_key.key_arn
            )
        if self.dlq is not None and self.dlq.encryption_master_key is not None:
            self._allow(permissions.DLQ_KEY_ACTIONS, self.dlq.encryption_master_key.key_arn)

        self.mapping = lambda_.EventSourceMapping(
            self,
            "Mapping",
            target=self.alias or self.function,
            event_source_arn=self.queue.queue_arn,
            batch_size=settings.batch_size,
            max_batching_window=Duration.seconds(int(settings.batching_window_s)),
            report_batch_item_failures=True,
            max_concurrency=settings.max_concurrency,
            provisioned_poller_config=_poller_config(settings.provisioned_pollers),
            metrics_config=(
                lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT])
                if settings.event_count_metrics
                else None
            ),
            **_filter_criteria(settings),
        )
        self._warn_of_filter_quota(settings)
        # The mapping polls with the role: create it only once the role may read the queue.
        self.mapping.node.add_dependency(self.role)

        monitoring = Monitoring(
            self,
            "Monitoring",
            name=resource_name(Stack.of(self).stack_name, construct_id),
            settings=settings,
            namespace=namespace,
            source=self.queue,
            dlq=self.dlq,
            function=self.function,
            alarm_email=alarm_email,
        )
        self.alarm_topic = monitoring.topic
        self.alarms = monitoring.alarms
        self.dashboard = monitoring.dashboard
        self._acknowledge_findings()

    def _warn_of_filter_quota(self, settings: ConsumerSettings) -> None:
        """More patterns than Lambda's default quota deploy only where the account's quota
        was raised (up to 10): a warning, not a refusal, since synth cannot read the quota."""
        count = len(settings.filter_patterns)
        if count > event_filters.DEFAULT_MAX_FILTERS:
            Annotations.of(self).add_warning_v2(
                FILTERS_ABOVE_DEFAULT_QUOTA,
                f"OnceConsumer {self.node.path} has {count} filters, above Lambda's default "
                f"quota of {event_filters.DEFAULT_MAX_FILTERS} per event source mapping: the "
                "deploy fails unless the account's quota was raised (Service Quotas, up to "
                f'{event_filters.MAX_FILTERS}). Raise it, or join patterns with "$or"; then '
                "acknowledge this warning: Annotations.of(consumer).acknowledge_warning("
                f"'{FILTERS_ABOVE_DEFAULT_QUOTA}')",
            )

    def _queues(self, settings: ConsumerSettings) -> tuple[sqs.Queue, sqs.Queue]:
        """The DLQ and the source queue: encrypted, TLS only, FIFO together or not at all."""
        # FIFO: the runtime quarantines with the record's group and deduplication ids; the
        # source deduplicates by content so that producers need only set a group.
        fifo: dict[str, Any] = (
            {"fifo": True, "content_based_deduplication": True} if settings.fifo else {}
        )
        dlq = sqs.Queue(
            self,
            "Dlq",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(settings.dlq_retention_s),
            **fifo,
        )
        Validations.of(dlq).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-SQSRedrivePolicy",
                reason="This queue is the dead-letter queue: the end of the line. Its "
                "messages wait 14 days for a human to inspect and redrive them; a further "
                "DLQ behind it would only move the same question one queue along.",
            )
        )
        queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.seconds(settings.source_retention_s),
            visibility_timeout=Duration.seconds(settings.visibility_timeout_s),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=dlq, max_receive_count=settings.receive_count
            ),
            **fifo,
        )
        return dlq, queue

    def grant_staged_writes(
        self,
        table: dynamodb.ITable,
        operations: Iterable[str] = tuple(permissions.STAGED_WRITE_ACTIONS),
    ) -> None:
        """Let business code stage writes on ``table`` with ``attempt.write``: the action
        IAM checks for each element's operation (``Put``, ``Update``, ``Delete``,
        ``ConditionCheck``; all four unless ``operations`` names fewer), on that table
        only. Exact, where ``table.grant_write_data`` is both wider (BatchWriteItem) and
        short of what a transaction's ``ConditionCheck`` needs."""
        wanted = list(dict.fromkeys(operations))
        unknown = [o for o in wanted if o not in permissions.STAGED_WRITE_ACTIONS]
        if unknown or not wanted:
            raise ValueError(
                f"grant_staged_writes: operations are {', '.join(permissions.STAGED_WRITE_ACTIONS)}"
                f" (got {', '.join(map(repr, unknown)) or 'none'})"
            )
        if table is self.table:
            raise ValueError(
                "grant_staged_writes: this is the consumer's own idempotency table, which "
                "takes no business write (attempt.write refuses it too)"
            )
        actions = tuple(permissions.STAGED_WRITE_ACTIONS[o] for o in wanted)
        self._allow(actions, table.table_arn)

    def grant_powertools_records(self, table: dynamodb.ITable) -> None:
        """Let the function honour and keep the team's Powertools idempotency records while
        it migrates (``make_handler(powertools=PowertoolsBridge(...))``, docs/migrating.md):
        read, put and update on ``table`` only, never delete."""
        if table is self.table:
            raise ValueError(
                "grant_powertools_records: this is the consumer's own idempotency table; "
                "pass the table the Powertools build wrote its records to"
            )
        self._allow(permissions.POWERTOOLS_RECORDS_ACTIONS, table.table_arn)

    def _allow(self, actions: tuple[str, ...], resource_arn: str) -> None:
        self.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(actions), resources=[resource_arn])
        )

    def _acknowledge_findings(self) -> None:
        """cdk-nag findings on this construct that are deliberate, each with its reason."""
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray tracing (Tracing.ACTIVE) needs xray:PutTraceSegments and "
                "xray:PutTelemetryRecords, which X-Ray grants on Resource '*' only: the "
                "service has no resource-level permissions. Every other statement of the "
                "construct names its resource.",
            )
        )
        runtime_reason = (
            "The runtime is pinned to Python 3.13 together with the bundling, which installs "
            "cp313 manylinux wheels (once_cdk/bundling.py). Moving to a newer runtime is a "
            "deliberate change of both, tested before it ships."
        )
        Validations.of(self.function).acknowledge(
            Acknowledgment(id="AwsSolutions::AwsSolutions-L1", reason=runtime_reason),
            Acknowledgment(id="Serverless::Serverless-LambdaLatestVersion", reason=runtime_reason),
            Acknowledgment(
                id="Serverless::Serverless-LambdaDLQ",
                reason="A function dead-letter queue only catches asynchronous invocations. "
                "This function is invoked synchronously by its SQS event source mapping "
                "only; failed records go back to the source queue, whose redrive policy "
                "moves them to the DLQ after maxReceiveCount receives.",
            ),
        )
        Validations.of(self.mapping).acknowledge(
            Acknowledgment(
                id="Serverless::Serverless-LambdaEventSourceMappingDestination",
                reason="Lambda supports on-failure destinations for stream and Kafka sources, "
                "not for SQS. For an SQS source the failure destination is the queue's own "
                "redrive policy to the DLQ, which this construct configures.",
            )
        )
