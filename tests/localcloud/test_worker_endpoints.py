"""Every AWS service a worker calls reaches the local cloud, never the internet.

A function's business code may call any service (SNS through once's outbox, S3,
SecretsManager, STS...): under the local cloud each of them resolves to moto's server (and
DynamoDB's to DynamoDB Local when that is the engine), whatever the shell that started it
had set (a service's own endpoint, FIPS, a profile, a proxy). The unit tests resolve the
request URL botocore would send to, under the environment a worker runs with; the
integration test publishes to an SNS topic from a worker's outbox and sees it land.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.utils import get_environ_proxies

from once import constants as c
from once import make_handler
from once.identity import named
from once.models import record_id
from oncecli.aws import LOCAL_REGION
from oncecli.localcloud.cloud import Consumer, LocalCloud
from oncecli.localcloud.invocation import worker_environ
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig
from oncecli.localcloud.template import ConsumerFound

MOTO = "http://127.0.0.1:41001"
DYNAMODB_LOCAL = "http://127.0.0.1:41002"
TOPIC = f"arn:aws:sns:{LOCAL_REGION}:123456789012:orders-events"

#: One call per service, as business code makes it: (service, operation, parameters).
CALLS = [
    ("sns", "publish", {"TopicArn": TOPIC, "Message": "m"}),
    (
        "sns",
        "publish_batch",
        {"TopicArn": TOPIC, "PublishBatchRequestEntries": [{"Id": "1", "Message": "m"}]},
    ),
    ("s3", "get_object", {"Bucket": "orders", "Key": "o-1.json"}),
    ("s3", "list_buckets", {}),
    ("secretsmanager", "get_secret_value", {"SecretId": "db"}),
    ("sts", "get_caller_identity", {}),
    ("ssm", "get_parameter", {"Name": "/shop/flag"}),
    ("events", "put_events", {"Entries": [{"Source": "shop", "DetailType": "d", "Detail": "{}"}]}),
    ("kms", "list_keys", {}),
    ("lambda", "list_functions", {}),
    ("sqs", "list_queues", {}),
    ("cloudwatch", "list_metrics", {}),
    ("logs", "describe_log_groups", {}),
    ("dynamodb", "list_tables", {}),
    ("dynamodbstreams", "list_streams", {}),
]
_ON_DYNAMODB = {"dynamodb", "dynamodbstreams"}


class _Sent(Exception):
    """Raised where botocore would put the request on the wire."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def _stop_before_send(request: Any, **_: Any) -> None:
    raise _Sent(request.url)


def _url_of(service: str, operation: str, params: dict[str, Any]) -> str:
    """The URL botocore sends this call to, under the current environment, as a worker's
    session would build the client (its region, credentials and endpoints from there)."""
    client = botocore.session.Session().create_client(service)
    client.meta.events.register("before-send", _stop_before_send)
    with pytest.raises(_Sent) as sent:
        getattr(client, operation)(**params)
    return sent.value.url


def _cloud(engine: str) -> LocalCloud:
    """A local cloud's routing, as it stands once started (nothing runs)."""
    function = FunctionConfig(
        name="Orders-fn",
        arn=f"arn:aws:lambda:{LOCAL_REGION}:123456789012:function:Orders-fn",
        handler="shop.handler.handler",
        timeout_s=3,
        memory_mb=256,
        environment={},
    )
    found = ConsumerFound("Shop", "Shop/Orders", "Fn", "Mapping", "Queue", None)
    mapping = MappingConfig(queue_url=f"{MOTO}/123456789012/q", queue_arn="arn", region="r")
    dynamodb = DYNAMODB_LOCAL if engine == "dynamodb-local" else MOTO
    return LocalCloud(
        engine=engine,
        endpoints={"sqs": MOTO, "dynamodb": dynamodb, "cloudformation": MOTO},
        consumers=[Consumer(found, {}, function, mapping)],
    )


def _run_as_worker(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Make this process's environment exactly ``env``."""
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("engine", ["moto", "dynamodb-local"])
@pytest.mark.parametrize(("service", "operation", "params"), CALLS)
def test_worker_env_routes_every_service_to_the_local_cloud(
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    service: str,
    operation: str,
    params: dict[str, Any],
) -> None:
    cloud = _cloud(engine)
    inherited = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    _run_as_worker(monkeypatch, worker_environ(inherited, cloud.worker_env()))
    url = _url_of(service, operation, params)
    local = cloud.endpoints["dynamodb"] if service in _ON_DYNAMODB else MOTO
    assert url == local or url.startswith(f"{local}/"), url


def test_a_shell_s_settings_do_not_send_a_worker_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What the shell that ran ``once up`` had set for real AWS (a service's own endpoint,
    a profile and its config file, FIPS and dual-stack endpoints, STS's legacy global
    endpoint, a proxy) does not reach a worker's calls."""
    config = tmp_path / "config"
    config.write_text(
        "[default]\nendpoint_url = https://config.example.com\nuse_fips_endpoint = true\n"
        "services = away\n[profile prod]\nregion = eu-west-3\n"
        "[services away]\ns3 =\n  endpoint_url = https://s3.config.example.com\n"
    )
    shell = {
        "AWS_ENDPOINT_URL": "https://everything.example.com",
        "AWS_ENDPOINT_URL_SNS": "https://sns.example.com",
        "AWS_ENDPOINT_URL_S3": "https://s3.example.com",
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": "https://secrets.example.com",
        "AWS_ENDPOINT_URL_DYNAMODB": "https://dynamodb.example.com",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
        "AWS_USE_FIPS_ENDPOINT": "true",
        "AWS_USE_DUALSTACK_ENDPOINT": "true",
        "AWS_STS_REGIONAL_ENDPOINTS": "legacy",
        "AWS_CONFIG_FILE": str(config),
        "AWS_PROFILE": "prod",
        "AWS_DEFAULT_PROFILE": "prod",
        "HTTPS_PROXY": "http://proxy.example.com:3128",
        "HTTP_PROXY": "http://proxy.example.com:3128",
        "https_proxy": "http://proxy.example.com:3128",
        "NO_PROXY": "internal.example.com",
    }
    for name, value in shell.items():
        monkeypatch.setenv(name, value)
    cloud = _cloud("dynamodb-local")  # the worker's environment, made in the shell's
    _run_as_worker(monkeypatch, worker_environ(dict(os.environ), cloud.worker_env()))
    for service, operation, params in CALLS:
        url = _url_of(service, operation, params)
        local = DYNAMODB_LOCAL if service in _ON_DYNAMODB else MOTO
        assert url == local or url.startswith(f"{local}/"), (service, url)
        assert get_environ_proxies(url) == {}, (service, "through a proxy")
    # The shell's own no-proxy hosts still bypass it.
    assert get_environ_proxies("https://internal.example.com/x") == {}


def test_a_mapping_s_own_endpoints_are_kept() -> None:
    """The worker keeps what its mapping gives (the benchmarks' and tests' own engines)."""
    env = worker_environ(
        {"AWS_ENDPOINT_URL_SQS": "https://sqs.example.com", "KEEP": "1"},
        {"AWS_ENDPOINT_URL_SQS": MOTO},
    )
    assert env == {"AWS_ENDPOINT_URL_SQS": MOTO, "KEEP": "1"}


# --- on the local cloud -----------------------------------------------------------------------


def _publish(order: dict[str, Any], attempt: Any) -> dict[str, Any]:
    attempt.send(os.environ["TOPIC_ARN"], {"orderId": order["orderId"], "event": "placed"})
    return {"published": True}


#: The function the worker runs (imported there by its dotted name).
publish_to_topic = make_handler(_publish, key="orderId")


@pytest.fixture
def topic(cloud: LocalCloud) -> Iterator[tuple[str, str]]:
    """An SNS topic on moto and an SQS queue subscribed to it: (topic ARN, queue URL)."""
    sns, sqs = cloud.client("sns"), cloud.client("sqs")
    arn = sns.create_topic(Name="orders-events")["TopicArn"]
    sink = sqs.create_queue(QueueName="orders-events-sink")["QueueUrl"]
    sink_arn = sqs.get_queue_attributes(QueueUrl=sink, AttributeNames=["QueueArn"])
    sns.subscribe(
        TopicArn=arn,
        Protocol="sqs",
        Endpoint=sink_arn["Attributes"]["QueueArn"],
        Attributes={"RawMessageDelivery": "true"},
    )
    yield arn, sink
    sqs.delete_queue(QueueUrl=sink)
    sns.delete_topic(TopicArn=arn)


def _poll(condition: Any, timeout_s: float) -> Any:
    """``condition()``'s first truthy value within ``timeout_s``, else its last one."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_an_outbox_message_to_an_sns_topic_reaches_moto(
    cloud: LocalCloud, topic: tuple[str, str]
) -> None:
    arn, sink = topic
    consumer = cloud.only()
    # The function runs with its role (oncecli/localcloud/roles.py): grant it the topic, as a
    # team would with topic.grant_publish(consumer.function).
    role = (
        cloud.client("lambda")
        .get_function_configuration(FunctionName=consumer.function.name)["Role"]
        .rsplit("/", 1)[1]
    )
    cloud.client("iam").put_role_policy(
        RoleName=role,
        PolicyName="publish-test-topic",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sns:Publish", "Resource": arn}],
            }
        ),
    )
    function = dataclasses.replace(
        consumer.function,
        handler=f"{__name__}.publish_to_topic",
        code_dir=None,  # this module, from the running environment
        environment={**consumer.function.environment, "TOPIC_ARN": arn},
    )
    mapping = Mapping(
        consumer.mapping,
        function,
        sqs_factory=lambda: cloud.client("sqs"),
        workers=1,
        env=cloud.worker_env(consumer),
        log_path=str(cloud.log_dir / "workers-endpoints-test.log"),
    )
    sqs, ddb = cloud.client("sqs"), cloud.client("dynamodb")
    table = function.environment[c.ENV_TABLE_NAME]
    key = record_id(function.environment[c.ENV_SERVICE_NAME], "o-sns-1")

    def settled() -> dict[str, Any] | None:
        item = ddb.get_item(TableName=table, Key={c.ATTR_ID: {"S": key}}, ConsistentRead=True)
        record: dict[str, Any] | None = item.get("Item")
        done = record and record[c.ATTR_STATUS]["S"] == c.STATUS_COMPLETED
        return record if done and not record.get(c.ATTR_OUTBOX, {}).get("L") else None

    def published() -> list[dict[str, Any]]:
        return sqs.receive_message(
            QueueUrl=sink, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageAttributeNames=["All"]
        ).get("Messages", [])

    with mapping:
        sqs.send_message(
            QueueUrl=consumer.mapping.queue_url, MessageBody=json.dumps({"orderId": "o-sns-1"})
        )
        record = _poll(settled, 60)
        messages = _poll(published, 60)
    snapshot = mapping.snapshot()
    assert record, f"the record still owes its outbox (or never completed): {snapshot}"
    assert snapshot["deleted"] == 1, snapshot  # done: not redelivered to send what it owes
    (message,) = messages
    assert json.loads(message["Body"]) == {"orderId": "o-sns-1", "event": "placed"}
    assert named(message["MessageAttributes"][c.OUTBOX_ATTR_SOURCE]["StringValue"]) == key


def test_a_service_the_local_cloud_does_not_emulate_fails_at_once(
    cloud: LocalCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call to a service moto lacks is answered by moto with an error, at once: no wait
    on an unreachable AWS endpoint, no connect timeout."""
    _run_as_worker(monkeypatch, worker_environ(dict(os.environ), cloud.worker_env()))
    client = botocore.session.Session().create_client("translate")
    began = time.monotonic()
    with pytest.raises(ClientError):
        client.translate_text(Text="a", SourceLanguageCode="en", TargetLanguageCode="fr")
    assert time.monotonic() - began < 10
