"""The local stage's template: synthesized from the CDK app, then made deployable on moto.

Why apart from the deploy: the template is where the local cloud departs from AWS, so each
change is made here, with a note that says why (``LocalCloud.notes`` lists them):

- the event source mapping is stripped (moto's own calls Docker and bumps receive counts)
  and emulated by ``mapping.Mapping`` with the template's settings;
- resource types moto's CloudFormation cannot create are stripped, with what refers to them,
  each named with what it means locally (``Stripped``: ``once up`` prints them, ``once_cloud``
  warns of them): nothing is dropped in silence;
- an SNS subscription with the SQS protocol is stripped from the template and created through
  SNS's API once the stack is deployed (``subscriptions``), so that it runs;
- an alarm is stripped and kept aside (``AlarmResource``), to be created in the local
  CloudWatch once the stack is deployed and evaluated there (``alarms``); it is still named
  (its actions never run locally, and an alarm on AWS's own metrics is not evaluated);
- KMS key tags are spelled the way moto's KMS reads them;
- a FIFO queue without a name gets one that ends in ``.fifo``, as CloudFormation gives it;
- a bootstrap-version rule, if any, is removed (there is no bootstrap stack locally).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from once import constants as c
from oncecli.errors import EngineFailed, SynthFailed
from oncecli.localcloud.resolve import PLACEHOLDER, references
from oncecli.project import PROJECT_NODE, Project

#: The context the local cloud synthesizes with, under the project's own and the command
#: line's: an app may choose its local settings by stage; the metadata flags are the ones
#: the CDK CLI sets, so that each function names its asset and each resource its path.
#: What quiets jsii's banner on a Node.js it no longer supports (jsii's check-node reads
#: ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION``: the major versions to keep quiet on),
#: where the local cloud starts a CDK app: the banner says nothing a team can act on here.
JSII_QUIET = {
    "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "14,16,18,20",
}


def _package_dir(name: str) -> Path:
    """An installed package's folder, found without importing it (importing once_cdk
    would start jsii)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SynthFailed(f"the {name} package is not installed here")
    return Path(next(iter(spec.submodule_search_locations)))


LOCAL_CONTEXT = {
    "stage": "local",
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
}
#: Never part of the synth cache key: outputs, environments and caches (and tests and docs,
#: which no app reads to synthesize).
_NOT_INPUTS = {
    "build", "cdk.out", ".venv", "venv", "node_modules", ".git", "__pycache__",
    ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis", "tests", "docs",
}  # fmt: skip
#: Never stripped: the demo must use the template's own queues, tables and function.
_KEPT_TYPES = {"AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::Lambda::Function"}
_STRIPPED_TYPES = {
    "AWS::Lambda::EventSourceMapping": "emulated by the once CLI (moto's would call Docker)",
    # EventBridge's types the local cloud does not run (docs/localcloud.md, "EventBridge
    # runs"); moto's archive would break the deploy (its CloudFormation reads a pattern
    # object as text, and it has no physical id for a Ref).
    "AWS::Events::Archive": "not run locally: no event is archived, none replayed",
    "AWS::Events::Connection": "not run locally: no API destination calls out",
    "AWS::Events::ApiDestination": "not run locally: nothing is sent to its endpoint",
    "AWS::Events::Endpoint": "not run locally: no global endpoint routes or fails over",
    "AWS::Pipes::Pipe": "not run locally: nothing flows through the pipe",
    "AWS::Scheduler::Schedule": "not run locally: no schedule fires",
}
#: Stripped and run otherwise, by the local cloud itself (not named as left out).
_EMULATED_TYPES = {"AWS::Lambda::EventSourceMapping"}
_SUBSCRIPTION = "AWS::SNS::Subscription"
_ALARM = "AWS::CloudWatch::Alarm"
#: What the local cloud cannot run means, for the types teams' stacks hold (any other type
#: moto's CloudFormation cannot create is named with ``_CANNOT_CREATE``).
_CANNOT_CREATE = "moto's CloudFormation cannot create it"
_WHY_STRIPPED = {
    "AWS::SQS::QueuePolicy": (
        f"{_CANNOT_CREATE}; moto does not enforce queue policies: here any sender reaches "
        "the queue (an SNS topic's deliveries too), while AWS refuses what the policy does "
        "not allow"
    ),
    "AWS::SNS::TopicPolicy": (
        f"{_CANNOT_CREATE}; moto does not enforce topic policies: here any caller may "
        "publish to or subscribe to the topic"
    ),
    "AWS::CloudWatch::CompositeAlarm": f"{_CANNOT_CREATE}; no alarm is evaluated or acts locally",
}


@dataclass(frozen=True)
class Stripped:
    """A part of a stack's template the local cloud does not run, and why: a resource
    (``kind`` its type) or an output (``kind`` ``Output``)."""

    stack: str
    kind: str
    logical_id: str
    why: str

    def __str__(self) -> str:
        if self.kind == "Output":
            return f"{self.stack}: output {self.logical_id} left out: {self.why}"
        return f"{self.stack}: stripped {self.kind} {self.logical_id}: {self.why}"


@dataclass(frozen=True)
class Subscription:
    """An ``AWS::SNS::Subscription`` with the SQS protocol, stripped from the template to be
    created through SNS's API once its stack is deployed: its logical id and its template
    properties, unresolved."""

    logical_id: str
    properties: dict[str, Any]


@dataclass(frozen=True)
class AlarmResource:
    """An ``AWS::CloudWatch::Alarm``, stripped from the template to be created in the local
    CloudWatch once its stack is deployed (``alarms.create``): its logical id and its
    template properties, unresolved."""

    logical_id: str
    properties: dict[str, Any]


@dataclass
class MotoTemplate:
    """A template as moto can deploy it (``deployable``); ``notes``: one line per change;
    ``stripped``: what the local cloud does not run (each also a note); ``subscriptions``
    and ``alarms``: to create after the deploy."""

    deployable: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    stripped: list[Stripped] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    alarms: list[AlarmResource] = field(default_factory=list)


def _files(folder: Path) -> list[Path]:
    """Every file under ``folder`` but in ``_NOT_INPUTS`` folders, which are never entered:
    a project's own virtual environment holds tens of thousands of files."""
    found: list[Path] = []
    for parent, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if name not in _NOT_INPUTS]
        found.extend(Path(parent, name) for name in files if name not in _NOT_INPUTS)
    return sorted(found)


def _inputs_digest(project: Project, context: dict[str, Any]) -> str:
    """The synth cache key: the app command, the context, every file of the project but
    its outputs and tests, and the installed once runtime and construct (the asset and the
    template are built from them)."""
    digest = hashlib.sha256(json.dumps([project.app, context], sort_keys=True).encode())
    folders = [project.root, *(_package_dir(name) for name in ("once", "once_cdk"))]
    for folder in folders:
        for file in _files(folder):
            digest.update(str(file).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def synth(
    project: Project, context: dict[str, Any] | None = None, *, log: Path | None = None
) -> Path:
    """Synthesize the app's ``local`` stage into a cached cloud assembly directory; return
    it. The app runs as the CDK CLI runs it (its ``cdk.json`` command, in its folder), with
    the Python that runs ``once`` first on the ``PATH``, as an activated environment puts it,
    and with its asset bundled for this machine (``once.constants.HOST_CONTEXT``). Nothing
    here imports the CDK: the app's own process starts jsii, silenced on an end-of-life Node
    (``JSII_QUIET``)."""
    # As ``-c`` on the CDK CLI's command line: over cdk.json's and cdk.context.json's.
    ctx = {**project.context, **LOCAL_CONTEXT, c.HOST_CONTEXT: True, **(context or {})}
    build = project.build_dir
    out = build / f"synth-{_inputs_digest(project, ctx)}"
    if (out / "manifest.json").is_file():
        return out
    build.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="synth-", dir=build))
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "CDK_OUTDIR": str(staging),
        "CDK_CONTEXT_JSON": json.dumps(ctx),
        **JSII_QUIET,
    }
    if "JSII_NODE" not in env and PROJECT_NODE.is_file():
        # jsii runs the app's constructs on the Node.js LTS that npm installed, if any.
        env["JSII_NODE"] = str(PROJECT_NODE)
    run = subprocess.run(
        project.app,
        shell=True,
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if log is not None:
        log.write_text(run.stdout + run.stderr)
    if run.returncode != 0 or not (staging / "manifest.json").is_file():
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
        raise SynthFailed(
            f"`{project.app}` in {project.root} did not synthesize a cloud assembly "
            f"(exit {run.returncode}; the app must call app.synth()):\n{tail}"
        )
    if out.exists():
        shutil.rmtree(staging, ignore_errors=True)
    else:
        os.replace(staging, out)
    return out


@dataclass(frozen=True)
class ConsumerFound:
    """One ``OnceConsumer`` in a synthesized stack: the logical ids of its parts."""

    stack: str
    path: str  # its construct path, e.g. ``Orders/Orders``
    function_id: str
    mapping_id: str
    queue_id: str
    asset: Path | None  # the function's code in the assembly (None: not a file asset)

    @property
    def name(self) -> str:
        """The construct's id within its stack (what ``--consumer`` names)."""
        return self.path.split("/", 1)[-1]


@dataclass
class StackFound:
    """One stack of the assembly: its name, template and ``OnceConsumer``s."""

    name: str
    artifact: str
    template: dict[str, Any]
    consumers: list[ConsumerFound] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)


def _consumers(stack: str, template: dict[str, Any], assembly: Path) -> list[ConsumerFound]:
    """The OnceConsumers of a template: each SQS event source mapping whose function has
    the once runtime's environment (its table's name)."""
    from once import constants as c

    resources = template.get("Resources", {})
    found = []
    for mapping_id, mapping in resources_of(template, "AWS::Lambda::EventSourceMapping").items():
        props = mapping.get("Properties", {})
        function_id = _invoked_function(resources, props.get("FunctionName"))
        source = props.get("EventSourceArn", {})
        queue_id = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        function = resources.get(function_id or "", {})
        env = function.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if c.ENV_TABLE_NAME not in env or resources.get(queue_id or "", {}).get("Type") != (
            "AWS::SQS::Queue"
        ):
            continue
        metadata = function.get("Metadata", {})
        path = str(metadata.get("aws:cdk:path", f"{stack}/{function_id}"))
        path = path.removesuffix("/Resource").removesuffix("/Function")
        asset = metadata.get("aws:asset:path")
        found.append(
            ConsumerFound(
                stack=stack,
                path=path,
                function_id=str(function_id),
                mapping_id=mapping_id,
                queue_id=str(queue_id),
                asset=(assembly / asset) if asset and (assembly / asset).is_dir() else None,
            )
        )
    return found


def _invoked_function(resources: dict[str, Any], function_name: Any) -> str | None:
    """The logical id of the function a mapping's ``FunctionName`` invokes: the function
    itself, or through an alias or a version of it (``OnceConsumer(snap_start=True)``
    invokes the alias ``live`` of a published version)."""
    seen: set[str] = set()
    todo = sorted(references(function_name))
    while todo:
        logical_id = todo.pop()
        if logical_id in seen:
            continue
        seen.add(logical_id)
        resource = resources.get(logical_id, {})
        if resource.get("Type") == "AWS::Lambda::Function":
            return logical_id
        if resource.get("Type") in ("AWS::Lambda::Alias", "AWS::Lambda::Version"):
            props = resource.get("Properties", {})
            todo.extend(
                sorted(references([props.get("FunctionName"), props.get("FunctionVersion")]))
            )
    return None


def stacks_of(assembly: Path) -> list[StackFound]:
    """The assembly's stacks, in the order the manifest lists them (each after those it
    depends on, as ``cdk deploy`` orders them), with their consumers."""
    try:
        manifest = json.loads((assembly / "manifest.json").read_text())
    except (OSError, ValueError) as error:
        raise SynthFailed(f"no cloud assembly in {assembly} ({error})") from error
    found = []
    for artifact, entry in manifest.get("artifacts", {}).items():
        if entry.get("type") != "aws:cloudformation:stack":
            continue
        properties = entry.get("properties", {})
        name = properties.get("stackName", artifact)
        template = json.loads((assembly / properties["templateFile"]).read_text())
        found.append(
            StackFound(
                name=name,
                artifact=artifact,
                template=template,
                consumers=_consumers(name, template, assembly),
                dependencies=list(entry.get("dependencies", [])),
            )
        )
    return found


def to_deploy(stacks: list[StackFound]) -> list[StackFound]:
    """The stacks that hold a consumer and those they depend on, in deploy order."""
    by_artifact = {s.artifact: s for s in stacks}
    wanted: set[str] = set()
    todo = [s.artifact for s in stacks if s.consumers]
    while todo:
        artifact = todo.pop()
        if artifact in wanted or artifact not in by_artifact:
            continue
        wanted.add(artifact)
        todo.extend(by_artifact[artifact].dependencies)
    return [s for s in stacks if s.artifact in wanted]


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def _moto_types() -> set[str]:
    """Resource types moto's CloudFormation can create (cached: importing all of moto to
    ask takes seconds)."""
    from importlib.metadata import version

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    cache = Path(base) / "once" / f"moto-cfn-types-{version('moto')}.json"
    if cache.is_file():
        return set(json.loads(cache.read_text()))
    from moto.cloudformation.parsing import get_model_map

    types = sorted(get_model_map())
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(types))
    return set(types)


def for_moto(template: dict[str, Any], stack: str) -> tuple[dict[str, Any], list[str]]:
    """The template as moto can deploy it, and a note for each change (``patch``)."""
    patched = patch(template, stack)
    return patched.deployable, patched.notes


def _is_sqs_subscription(resource: dict[str, Any]) -> bool:
    protocol = str(resource.get("Properties", {}).get("Protocol", "")).lower()
    return resource["Type"] == _SUBSCRIPTION and protocol == "sqs"


#: What of an alarm does not run locally, from its template properties: by default its
#: actions; the local cloud passes ``alarms.why_not_run``, which also says whether it is
#: evaluated (this module stays below the alarms module, which reads what it keeps aside).
AlarmReason = Callable[[Mapping[str, Any]], str]


def _actions_never_run(properties: Mapping[str, Any]) -> str:
    return "its actions never run locally (nothing is notified)"


def _why_stripped(
    resource: dict[str, Any], supported: set[str], alarm_reason: AlarmReason
) -> str | None:
    """Why a resource is stripped from the template (None: it is kept)."""
    kind = resource["Type"]
    if kind in _STRIPPED_TYPES:
        return _STRIPPED_TYPES[kind]
    if _is_sqs_subscription(resource):
        return f"created through SNS's API once the stack is deployed ({_CANNOT_CREATE})"
    if kind == _ALARM:
        return alarm_reason(resource.get("Properties", {}))
    if kind == _SUBSCRIPTION:
        protocol = resource.get("Properties", {}).get("Protocol") or "unset"
        return (
            f"{_CANNOT_CREATE}, and the local cloud creates SNS subscriptions with the SQS "
            f"protocol only (this one's is {protocol}): nothing is delivered to it"
        )
    if kind not in supported:
        return _WHY_STRIPPED.get(kind, _CANNOT_CREATE)
    return None


#: The properties that name a resource, which a ``Ref`` to it returns (an archive's, a
#: connection's, an API destination's, a pipe's, a schedule's).
_NAME_PROPERTIES = ("ArchiveName", "Name")


def _stand_ins(
    logical_id: str,
    function: dict[str, Any],
    gone: set[str],
    original: Mapping[str, Any],
    notes: list[str],
) -> set[str]:
    """A function's environment variables that refer to a stripped resource, as they stand
    locally (a note each): a ``Ref`` to one its template names, that name; else
    ``arn:unresolved:<logical ids>``, which names no resource. What the function still
    refers to that is stripped, returned."""
    variables = function.get("Properties", {}).get("Environment", {}).get("Variables", {})
    for name, value in list(variables.items()) if isinstance(variables, dict) else []:
        missing = references(value) & gone
        if not missing:
            continue
        ref = value.get("Ref") if isinstance(value, dict) and len(value) == 1 else None
        props = original.get(ref, {}).get("Properties", {}) if isinstance(ref, str) else {}
        named = [props[key] for key in _NAME_PROPERTIES if isinstance(props.get(key), str)]
        variables[name] = named[0] if named else f"{PLACEHOLDER}:{','.join(sorted(missing))}"
        notes.append(
            f"environment variable {name} of {logical_id} stands as {variables[name]!r}: "
            f"it refers to {', '.join(sorted(missing))}, stripped"
        )
    return references(function) & gone


def patch(
    template: dict[str, Any], stack: str, *, alarm_reason: AlarmReason = _actions_never_run
) -> MotoTemplate:
    """The template as moto can deploy it, a note for each change, what is not run.

    Stripped: the event source mapping (emulated), SQS subscriptions and alarms (created
    after the deploy; an alarm is still named: its actions never run locally), resource
    types moto's CloudFormation cannot create (it would skip them silently, then fail on a
    reference to them), and whatever refers to a stripped resource. Queues and tables are
    never touched.
    """
    deployable = copy.deepcopy(template)
    result = MotoTemplate(deployable)
    notes = result.notes
    resources = deployable["Resources"]
    supported = _moto_types()
    stripped: set[str] = set()

    def strip(kind: str, logical_id: str, why: str, *, runs: bool = False) -> None:
        if runs:
            notes.append(f"stripped {kind} {logical_id}: {why}")
        else:
            left_out = Stripped(stack, kind, logical_id, why)
            result.stripped.append(left_out)
            notes.append(str(left_out).removeprefix(f"{stack}: "))

    for logical_id, resource in list(resources.items()):
        why = _why_stripped(resource, supported, alarm_reason)
        if why:
            del resources[logical_id]
            stripped.add(logical_id)
            if _is_sqs_subscription(resource):  # its note comes once it is created
                result.subscriptions.append(
                    Subscription(logical_id, copy.deepcopy(resource.get("Properties", {})))
                )
            else:
                strip(resource["Type"], logical_id, why, runs=resource["Type"] in _EMULATED_TYPES)
            if resource["Type"] == _ALARM:
                result.alarms.append(
                    AlarmResource(logical_id, copy.deepcopy(resource.get("Properties", {})))
                )
    changed = True
    while changed:  # then whatever depends on something stripped
        changed = False
        for logical_id, resource in list(resources.items()):
            gone = references(resource) & stripped
            if gone and resource["Type"] == "AWS::Lambda::Function":
                gone = _stand_ins(logical_id, resource, gone, template["Resources"], notes)
            if gone and resource["Type"] in _KEPT_TYPES:
                raise EngineFailed(
                    f"{logical_id} refers to {sorted(gone)}, which moto cannot create"
                )
            if gone:
                del resources[logical_id]
                stripped.add(logical_id)
                changed = True
                strip(
                    resource["Type"],
                    logical_id,
                    f"it refers to {', '.join(sorted(gone))}, stripped",
                )
    for name, output in list(deployable.get("Outputs", {}).items()):
        gone = references(output) & stripped
        if gone:
            del deployable["Outputs"][name]
            strip("Output", name, f"it refers to {', '.join(sorted(gone))}, stripped")
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
        properties = resource.get("Properties", {})
        if (
            resource["Type"] == "AWS::SQS::Queue"
            and str(properties.get("FifoQueue")).lower() == "true"
            and "QueueName" not in properties
        ):
            # As CloudFormation names it, less the random suffix: SQS allows 80 characters.
            properties["QueueName"] = f"{stack}-{logical_id}"[: 80 - len(".fifo")] + ".fifo"
            notes.append(
                f"FIFO queue {logical_id} named {properties['QueueName']} (moto's "
                "CloudFormation would give it a name without .fifo, which SQS refuses)"
            )
    if deployable.get("Rules", {}).pop("CheckBootstrapVersion", None) is not None:
        deployable.get("Parameters", {}).pop("BootstrapVersion", None)
        notes.append("removed the bootstrap-version rule (no bootstrap stack locally)")
    return result
