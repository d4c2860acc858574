"""storage/full_disks.py: a full file system recognized in Spark's error text, and the folder named."""

from __future__ import annotations

import errno
from pathlib import Path

from eos_ingest.errors import exit_code
from eos_ingest.storage.full_disks import disk_full_error, is_disk_full

JVM_TEXT = (
    "An error occurred while calling o91.commit.\n: java.io.IOException: No space left on device\n"
    "\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)"
)


def test_a_full_disk_is_recognized_in_jvm_text_and_as_an_os_error_and_nothing_else_is() -> None:
    assert is_disk_full(RuntimeError(JVM_TEXT))
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_disk_full(RuntimeError("java.io.IOException: Connection reset by peer"))
    assert disk_full_error(RuntimeError("something else"), 3, ["/tmp"]) is None


def test_the_error_names_the_folder_its_free_space_and_the_fix_in_one_line(tmp_path: Path) -> None:
    table = tmp_path / "tables" / "orders"  # not made yet: a first write
    error = disk_full_error(RuntimeError(JVM_TEXT), 7, [str(table), "s3a://bucket/quarantine"])
    assert error is not None and error.retriable and exit_code(error) == 75
    line = str(error)
    assert "\n" not in line and "batch 7" in line and str(table) in line
    assert "bytes free now" in line and "free space there" in line and "stays planned" in line
