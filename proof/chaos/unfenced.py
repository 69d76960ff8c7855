"""The harness's control run (``once-unfenced``): once's record store without its fence.

Its complete and fail land whenever the item exists, whoever owns it now and whatever fence
it carries. Running it beside ``once`` shows that the harness catches the stale writes the
fence prevents. It lives here, not in the runtime, because no user should ever run it.
"""

from __future__ import annotations

from once.store import RecordStore


class UnfencedRecordStore(RecordStore):
    """A record store whose finalize checks that the item exists, nothing more."""

    # DynamoDB rejects unused expression values, so the bound ones are compared to
    # themselves: always true.
    finalize_condition = (
        "attribute_exists(#id) AND :me = :me AND :fence = :fence AND :in_progress = :in_progress"
    )
