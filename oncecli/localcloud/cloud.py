"""The local cloud: the CDK app's ``local`` stage, deployed to moto on this machine.

Why: the demo and the tests should run the stack that ships, not a hand-made copy. So this
module takes the synthesized template (``template``: made deployable on moto there),
publishes its assets to moto's S3, creates the stack through moto's CloudFormation, and
reads the resources back from the stack. Where moto differs from AWS it is patched, and
each patch is listed in ``LocalCloud.notes``: the template's changes, and moto ignoring
``TimeToLiveSpecification`` (UpdateTimeToLive is called for it).

With ``engine="dynamodb-local"`` the two tables are also created on DynamoDB Local, from the
template's definitions and with the names the stack gave them, and everything that reads or
writes DynamoDB is pointed there; SQS stays on moto.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION, local_client, local_env
from oncecli.errors import EngineFailed
from oncecli.localcloud.engines import (
    ENGINES,
    DynamoDBLocal,
    Engine,
    MotoServer,
    enter_private_netns,
)
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig
from oncecli.localcloud.template import STACK_NAME, for_moto, load_template, resources_of, synth
from oncecli.project import BUILD_DIR


def _zip_asset(source: Path, digest: str) -> Path:
    """The zipped asset directory, cached by its asset hash (37 MB zips in seconds, once)."""
    target = BUILD_DIR / "assets" / f"{digest}.zip"
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


def publish_assets(s3: Any, assembly: Path, stack: str = STACK_NAME) -> int:
    """Upload the file assets where the template expects them, as ``cdk deploy`` would."""
    manifest = json.loads((assembly / f"{stack}.assets.json").read_text())
    count = 0
    for digest, asset in manifest.get("files", {}).items():
        source = assembly / asset["source"]["path"]
        if asset["source"].get("packaging") == "zip" and source.is_dir():
            source = _zip_asset(source, digest)
        for destination in asset["destinations"].values():
            bucket = (
                destination["bucketName"]
                .replace("${AWS::AccountId}", LOCAL_ACCOUNT)
                .replace("${AWS::Region}", LOCAL_REGION)
                .replace("${AWS::Partition}", "aws")
            )
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
class LocalCloud:
    """moto (and DynamoDB Local) running with the local stack deployed; a context manager."""

    engine: str = "moto"
    assembly: Path | None = None
    context: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    endpoints: dict[str, str] = field(default_factory=dict)
    template: dict[str, Any] = field(default_factory=dict)
    _engines: list[Engine] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}: expected one of {ENGINES}")

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> LocalCloud:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        assembly = self.assembly or synth(self.context, log=BUILD_DIR / "synth.log")
        self.template = load_template(assembly)
        os.environ.update(local_env())
        os.environ.pop("AWS_PROFILE", None)
        try:
            moto = MotoServer(log=BUILD_DIR / "moto.log").start()
            self._engines.append(moto)
            self.endpoints = {
                "sqs": moto.endpoint,
                "dynamodb": moto.endpoint,
                "cloudformation": moto.endpoint,
            }
            if self.engine == "dynamodb-local":
                local = DynamoDBLocal(log=BUILD_DIR / "dynamodb-local.log").start()
                self._engines.append(local)
                self.endpoints["dynamodb"] = local.endpoint
            self._deploy(assembly)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for engine in reversed(self._engines):
            engine.stop()
        self._engines = []

    def __enter__(self) -> LocalCloud:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        endpoint = self.endpoints.get(service, self.endpoints["sqs"])
        return local_client(service, endpoint)

    # --- deploy ----------------------------------------------------------------------------
    def _deploy(self, assembly: Path) -> None:
        moto = self.endpoints["sqs"]
        deployable, notes = for_moto(self.template)
        self.notes.extend(notes)
        publish_assets(local_client("s3", moto), assembly)
        cfn = local_client("cloudformation", moto)
        cfn.create_stack(
            StackName=STACK_NAME,
            TemplateBody=json.dumps(deployable),
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
        )
        stack = self._wait_for_stack(cfn)
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        self._apply_ttl()
        if self.engine == "dynamodb-local":
            self._tables_on_dynamodb_local()

    def _wait_for_stack(self, cfn: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stack = cfn.describe_stacks(StackName=STACK_NAME)["Stacks"][0]
            if stack["StackStatus"] == "CREATE_COMPLETE":
                return stack
            if stack["StackStatus"].endswith(("FAILED", "ROLLBACK_COMPLETE")):
                raise EngineFailed(
                    f"the local deploy failed: {stack['StackStatus']} "
                    f"{stack.get('StackStatusReason', '')}"
                )
            time.sleep(0.2)
        raise EngineFailed("the local deploy did not finish within 60 s")

    def physical_id(self, logical_id: str) -> str:
        cfn = local_client("cloudformation", self.endpoints["sqs"])
        found = cfn.describe_stack_resource(StackName=STACK_NAME, LogicalResourceId=logical_id)
        return str(found["StackResourceDetail"]["PhysicalResourceId"])

    def _apply_ttl(self) -> None:
        ddb = local_client("dynamodb", self.endpoints["sqs"])
        for logical_id, table in resources_of(self.template, "AWS::DynamoDB::Table").items():
            attribute = _enable_ttl(ddb, self.physical_id(logical_id), table["Properties"])
            if attribute:
                self.notes.append(
                    f"TTL on {attribute} applied with UpdateTimeToLive "
                    "(moto ignores the template's)"
                )

    def _tables_on_dynamodb_local(self) -> None:
        ddb = local_client("dynamodb", self.endpoints["dynamodb"])
        for logical_id, table in resources_of(self.template, "AWS::DynamoDB::Table").items():
            name = self.physical_id(logical_id)
            _create_table(ddb, name, table["Properties"])
            _enable_ttl(ddb, name, table["Properties"])
        self.notes.append("tables created on DynamoDB Local from the template's definitions")

    # --- what the mapping needs ------------------------------------------------------------
    def function_config(self) -> FunctionConfig:
        ((logical_id, _),) = resources_of(self.template, "AWS::Lambda::Function").items()
        name = self.physical_id(logical_id)
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
        )

    def mapping_config(self) -> MappingConfig:
        ((_, mapping),) = resources_of(self.template, "AWS::Lambda::EventSourceMapping").items()
        props = mapping["Properties"]
        source_id = props["EventSourceArn"]["Fn::GetAtt"][0]
        sqs = local_client("sqs", self.endpoints["sqs"])
        url = self.physical_id(source_id)
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
        )

    def mapping(self, workers: int, log_name: str) -> Mapping:
        """The event source mapping emulator for this cloud's queue and function."""
        return Mapping(
            self.mapping_config(),
            self.function_config(),
            sqs_factory=lambda: self.client("sqs"),
            workers=workers,
            env=self.worker_env(),
            log_path=str(BUILD_DIR / log_name),
        )

    def worker_env(self) -> dict[str, str]:
        """What a worker needs beyond the function's own environment variables."""
        function = self.function_config()
        return {
            **local_env(),
            "AWS_ENDPOINT_URL_SQS": self.endpoints["sqs"],
            "AWS_ENDPOINT_URL_DYNAMODB": self.endpoints["dynamodb"],
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
        }


def start(engine: str, argv: list[str], **kwargs: Any) -> LocalCloud:
    """Start a local cloud; for DynamoDB Local, first re-execute the CLI in a namespace."""
    if engine == "dynamodb-local":
        enter_private_netns(argv)
    return LocalCloud(engine=engine, **kwargs).start()
