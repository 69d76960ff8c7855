"""Where the project is: the CDK app the local cloud synthesizes and deploys.

Why a module: the local cloud synthesizes a team's app (or the once repository's example),
keeps its build products under the project's ``build/localcloud``, and the repository's own
tools (DynamoDB Local in ``node_modules``, the benchmarks) find the checkout; each of them
asks here. A project is found as the CDK CLI finds it: the nearest ``cdk.json`` at or above
the working directory, whose ``app`` is the command that synthesizes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncecli.errors import SynthFailed

#: What to do when there is no CDK app: said by every command that needs one.
NO_APP_HINT = (
    "run it in a CDK project (the folder with cdk.json, or below it), or pass "
    '--app "python3 app.py" to name the command that synthesizes your app, or '
    "--template-dir with a synthesized cloud assembly (cdk.out)"
)


@dataclass(frozen=True)
class Project:
    """A CDK app on disk: its folder, the command that synthesizes it, and its context
    (``cdk.json``'s, then ``cdk.context.json``'s, as the CDK CLI merges them)."""

    root: Path
    app: str
    context: dict[str, Any]

    @property
    def build_dir(self) -> Path:
        """The local cloud's synthesized assemblies, zipped assets and logs."""
        return self.root / "build" / "localcloud"

    @classmethod
    def find(cls, start: Path | None = None, app: str | None = None) -> Project:
        """The project at or above ``start`` (default: the working directory). ``app``
        overrides ``cdk.json``'s command, and needs no ``cdk.json`` (its folder is
        ``start``)."""
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if (candidate / "cdk.json").is_file():
                return cls.at(candidate, app)
        if app:
            return cls(here, app, {})
        raise SynthFailed(f"no CDK app (cdk.json) in {here} or above it: {NO_APP_HINT}")

    @classmethod
    def at(cls, root: Path, app: str | None = None) -> Project:
        """The project whose ``cdk.json`` is in ``root``."""
        try:
            settings = json.loads((root / "cdk.json").read_text())
        except (OSError, ValueError) as error:
            raise SynthFailed(f"cannot read {root / 'cdk.json'}: {error}") from error
        command = app or settings.get("app")
        if not command:
            raise SynthFailed(f'{root / "cdk.json"} has no "app": {NO_APP_HINT}')
        context = dict(settings.get("context") or {})
        saved = root / "cdk.context.json"
        if saved.is_file():
            context.update(json.loads(saved.read_text()))
        return cls(root.resolve(), str(command), context)


def _checkout() -> Path:
    """The once repository's checkout, for the tools that run its example (the demo's
    DynamoDB Local in ``node_modules``, the benchmarks): the source tree this package runs
    from when it is one (an editable install), else the project at or above the working
    directory, else the working directory itself."""
    source = Path(__file__).resolve().parents[1]
    if (source / "cdk.json").is_file():
        return source
    cwd = Path.cwd().resolve()
    for candidate in (cwd, *cwd.parents):
        if (candidate / "cdk.json").is_file():
            return candidate
    return cwd


#: The once repository's checkout (see ``_checkout``).
ROOT = _checkout()
#: The checkout's local cloud build products (the benchmarks' and the demo's tests').
BUILD_DIR = ROOT / "build" / "localcloud"
#: The Node.js LTS pinned in package.json (absent where npm has no build for the platform).
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"
