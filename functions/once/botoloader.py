"""A botocore loader that finds once's services by name: botocore's own ``Loader``, except
that checking a service exists before loading its model does not list every service.

Why: botocore's ``load_service_model`` first asks ``list_available_services``, which scans the
directory of every service botocore knows (some 400, and ``~/.aws/models``) for each model
type: about 7 ms of a cold start per type, and a DynamoDB client loads two (its API and its
endpoint rules). once's own botocore session (``handler._session``, used when boto3 is not
loaded) registers it; anything else asked of the list gets botocore's full answer, and any
trouble building the loader leaves botocore's own (``tests/unit/runtime/test_cold_start_imports.py``
compares the two for every service and model type).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader, create_loader


class _Available(Sequence[str]):
    """What ``Loader.list_available_services`` answers, asked one service at a time.

    botocore asks it only whether the service it loads a model of is among them. Listing
    them all scans the directory of every service botocore knows (some 400, and
    ``~/.aws/models``) for each model type, about 7 ms of a cold start per type, and a
    DynamoDB client loads two types (its API and its endpoint rules). A service is available
    for a type when some API version of it has a model of that type, which
    ``list_api_versions`` reads from that service's directories alone. Anything else asked
    of the list (its length, its items: botocore's ``UnknownServiceError`` names them all)
    gets botocore's own, scanned then."""

    def __init__(self, loader: Any, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name

    def __contains__(self, name: object) -> bool:
        # A service is a directory of a search path: a plain name.
        if not isinstance(name, str) or name in ("", ".", "..") or os.path.basename(name) != name:
            return False
        try:
            return bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    def _all(self) -> list[str]:
        return list(Loader.list_available_services(self._loader, self._type_name))

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())


class NamedServiceLoader(Loader):
    """botocore's loader, whose ``load_service_model`` checks that the service it loads is
    available without listing every service first (``_Available``)."""

    # A sequence, not the list botocore builds: botocore only reads it as one.
    def list_available_services(self, type_name: str) -> Sequence[str]:  # type: ignore[override]
        return _Available(self, type_name)


def named_service_loader(session: Any) -> Any:
    """The loader botocore's session would build (its search paths, ``AWS_DATA_PATH``
    included, in its order), as a ``NamedServiceLoader``; None, leaving botocore's own, on
    any trouble building it."""
    try:
        paths = list(create_loader(session.get_config_variable("data_path")).search_paths)
        return NamedServiceLoader(extra_search_paths=paths, include_default_search_paths=False)
    except Exception:
        return None
