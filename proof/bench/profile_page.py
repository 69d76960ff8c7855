"""The page's "Where once's time goes" section: pyinstrument's profile of one-record
batches, by call tree and by function (``profile.py`` measures them), followed by the
tuning subsection that ``tuning.py`` renders from ``docs/perf_tuning.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proof.bench import tuning
from proof.bench.page import ENGINE_TITLE, Page


def section(page: Page, profile: dict[str, Any], docs: Path) -> None:
    """The profile of the engine run that took one, then the saved tuning runs, if any."""
    page.text(
        "## Where once's time goes\n\npyinstrument samples the calling thread, and "
        "`once` runs a one-record batch in the calling thread, so this profile is "
        f"{profile['batches']} one-record batches with no injected RTT and no business "
        f"time on {ENGINE_TITLE.get(profile['engine'], profile['engine'])}: the "
        "client-side cost of one record, which a batch of 10 pays ten times under one "
        f"GIL.\n\n```text\n{profile['text'].strip()}\n```"
    )
    if profile.get("flat"):
        page.text(
            "The same samples by function, self time, libraries included: waiting for "
            "the engine shows as socket calls; nearly all the rest is botocore building, "
            "signing and parsing requests and urllib3/http.client sending them. That is "
            "the CPU per record that bounds big batches; `once`'s own code is the lines "
            "under `once/` and Powertools' logger formats its log line."
            f"\n\n```text\n{profile['flat'].strip()}\n```"
        )
    tuned = tuning.section(docs)
    if tuned:
        page.text(tuned)
