"""A state folder, table or SQLite DB on a network file system is warned about (fake /proc/mounts)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from eos_ingest.config import network_fs
from eos_ingest.config.network_fs import mount_of, network_fs_warnings
from eos_ingest.config.pipeline import load_pipeline

MOUNTS = """\
sysfs /sys sysfs rw,nosuid 0 0
/dev/sda1 / ext4 rw,relatime 0 0
/dev/sdb1 /data xfs rw 0 0
filer:/export/eos /data/shared nfs4 rw,vers=4.2 0 0
//nas/team /mnt/team\\040share cifs rw 0 0
me@host:/srv /home/me/remote fuse.sshfs rw 0 0
/dev/sdc1 /data/shared/local ext4 rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "mount"),
    [
        ("/data/x", ("/data", "xfs")),
        ("/data/shared/state", ("/data/shared", "nfs4")),
        ("/data/shared", ("/data/shared", "nfs4")),
        ("/data/sharedother", ("/data", "xfs")),  # a prefix of the name, not of the path
        ("/data/shared/local/tables", ("/data/shared/local", "ext4")),  # the longest prefix wins
        ("/mnt/team share/state", ("/mnt/team share", "cifs")),  # \040 is a space
        ("/home/me/remote/s", ("/home/me/remote", "fuse.sshfs")),
        ("/tmp/x", ("/", "ext4")),
    ],
)
def test_mount_of_is_the_longest_mount_point_holding_the_path(path: str, mount: tuple[str, str]) -> None:
    assert mount_of(Path(path), MOUNTS) == mount


def test_only_network_file_systems_are_warned_about_and_the_warning_says_why() -> None:
    places = [
        ("the state folder (EOS_STATE_DIR)", Path("/data/shared/state")),
        ("the Delta table", Path("/data/shared/local/tables/t")),
        ("the SQLite control DB", Path("/mnt/team share/control.db")),
        ("the Delta table", Path("/home/me/remote/t")),
        ("the Delta table", Path("/data/t")),
    ]
    warnings = network_fs_warnings(places, MOUNTS)
    assert len(warnings) == 3
    first = warnings[0]
    assert first.startswith("the state folder (EOS_STATE_DIR) /data/shared/state is on a network file system")
    assert "nfs4 mounted at /data/shared" in first and "atomic commits" in first
    assert "cifs" in warnings[1] and "fuse.sshfs" in warnings[2]


def test_a_pipeline_with_its_state_on_nfs_warns_in_the_log_and_on_the_cli_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nfiler:/x {state} nfs rw 0 0\n")
    monkeypatch.setattr(network_fs, "PROC_MOUNTS", mounts)
    monkeypatch.setattr(network_fs, "_warned", set())
    monkeypatch.setenv("EOS_STATE_DIR", str(state))
    monkeypatch.delenv("EOS_CONTROL_DB_URL", raising=False)
    doc = {"name": "orders", "topics": ["orders"], "value": {"format": "raw"}, "kafka_conn_id": None}
    (tmp_path / "orders.yaml").write_text(yaml.safe_dump(doc))

    caplog.set_level(logging.WARNING)
    load_pipeline(tmp_path / "orders.yaml")
    load_pipeline(tmp_path / "orders.yaml")
    logged = [r.getMessage() for r in caplog.records if "network file system" in r.getMessage()]
    assert len(logged) == 4  # the state folder, both tables, the SQLite DB: once each, not per load
    assert any(m.startswith(f"the state folder (EOS_STATE_DIR) {state} is on a network") for m in logged)

    # The CLI as a user runs it (its own logging setup), with the fake mounts file.
    code = (
        "import sys; from pathlib import Path; from eos_ingest.config import network_fs; "
        "network_fs.PROC_MOUNTS = Path(sys.argv[1]); from eos_ingest.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(mounts), "abandon", "--config", str(tmp_path / "orders.yaml"),
         "--batch-id", "99", "--reason", "x"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr  # an unknown batch: fails after the config loaded
    assert f"the state folder (EOS_STATE_DIR) {state} is on a network file system (nfs" in done.stderr
    assert "the SQLite control DB" in done.stderr
