"""Two local clouds of one app at once (a test run spread over processes, two terminals):
each ships the lines of its own workers only, so each logs in a folder of its own."""

from __future__ import annotations

from oncecli.localcloud.cloud import LocalCloud
from tests.localcloud.helpers import CONTEXT


def test_two_clouds_of_the_same_app_never_share_a_log_folder():
    # Whichever holds the build folder (another process of the suite may): at most one.
    clouds = [LocalCloud(engine="moto", context=CONTEXT).start() for _ in range(2)]
    try:
        folders = [cloud.log_dir for cloud in clouds]
        assert len(set(folders)) == 2
        build = clouds[0].build_dir
        assert all(folder == build or folder.parent == build for folder in folders)
        assert sum(folder == build for folder in folders) <= 1
    finally:
        for cloud in clouds:
            cloud.stop()
