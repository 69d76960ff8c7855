"""The local cloud: the CDK app's ``local`` stage, deployed to moto on this machine.

Why: the demo and the tests should run the stack that ships, not a hand-made copy. So this
module synthesizes the app, publishes its assets to moto's S3, creates the stack through
moto's CloudFormation, and reads the resources back from the stack. Where moto differs from
AWS it is patched, and each patch is listed in ``LocalCloud.notes``:

- the event source mapping is stripped (moto's own calls Docker and bumps receive counts)
  and emulated by ``mapping.Mapping`` with the template's settings;
- moto ignores ``TimeToLiveSpecification``: UpdateTimeToLive is called for it;
- a bootstrap-version rule, if any, is removed (there is no bootstrap stack locally).

With ``engine="dynamodb-local"`` the two tables are also created on DynamoDB Local, from the
template's definitions and with the names the stack gave them, and everything that reads or
writes DynamoDB is pointed there; SQS stays on moto.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from oncecli.engines import ROOT, DynamoDBLocal, Engine, MotoServer, enter_private_netns
from oncecli.errors import EngineFailed, SynthFailed
from oncecli.mapping import FunctionConfig, Mapping, MappingConfig

STACK_NAME = "Once-local"
REGION = "us-east-1"
ACCOUNT = "123456789012"
#: Credentials for the local engines (they accept anything, but boto3 wants some).
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
BUILD_DIR = ROOT / "build" / "localcloud"
#: The Node.js LTS pinned in package.json (absent where npm has no build for the platform).
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"
ENGINES = ("moto", "dynamodb-local")
#: Inputs of the synthesized template: a change to any of them means synthesizing again.
_SYNTH_INPUTS = ("app.py", "cdk.json", "requirements-lambda.txt", "infra", "functions")
#: Never stripped: the demo must use the template's own queues, tables and function.
_KEPT_TYPES = {"AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::Lambda::Function"}
_STRIPPED_TYPES = {
    "AWS::Lambda::EventSourceMapping": "emulated by the once CLI (moto's would call Docker)",
}


def _inputs_digest(context: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode())
    for name in _SYNTH_INPUTS:
        path = ROOT / name
        files = sorted(p for p in path.rglob("*.py")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(ROOT)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def synth(context: dict[str, str] | None = None, *, log: Path | None = None) -> Path:
    """Synthesize the ``local`` stage into a cached cloud assembly directory; return it."""
    ctx = {"stage": "local", **(context or {})}
    out = BUILD_DIR / f"synth-{_inputs_digest(ctx)}"
    if (out / f"{STACK_NAME}.template.json").is_file():
        return out
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="synth-", dir=BUILD_DIR))
    env = {
        **os.environ,
        "CDK_OUTDIR": str(staging),
        "CDK_CONTEXT_JSON": json.dumps(ctx),
        # jsii runs the app's constructs on the Node.js LTS that npm installed, if any.
        **({"JSII_NODE": str(PROJECT_NODE)} if PROJECT_NODE.is_file() else {}),
    }
    run = subprocess.run(
        [sys.executable, str(ROOT / "app.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if log is not None:
        log.write_text(run.stdout + run.stderr)
    if run.returncode != 0 or not (staging / f"{STACK_NAME}.template.json").is_file():
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
        raise SynthFailed(f"cdk synth of the local stage failed:\n{tail}")
    if out.exists():
        shutil.rmtree(staging, ignore_errors=True)
    else:
        os.replace(staging, out)
    return out


def load_template(assembly: Path, stack: str = STACK_NAME) -> dict[str, Any]:
    path = assembly / f"{stack}.template.json"
    if not path.is_file():
        raise SynthFailed(f"no template for {stack} in {assembly}")
    return json.loads(path.read_text())


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _references(node: Any) -> set[str]:
    """Logical ids a template fragment refers to (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                found.add(value[0] if isinstance(value, list) else str(value).split(".")[0])
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                found.update(re.findall(r"\$\{([A-Za-z0-9]+)[.}]", text))
            if key == "DependsOn":
                found.update([value] if isinstance(value, str) else value)
            else:
                found |= _references(value)
    elif isinstance(node, list):
        for value in node:
            found |= _references(value)
    return found


def _moto_types() -> set[str]:
    """Resource types moto's CloudFormation can create (cached: importing all of moto to
    ask takes seconds)."""
    from importlib.metadata import version

    cache = BUILD_DIR / f"moto-cfn-types-{version('moto')}.json"
    if cache.is_file():
        return set(json.loads(cache.read_text()))
    from moto.cloudformation.parsing import get_model_map

    types = sorted(get_model_map())
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(types))
    return set(types)


def for_moto(template: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The template as moto can deploy it, and a note for each change.

    Stripped: the event source mapping (emulated), resource types moto's CloudFormation
    cannot create (it would skip them silently, then fail on a reference to them), and
    whatever refers to a stripped resource. Queues and tables are never touched.
    """
    deployable = copy.deepcopy(template)
    notes: list[str] = []
    resources = deployable["Resources"]
    supported = _moto_types()
    stripped: set[str] = set()
    for logical_id, resource in list(resources.items()):
        why = _STRIPPED_TYPES.get(resource["Type"])
        if why is None and resource["Type"] not in supported:
            why = "moto's CloudFormation cannot create it"
        if why:
            del resources[logical_id]
            stripped.add(logical_id)
            notes.append(f"stripped {resource['Type']} {logical_id}: {why}")
    changed = True
    while changed:  # then whatever depends on something stripped
        changed = False
        for logical_id, resource in list(resources.items()):
            gone = _references(resource) & stripped
            if gone and resource["Type"] in _KEPT_TYPES:
                raise EngineFailed(
                    f"{logical_id} refers to {sorted(gone)}, which moto cannot create"
                )
            if gone:
                del resources[logical_id]
                stripped.add(logical_id)
                changed = True
                notes.append(
                    f"stripped {resource['Type']} {logical_id}: it refers to "
                    f"{', '.join(sorted(gone))}"
                )
    for name, output in list(deployable.get("Outputs", {}).items()):
        if _references(output) & stripped:
            del deployable["Outputs"][name]
            notes.append(f"output {name} left out: it refers to a stripped resource")
    for logical_id, resource in resources.items():
        tags = resource.get("Properties", {}).get("Tags")
        if resource["Type"] == "AWS::KMS::Key" and tags:
            resource["Properties"]["Tags"] = [
                {"TagKey": t["Key"], "TagValue": t["Value"]} for t in tags
            ]
            notes.append(
                f"tags of AWS::KMS::Key {logical_id} spelled TagKey/TagValue "
                "(moto's KMS reads only that spelling)"
            )
    if deployable.get("Rules", {}).pop("CheckBootstrapVersion", None) is not None:
        deployable.get("Parameters", {}).pop("BootstrapVersion", None)
        notes.append("removed the bootstrap-version rule (no bootstrap stack locally)")
    return deployable, notes


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
                .replace("${AWS::AccountId}", ACCOUNT)
                .replace("${AWS::Region}", REGION)
                .replace("${AWS::Partition}", "aws")
            )
            with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
                s3.create_bucket(Bucket=bucket)
            s3.upload_file(str(source), bucket, destination["objectKey"])
            count += 1
    return count


def local_client(service: str, endpoint: str) -> Any:
    """A client for a local engine: fixed region and dummy credentials."""
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=20),
    )


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
        for key, value in {**LOCAL_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
            os.environ[key] = value
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
            ttl = table["Properties"].get("TimeToLiveSpecification")
            if ttl and ttl.get("Enabled"):
                name = self.physical_id(logical_id)
                ddb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={
                        "AttributeName": ttl["AttributeName"],
                        "Enabled": True,
                    },
                )
                self.notes.append(
                    f"TTL on {ttl['AttributeName']} applied with "
                    f"UpdateTimeToLive (moto ignores the template's)"
                )

    def _tables_on_dynamodb_local(self) -> None:
        ddb = local_client("dynamodb", self.endpoints["dynamodb"])
        for logical_id, table in resources_of(self.template, "AWS::DynamoDB::Table").items():
            name = self.physical_id(logical_id)
            _create_table(ddb, name, table["Properties"])
            ttl = table["Properties"].get("TimeToLiveSpecification")
            if ttl and ttl.get("Enabled"):
                ddb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={
                        "AttributeName": ttl["AttributeName"],
                        "Enabled": True,
                    },
                )
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
            region=REGION,
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
            **LOCAL_CREDENTIALS,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
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
