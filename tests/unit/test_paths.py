"""Where the package finds its own files, its state folder and the pipelines, checkout or installed."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from eos_ingest import paths
from eos_ingest.config import pipeline as config
from eos_ingest.spark import class_archive, submit

CHECKOUT, ENV, XDG, HOME = Path("/repo"), Path("/srv/state"), Path("/xdg"), Path("/home/u")


@pytest.mark.parametrize(
    ("eos_state_dir", "checkout", "xdg_state_home", "expected"),
    [
        (ENV, CHECKOUT, None, ENV),  # the environment always wins
        (ENV, None, XDG, ENV),
        (None, CHECKOUT, XDG, CHECKOUT / ".state"),  # running from a checkout: .state at its root
        (None, None, XDG, XDG / "eos-ingest"),  # installed: the per-user XDG state folder
        (None, None, None, HOME / ".local" / "state" / "eos-ingest"),
    ],
)
def test_the_state_folder_is_the_env_else_the_checkout_else_a_per_user_folder(
    monkeypatch: pytest.MonkeyPatch,
    eos_state_dir: Path | None,
    checkout: Path | None,
    xdg_state_home: Path | None,
    expected: Path,
) -> None:
    for var, value in (("EOS_STATE_DIR", eos_state_dir), ("XDG_STATE_HOME", xdg_state_home)):
        if value is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, str(value))
    monkeypatch.setenv("HOME", str(HOME))
    monkeypatch.setattr(paths, "CHECKOUT", checkout)

    assert paths.state_dir() == expected


@pytest.mark.parametrize(
    ("eos_pipelines_dir", "dags_folder", "checkout", "expected"),
    [
        (Path("/etc/pipes"), Path("/opt/airflow/dags"), CHECKOUT, Path("/etc/pipes")),
        (None, Path("/opt/airflow/dags"), CHECKOUT, Path("/opt/airflow/pipelines")),  # beside the DAGs
        (None, None, CHECKOUT, CHECKOUT / "pipelines"),  # the CLI in a checkout
        (None, None, None, Path("/work/here/pipelines")),  # the CLI installed: the working directory
    ],
)
def test_the_pipelines_folder_is_the_env_else_beside_the_dags_else_the_checkout_else_the_cwd(
    monkeypatch: pytest.MonkeyPatch,
    eos_pipelines_dir: Path | None,
    dags_folder: Path | None,
    checkout: Path | None,
    expected: Path,
) -> None:
    if eos_pipelines_dir is None:
        monkeypatch.delenv("EOS_PIPELINES_DIR", raising=False)
    else:
        monkeypatch.setenv("EOS_PIPELINES_DIR", str(eos_pipelines_dir))
    monkeypatch.setattr(paths, "CHECKOUT", checkout)
    monkeypatch.setattr(Path, "cwd", classmethod(lambda cls: Path("/work/here")))

    assert config.default_pipelines_dir(dags_folder) == expected


def test_the_package_finds_its_checkout_and_reads_its_files_from_inside_the_package() -> None:
    assert paths.CHECKOUT == Path(__file__).resolve().parents[2] == paths.REPO_ROOT
    for file in (paths.JOB_SCRIPT, paths.GX_TEMPLATE, paths.DEFAULT_SUITE, submit.JOB_SCRIPT):
        assert file.is_file() and file.is_relative_to(paths.PACKAGE_DIR), file


def test_every_file_the_code_reads_is_package_data_of_the_wheel() -> None:
    """Files the code opens by path are not modules: without a package-data glob a wheel lacks them."""
    pyproject = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["eos_ingest"]
    data = [paths.JOB_SCRIPT, class_archive.TRAINING_SCRIPT, paths.GX_TEMPLATE, paths.DEFAULT_SUITE]
    data += paths.PACKAGE_DIR.rglob("*.html")
    data += [f for f in paths.PACKAGE_DIR.rglob("*") if f.suffix in (".yml", ".yaml", ".json")]
    for file in data:
        relative = file.relative_to(paths.PACKAGE_DIR).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), f"{relative} is not in {globs}"
    # The job's folder holds its two spark-submit scripts and nothing else: Python puts a script's
    # folder first on sys.path, where a library module would shadow a top-level one.
    scripts = sorted(p.name for p in paths.JOB_SCRIPT.parent.glob("*.py"))
    assert scripts == sorted([paths.JOB_SCRIPT.name, class_archive.TRAINING_SCRIPT.name])
