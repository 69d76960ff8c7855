"""The local stage's template: synthesized from the CDK app, then made deployable on moto.

Why apart from the deploy: the template is where the local cloud departs from AWS, so each
change is made here, with a note that says why (``LocalCloud.notes`` lists them):

- the event source mapping is stripped (moto's own calls Docker and bumps receive counts)
  and emulated by ``mapping.Mapping`` with the template's settings;
- resource types moto's CloudFormation cannot create are stripped, with what refers to them;
- KMS key tags are spelled the way moto's KMS reads them;
- a bootstrap-version rule, if any, is removed (there is no bootstrap stack locally).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from oncecli.errors import EngineFailed, SynthFailed
from oncecli.project import BUILD_DIR, PROJECT_NODE, ROOT

STACK_NAME = "Once-local"
#: Inputs of the synthesized template: a change to any of them means synthesizing again.
_SYNTH_INPUTS = ("app.py", "cdk.json", "requirements-lambda.txt", "once_cdk", "infra", "functions")
#: Never stripped: the demo must use the template's own queues, tables and function.
_KEPT_TYPES = {"AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::Lambda::Function"}
_STRIPPED_TYPES = {
    "AWS::Lambda::EventSourceMapping": "emulated by the once CLI (moto's would call Docker)",
}


def _inputs_digest(context: dict[str, str]) -> str:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode())
    for name in _SYNTH_INPUTS:
        path = ROOT / name
        # Every file of a folder, not only its modules: once_cdk holds the asset's pins.
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(ROOT)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def synth(context: dict[str, str] | None = None, *, log: Path | None = None) -> Path:
    """Synthesize the ``local`` stage into a cached cloud assembly directory; return it."""
    if not (ROOT / "app.py").is_file() or not (ROOT / "cdk.json").is_file():
        raise SynthFailed(
            f"no CDK app in {ROOT} (app.py and cdk.json): run `once` inside the once "
            "repository, or pass --template-dir with a synthesized cloud assembly"
        )
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
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
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
