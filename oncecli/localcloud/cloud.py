"""The local cloud: a CDK app's ``local`` stage, deployed to moto on this machine.

Why: the demo, ``once up`` and a team's integration tests should run the stacks that ship,
not a hand-made copy. So this module synthesizes the app (``template``: found in its
``cdk.json``, made deployable on moto), finds every ``OnceConsumer`` in every stack, and
deploys the stacks that hold one, in dependency order: it publishes their assets to moto's
S3, creates each stack through moto's CloudFormation, and reads the resources back. Each
consumer's function runs from its own asset (``mapping``, ``invocation``). Where moto
differs from AWS it is patched, and each patch is listed in ``LocalCloud.notes``: the
template's changes, moto ignoring ``TimeToLiveSpecification`` (UpdateTimeToLive is called
for it), and the SNS subscriptions with the SQS protocol, created through SNS's API after
the deploy (``subscriptions``). The alarms are created in moto's CloudWatch after the deploy
and evaluated there by a thread while the cloud runs (``alarms``). What the local cloud does
not run (the alarms' actions, an alarm on AWS's own metrics, queue and topic policies,
dashboards, subscriptions of other protocols...) is in ``LocalCloud.stripped``, each with
why: ``once up`` prints it and ``once_cloud`` warns of it.

With ``engine="dynamodb-local"`` the tables are also created on DynamoDB Local, from the
template's definitions and with the names the stack gave them, and everything that reads or
writes DynamoDB is pointed there; SQS and every other service stay on moto.

A worker reaches the local cloud for every AWS service its function calls, never the
internet (``routing_env``): once's SNS outbox and the business code's S3 or SecretsManager
calls land on moto, and a service moto does not emulate answers with an error at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from oncecli.aws import LOCAL_REGION, local_client, local_env
from oncecli.consumers import consumers_in
from oncecli.errors import EngineFailed, StackNotFound, SynthFailed, UsageError
from oncecli.localcloud import alarms, resolve, subscriptions
from oncecli.localcloud.emf import Shipper
from oncecli.localcloud.engines import (
    ENGINES,
    DynamoDBLocal,
    Engine,
    MotoServer,
    check_port_free,
    enter_private_netns,
)
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig, filters_of
from oncecli.localcloud.template import (
    AlarmResource,
    ConsumerFound,
    StackFound,
    Stripped,
    patch,
    resources_of,
    stacks_of,
    synth,
    to_deploy,
)
from oncecli.project import BUILD_DIR, Project


def _zip_asset(source: Path, digest: str, build_dir: Path) -> Path:
    """The zipped asset directory, cached by its asset hash (37 MB zips in seconds, once)."""
    target = build_dir / "assets" / f"{digest}.zip"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(source))
    os.replace(tmp, target)
    return target


def publish_assets(s3: Any, assembly: Path, artifact: str, build_dir: Path) -> int:
    """Upload a stack's file assets where its template expects them, as ``cdk deploy``
    would."""
    manifest_path = assembly / f"{artifact}.assets.json"
    if not manifest_path.is_file():
        return 0
    manifest = json.loads(manifest_path.read_text())
    count = 0
    for digest, asset in manifest.get("files", {}).items():
        source = assembly / asset["source"]["path"]
        if asset["source"].get("packaging") == "zip" and source.is_dir():
            source = _zip_asset(source, digest, build_dir)
        for destination in asset["destinations"].values():
            bucket = destination["bucketName"]
            for name, value in resolve.pseudo_parameters().items():
                bucket = bucket.replace("${" + name + "}", value)
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                s3.create_bucket(Bucket=bucket)
            s3.upload_file(str(source), bucket, destination["objectKey"])
            count += 1
    return count


def _create_table(ddb: Any, name: str, properties: dict[str, Any]) -> None:
    """One table on DynamoDB Local, as the template defines it."""
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
    }
    if request["BillingMode"] == "PROVISIONED":
        request["ProvisionedThroughput"] = properties.get(
            "ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        )
    ddb.create_table(**request)
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.2})


def _enable_ttl(ddb: Any, name: str, properties: dict[str, Any]) -> str | None:
    """Turn on the TTL the template declares for a table; return its attribute, if any."""
    ttl = properties.get("TimeToLiveSpecification")
    if not ttl or not ttl.get("Enabled"):
        return None
    ddb.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
    )
    return str(ttl["AttributeName"])


@dataclass
class Consumer:
    """One deployed ``OnceConsumer``: where it was found, its stack's outputs, and what the
    mapping emulator needs of it."""

    found: ConsumerFound
    outputs: dict[str, str]
    function: FunctionConfig
    mapping: MappingConfig

    @property
    def stack(self) -> str:
        return self.found.stack

    @property
    def name(self) -> str:
        return self.found.name

    @property
    def log_name(self) -> str:
        """Its workers' log file (in the build folder)."""
        return f"workers-{self.found.path.replace('/', '-')}.log"


@dataclass
class LocalCloud:
    """moto (and DynamoDB Local) running with the app's consumer stacks deployed; a context
    manager. ``project``: the CDK app to synthesize (default: the one at or above the
    working directory); ``assembly``: a synthesized cloud assembly instead."""

    engine: str = "moto"
    assembly: Path | None = None
    context: dict[str, str] = field(default_factory=dict)
    project: Project | None = None
    #: The endpoint's port on 127.0.0.1 (0: any free one).
    port: int = 0
    #: One line per local patch, and per part of a template not run (``stripped``).
    notes: list[str] = field(default_factory=list)
    #: What of the stacks the local cloud does not run, and why.
    stripped: list[Stripped] = field(default_factory=list)
    endpoints: dict[str, str] = field(default_factory=dict)
    stacks: list[StackFound] = field(default_factory=list)
    consumers: list[Consumer] = field(default_factory=list)
    build_dir: Path = BUILD_DIR
    #: The alarms created in the local CloudWatch (``alarms``), by name.
    alarm_names: list[str] = field(default_factory=list)
    #: Whether a thread evaluates the alarms while the cloud runs (``alarms.Evaluator``).
    evaluate_alarms_every: float | None = alarms.EVALUATE_EVERY_S
    _evaluator: alarms.Evaluator | None = None
    #: Where this cloud's logs go (the engines', the workers'): the build folder, or a
    #: folder of its own there while another cloud of the same app runs (``_own_logs``).
    log_dir: Path = BUILD_DIR
    _engines: list[Engine] = field(default_factory=list)
    _stack_outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    _log_lock: Any = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}: expected one of {ENGINES}")

    # --- lifecycle --------------------------------------------------------------------------
    def _synthesized(self) -> Path:
        """The app's cloud assembly (synthesized, or cached from the last synth of the same
        inputs), and the stacks of it that hold a consumer."""
        if self.assembly is None:
            assert self.project is not None
            assembly = synth(self.project, self.context, log=self.build_dir / "synth.log")
        else:
            assembly = self.assembly
        self.stacks = to_deploy(stacks_of(assembly))
        return assembly

    def _find_build_dir(self) -> None:
        """The project (for a synth) and the folder its builds and logs go to."""
        if self.assembly is None:
            self.project = self.project or Project.find()
            self.build_dir = self.project.build_dir
        self.build_dir.mkdir(parents=True, exist_ok=True)

    def attach(self, endpoint: str, dynamodb_endpoint: str | None = None) -> LocalCloud:
        """A view of the local cloud another process runs (``once up``) at ``endpoint``:
        the app's consumers, as deployed there, read from its engines; nothing is started
        or deployed (``once invoke`` runs a function of it)."""
        self._find_build_dir()
        self._synthesized()
        self.endpoints = {
            "sqs": endpoint,
            "dynamodb": dynamodb_endpoint or endpoint,
            "cloudformation": endpoint,
        }
        cfn = self.client("cloudformation")
        for stack in self.stacks:
            try:
                described = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]
            except ClientError as error:
                raise StackNotFound(
                    f"stack {stack.name} is not deployed at {endpoint}: is `once up` running "
                    f"this app there? ({error.response.get('Error', {}).get('Message')})"
                ) from error
            except EndpointConnectionError as error:
                raise EngineFailed(
                    f"cannot reach {endpoint}: is the local cloud up (`once up`)?"
                ) from error
            self._read_consumers(stack, described)
        return self

    def start(self) -> LocalCloud:
        """Deploy the app's stacks on the engines and return the cloud running. The moto
        server starts while the app synthesizes (each takes seconds: moto's import, the
        CDK's); a port asked for is checked first, before either."""
        if self.port:
            check_port_free(self.port)
        self._find_build_dir()
        os.environ.update(local_env())
        os.environ.pop("AWS_PROFILE", None)
        self._own_logs()
        moto = MotoServer(log=self.log_dir / "moto.log", port=self.port)
        self._engines.append(moto)
        # The app synthesizes on a thread while this one starts the server: the server's
        # process dies with the thread that started it (``engines.spawn``), so it is this one.
        with ThreadPoolExecutor(1, thread_name_prefix="synth") as synthesizing:
            synthesized = synthesizing.submit(self._synthesized)
            try:
                moto.start()
            except BaseException:
                with contextlib.suppress(Exception):
                    synthesized.result()
                self.stop()
                raise
            try:
                assembly = synthesized.result()
            except BaseException:
                self.stop()
                raise
        if not self.stacks:
            self.stop()
            raise SynthFailed(
                f"the app synthesized in {assembly} has no OnceConsumer: the local cloud runs "
                "the stacks that hold one (once_cdk.OnceConsumer)"
            )
        try:
            self.endpoints = {
                "sqs": moto.endpoint,
                "dynamodb": moto.endpoint,
                "cloudformation": moto.endpoint,
            }
            if self.engine == "dynamodb-local":
                local = DynamoDBLocal(log=self.log_dir / "dynamodb-local.log").start()
                self._engines.append(local)
                self.endpoints["dynamodb"] = local.endpoint
            for stack in self.stacks:
                try:
                    self._deploy(assembly, stack)
                except (ClientError, BotoCoreError) as error:
                    raise EngineFailed(
                        f"the local deploy of {stack.name} failed: moto answered {error} (its "
                        f"log: {self.log_dir / 'moto.log'})"
                    ) from error
            if self.alarm_names and self.evaluate_alarms_every:
                self._evaluator = alarms.Evaluator(
                    self.client("cloudwatch"), self.evaluate_alarms_every
                ).start()
        except BaseException:
            self.stop()
            raise
        return self

    def _own_logs(self) -> None:
        """The logs of this cloud, apart from any other running for the same app: the
        workers' lines are shipped from their file to this cloud's CloudWatch, so two clouds
        writing one file would each ship the other's metrics. The first cloud of an app
        holds a lock on its build folder and logs there; one started while it runs logs in
        a folder of its own (``run-<pid>``), named where ``once up`` prints the logs."""
        self.build_dir.mkdir(parents=True, exist_ok=True)
        lock = (self.build_dir / ".logs.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.log_dir = self.build_dir
        except BlockingIOError:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=self.build_dir))
        self._log_lock = lock

    def stop(self) -> None:
        if self._evaluator is not None:
            self._evaluator.stop()
            self._evaluator = None
        for engine in reversed(self._engines):
            engine.stop()
        self._engines = []
        if self._log_lock is not None:
            self._log_lock.close()  # releases the lock
            self._log_lock = None

    def __enter__(self) -> LocalCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        endpoint = self.endpoints.get(service, self.endpoints["sqs"])
        return local_client(service, endpoint)

    # --- deploy ----------------------------------------------------------------------------
    def _deploy(self, assembly: Path, stack: StackFound) -> None:
        moto = self.endpoints["sqs"]
        patched = patch(stack.template, stack.name, alarm_reason=alarms.why_not_run)
        self.notes.extend(f"{stack.name}: {note}" for note in patched.notes)
        self.stripped.extend(patched.stripped)
        publish_assets(local_client("s3", moto), assembly, stack.artifact, self.build_dir)
        cfn = local_client("cloudformation", moto)
        cfn.create_stack(
            StackName=stack.name,
            TemplateBody=json.dumps(patched.deployable),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
        described = self._wait_for_stack(cfn, stack.name)
        self._apply_ttl(stack)
        if patched.subscriptions:
            notes, left_out = subscriptions.create(
                stack.name,
                patched.subscriptions,
                resolve.deployed(
                    stack.name,
                    stack.template,
                    cfn,
                    local_client("sqs", moto),
                    unresolved=resolve.RAISE,  # a subscription it cannot resolve: not created
                ),
                local_client("sns", moto),
            )
            self.notes.extend(f"{stack.name}: {note}" for note in notes)
            self.notes.extend(str(s) for s in left_out)
            self.stripped.extend(left_out)
        if patched.alarms:
            self._create_alarms(stack, patched.alarms, cfn)
        if self.engine == "dynamodb-local":
            self._tables_on_dynamodb_local(stack)
        self._read_consumers(stack, described)

    def _read_consumers(self, stack: StackFound, described: dict[str, Any]) -> None:
        """The stack's outputs and its consumers, as deployed (``DescribeStacks``)."""
        self._stack_outputs[stack.name] = {
            o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])
        }
        # Each consumer's own outputs (add_cli_outputs), by the name --consumer gives it.
        own = consumers_in(described.get("Outputs", []))
        for found in stack.consumers:
            self.consumers.append(
                Consumer(
                    found,
                    own.get(found.name) or (own[""] if list(own) == [""] else {}),
                    self._function_config(found),
                    self._mapping_config(stack, found),
                )
            )

    def _create_alarms(self, stack: StackFound, found: list[AlarmResource], cfn: Any) -> None:
        """Create the stack's alarms in moto's CloudWatch; an alarm that could not be is
        named so, instead of what the template patcher said of it."""
        moto = self.endpoints["sqs"]
        sqs = local_client("sqs", moto)
        # An alarm it cannot resolve is not created, and named so (``alarms.create``).
        resolver = resolve.deployed(stack.name, stack.template, cfn, sqs, unresolved=resolve.RAISE)
        created = alarms.create(
            stack.name, found, resolver.resolve, local_client("cloudwatch", moto)
        )
        self.alarm_names.extend(created.names)
        self.notes.extend(f"{stack.name}: {note}" for note in created.notes)
        refused = {(part.stack, part.logical_id) for part in created.left_out}
        replaced = [
            part
            for part in self.stripped
            if part.kind == "AWS::CloudWatch::Alarm" and (part.stack, part.logical_id) in refused
        ]
        self.stripped = [part for part in self.stripped if part not in replaced]
        self.notes = [note for note in self.notes if note not in {str(p) for p in replaced}]
        self.stripped.extend(created.left_out)
        self.notes.extend(str(part) for part in created.left_out)

    def evaluate_alarms(
        self, now: float | None = None, *, set_states: bool = True
    ) -> dict[str, alarms.Evaluation]:
        """Evaluate the local cloud's alarms once, at ``now`` (default: the clock), and set
        their states (unless ``set_states`` is false: the evaluator thread's stand); return
        each one's evaluation (``alarms.evaluate_all``)."""
        return alarms.evaluate_all(
            self.client("cloudwatch"), self.alarm_names, now, set_states=set_states
        )

    def _wait_for_stack(self, cfn: Any, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
            if stack["StackStatus"] == "CREATE_COMPLETE":
                return dict(stack)
            if stack["StackStatus"].endswith(("FAILED", "ROLLBACK_COMPLETE")):
                events = cfn.describe_stack_events(StackName=name)["StackEvents"]
                reasons = [
                    e["ResourceStatusReason"]
                    for e in events
                    if e.get("ResourceStatus", "").endswith("FAILED")
                    and e.get("ResourceStatusReason")
                ]
                raise EngineFailed(
                    f"the local deploy of {name} failed: {stack['StackStatus']} "
                    f"{stack.get('StackStatusReason') or '; '.join(reasons)}".rstrip()
                )
            time.sleep(0.2)
        raise EngineFailed(f"the local deploy of {name} did not finish within 60 s")

    def physical_id(self, logical_id: str, stack: str | None = None) -> str:
        cfn = local_client("cloudformation", self.endpoints["sqs"])
        found = cfn.describe_stack_resource(
            StackName=stack or self.only().stack, LogicalResourceId=logical_id
        )
        return str(found["StackResourceDetail"]["PhysicalResourceId"])

    def _apply_ttl(self, stack: StackFound) -> None:
        ddb = local_client("dynamodb", self.endpoints["sqs"])
        for logical_id, table in resources_of(stack.template, "AWS::DynamoDB::Table").items():
            name = self.physical_id(logical_id, stack.name)
            attribute = _enable_ttl(ddb, name, table["Properties"])
            if attribute:
                self.notes.append(
                    f"{stack.name}: TTL on {attribute} applied with UpdateTimeToLive "
                    "(moto ignores the template's)"
                )

    def _tables_on_dynamodb_local(self, stack: StackFound) -> None:
        ddb = local_client("dynamodb", self.endpoints["dynamodb"])
        for logical_id, table in resources_of(stack.template, "AWS::DynamoDB::Table").items():
            name = self.physical_id(logical_id, stack.name)
            _create_table(ddb, name, table["Properties"])
            _enable_ttl(ddb, name, table["Properties"])
        self.notes.append(
            f"{stack.name}: tables created on DynamoDB Local from the template's definitions"
        )

    # --- the consumers ---------------------------------------------------------------------
    def _function_config(self, found: ConsumerFound) -> FunctionConfig:
        name = self.physical_id(found.function_id, found.stack)
        conf = local_client("lambda", self.endpoints["sqs"]).get_function_configuration(
            FunctionName=name
        )
        return FunctionConfig(
            name=name,
            arn=conf["FunctionArn"],
            handler=conf["Handler"],
            timeout_s=int(conf["Timeout"]),
            memory_mb=int(conf["MemorySize"]),
            environment=dict(conf.get("Environment", {}).get("Variables", {})),
            code_dir=str(found.asset) if found.asset else None,
            log_group=conf.get("LoggingConfig", {}).get("LogGroup") or f"/aws/lambda/{name}",
        )

    def _mapping_config(self, stack: StackFound, found: ConsumerFound) -> MappingConfig:
        props = stack.template["Resources"][found.mapping_id]["Properties"]
        sqs = local_client("sqs", self.endpoints["sqs"])
        url = self.physical_id(found.queue_id, found.stack)
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attributes.get("RedrivePolicy", "null") or "null")
        return MappingConfig(
            queue_url=url,
            queue_arn=attributes["QueueArn"],
            region=LOCAL_REGION,
            batch_size=int(props.get("BatchSize", 10)),
            batching_window_s=float(props.get("MaximumBatchingWindowInSeconds", 0)),
            max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
            report_batch_item_failures="ReportBatchItemFailures"
            in props.get("FunctionResponseTypes", []),
            visibility_timeout_s=int(attributes["VisibilityTimeout"]),
            max_receive_count=int(redrive["maxReceiveCount"]) if redrive else None,
            filters=filters_of(props, f"{found.stack}/{found.mapping_id}"),
        )

    def consumer(self, stack: str | None = None, name: str | None = None) -> Consumer:
        """The consumer of ``stack`` (and construct id ``name``); either may be left out
        when only one consumer matches."""
        matches = [
            c
            for c in self.consumers
            if (stack is None or c.stack == stack) and (name is None or c.name == name)
        ]
        if len(matches) != 1:
            known = ", ".join(f"{c.stack} ({c.name})" for c in self.consumers)
            which = "no" if not matches else "more than one"
            raise UsageError(
                f"{which} consumer matches stack={stack} name={name}; the local cloud runs: {known}"
            )
        return matches[0]

    def only(self) -> Consumer:
        """The one consumer of a single-consumer app (the example's)."""
        return self.consumer()

    def outputs_of(self, stack: str) -> dict[str, str]:
        return self._stack_outputs[stack]

    # The single consumer's view, for the demo and the tests of the example app.
    @property
    def outputs(self) -> dict[str, str]:
        return self.only().outputs

    @property
    def template(self) -> dict[str, Any]:
        stack = self.only().stack
        return next(s.template for s in self.stacks if s.name == stack)

    def function_config(self, consumer: Consumer | None = None) -> FunctionConfig:
        return (consumer or self.only()).function

    def mapping_config(self, consumer: Consumer | None = None) -> MappingConfig:
        return (consumer or self.only()).mapping

    def mapping(self, workers: int, log_name: str, consumer: Consumer | None = None) -> Mapping:
        """The event source mapping emulator for a consumer's queue and function."""
        consumer = consumer or self.only()
        return Mapping(
            consumer.mapping,
            consumer.function,
            sqs_factory=lambda: self.client("sqs"),
            workers=workers,
            env=self.worker_env(consumer),
            log_path=str(self.log_dir / log_name),
        )

    def run_consumers(self, workers: Callable[[Consumer], int], shipper: Shipper) -> list[Mapping]:
        """Start every consumer's mapping, ``workers(consumer)`` workers each, with its log
        followed by ``shipper`` (its lines to the function's log group, the metrics its EMF
        lines publish); returns them running.
        On a failure the ones started are stopped."""
        running: list[Mapping] = []
        try:
            # Every worker of every consumer imports its handler at once, then each mapping
            # polls once its own are ready.
            for consumer in self.consumers:
                mapping = self.mapping(workers(consumer), consumer.log_name, consumer)
                running.append(mapping.launch())
            for consumer, mapping in zip(self.consumers, running, strict=True):
                mapping.ready()
                shipper.follow(self.log_dir / consumer.log_name, consumer.function.log_group)
        except BaseException:
            for mapping in running:
                mapping.stop()
            raise
        return running

    def worker_env(self, consumer: Consumer | None = None) -> dict[str, str]:
        """What a worker needs beyond the function's own environment variables, which the
        mapping puts under it (``Mapping``: ``{**function.environment, **worker_env}``):
        the local credentials and region, every AWS service routed to the local cloud
        (``routing_env``), and the variables Lambda itself sets. Nothing else: the
        function's settings (its log level, its Powertools switches) are its template's.

        One default more, only where the function leaves it unset:
        ``POWERTOOLS_TRACE_DISABLED=true``, as X-Ray is not emulated (no daemon receives
        the segments of a function with active tracing). Metrics stay on: their EMF lines
        are what ``emf.Shipper`` keeps."""
        function = (consumer or self.only()).function
        env = {
            **local_env(),
            **routing_env(self.endpoints["sqs"], self.endpoints["dynamodb"]),
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
        }
        for name, default in LOCAL_DEFAULTS.items():
            if name not in function.environment:
                env[name] = default
        return env


#: What a worker's environment holds unless the function's own sets it: X-Ray is not
#: emulated, so tracing is off.
LOCAL_DEFAULTS = {"POWERTOOLS_TRACE_DISABLED": "true"}


def routing_env(moto: str, dynamodb: str) -> dict[str, str]:
    """The environment that sends every AWS call of a function to the local cloud and
    never to the internet: whatever service the code calls (once's SQS, DynamoDB, SNS and
    CloudWatch, or the business code's S3, SecretsManager, STS...), its client reaches moto
    at ``moto``, and DynamoDB's (and DynamoDB Streams') reaches ``dynamodb`` (DynamoDB Local,
    or moto). A service moto does not emulate answers with an error at once; nothing waits
    on an unreachable AWS endpoint.

    botocore (1.31 and later) takes ``AWS_ENDPOINT_URL`` for the client of every service,
    and ``AWS_ENDPOINT_URL_<SERVICE>`` over it for one service, both over the config file's
    (AWS SDKs and Tools Reference Guide, "Service-specific endpoints",
    https://docs.aws.amazon.com/sdkref/latest/guide/feature-ss-endpoints.html). The rest
    keeps a shell set up for real AWS from undoing that: the SDK's endpoint overrides are
    honoured (``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` would turn them off); no FIPS or
    dual-stack variant is asked of a custom endpoint; no config or credentials file is read
    (Lambda has none: no profile's region, endpoint or credential process); credentials
    never come from the instance metadata service; and a proxy is never used for the
    local cloud's hosts (``NO_PROXY``, with the shell's own entries kept). The worker
    drops any other ``AWS_ENDPOINT_URL_<SERVICE>`` and profile it would inherit
    (``invocation.worker_environ``).
    """
    local_hosts = ["127.0.0.1", "localhost"]
    shell_no_proxy = os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or ""
    no_proxy = ",".join(
        dict.fromkeys([*local_hosts, *(h.strip() for h in shell_no_proxy.split(",") if h.strip())])
    )
    return {
        "AWS_ENDPOINT_URL": moto,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb,
        "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": dynamodb,
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "false",
        "AWS_USE_FIPS_ENDPOINT": "false",
        "AWS_USE_DUALSTACK_ENDPOINT": "false",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": no_proxy,
        "no_proxy": no_proxy,
    }


def start(engine: str, argv: list[str], module: str = "oncecli.cli", **kwargs: Any) -> LocalCloud:
    """Start a local cloud; for DynamoDB Local, first re-execute ``python -m MODULE ARGV``
    (the command that asked: ``once up``, or the proof's demo) in a private namespace."""
    if engine == "dynamodb-local":
        enter_private_netns(argv, module)
    return LocalCloud(engine=engine, **kwargs).start()
