"""Where the project is: the checkout of the CDK app the local cloud deploys.

Why a module: the local cloud synthesizes the app, finds DynamoDB Local in its
``node_modules`` and keeps its build products under ``build/``; each of them asks here.
"""

from __future__ import annotations

from pathlib import Path


def _project_root() -> Path:
    """The checkout of the CDK app: where ``app.py``, ``cdk.json``, ``node_modules`` and
    ``build/`` are.

    The source tree this package runs from when it is one (an editable install, or
    ``python -m oncecli.cli`` in the repository); otherwise, as for ``cdk``, the nearest
    directory at or above the working directory that holds a ``cdk.json`` (a non-editable
    install run inside the repository); otherwise the working directory itself, where
    ``synth`` then says what is missing.
    """
    cwd = Path.cwd().resolve()
    for candidate in (Path(__file__).resolve().parents[1], cwd, *cwd.parents):
        if (candidate / "cdk.json").is_file():
            return candidate
    return cwd


#: The project root (see ``_project_root``).
ROOT = _project_root()
#: The local cloud's synthesized assemblies, zipped assets and logs.
BUILD_DIR = ROOT / "build" / "localcloud"
#: The Node.js LTS pinned in package.json (absent where npm has no build for the platform).
PROJECT_NODE = ROOT / "node_modules" / ".bin" / "node"
