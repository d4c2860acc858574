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


def test_a_checkout_reads_spark_and_expectations_from_its_top_level_folders() -> None:
    assert paths.CHECKOUT == Path(__file__).resolve().parents[2] == paths.REPO_ROOT
    assert paths.SPARK_DIR == paths.REPO_ROOT / "spark"
    assert paths.EXPECTATIONS_DIR == paths.REPO_ROOT / "expectations"
    for file in (paths.JOB_SCRIPT, paths.TRAINING_SCRIPT, paths.GX_TEMPLATE, paths.DEFAULT_SUITE):
        assert file.is_file(), file
    assert submit.JOB_SCRIPT == paths.JOB_SCRIPT and class_archive.TRAINING_SCRIPT == paths.TRAINING_SCRIPT
    # One copy: nothing of them inside the package.
    assert (
        not (paths.PACKAGE_DIR / "spark_job").exists() and not (paths.PACKAGE_DIR / "expectations").exists()
    )


def test_every_file_the_code_reads_ships_in_the_wheel_by_the_build_mapping() -> None:
    """Files the code opens by path are not modules: without a mapping and a package-data glob a
    wheel lacks them. spark/ and expectations/ map to eos_ingest.spark_job and .expectations, where
    paths finds them in an installed package; every package is listed (a mapped one cannot be found)."""
    setuptools = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    for folder, packaged in paths.SHIPPED_FOLDERS.items():
        assert mapping[f"eos_ingest.{packaged}"] == folder
    found = sorted(
        ".".join(p.parent.relative_to(paths.REPO_ROOT).parts) for p in paths.PACKAGE_DIR.rglob("__init__.py")
    )
    mapped = [f"eos_ingest.{name}" for name in paths.SHIPPED_FOLDERS.values()]
    assert sorted(setuptools["packages"]) == sorted(found + mapped), "pyproject.toml's packages list"
    data = setuptools["package-data"]
    owned: list[tuple[Path, str]] = [(paths.PACKAGE_DIR, "eos_ingest")]
    owned += [(paths.REPO_ROOT / f, f"eos_ingest.{p}") for f, p in paths.SHIPPED_FOLDERS.items()]
    read = [paths.GX_TEMPLATE, paths.DEFAULT_SUITE, *paths.PACKAGE_DIR.rglob("*.html")]
    read += [f for root, _ in owned for f in root.rglob("*") if f.suffix in (".yml", ".yaml", ".json")]
    for file in read:
        root, package = next((r, p) for r, p in owned if file.is_relative_to(r))
        relative = file.relative_to(root).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in data[package]), f"{relative} is not in {package}"
    # The job's folder holds its two spark-submit scripts and nothing else: Python puts a script's
    # folder first on sys.path, where a library module would shadow a top-level one (pyspark, yaml).
    scripts = sorted(p.name for p in paths.SPARK_DIR.iterdir() if p.name != "__pycache__")
    assert scripts == sorted([paths.JOB_SCRIPT.name, paths.TRAINING_SCRIPT.name])


def test_a_state_folder_of_its_own_shares_setups_jars_and_class_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's Airflow once linked the jars and not the class-data archive, and its jobs loaded
    every class anew: both are shared, and a part setup has not written is left out."""
    setup_state, own, bare = tmp_path / "state", tmp_path / "own", tmp_path / "bare"
    for folder in (setup_state / "jars" / "spark", setup_state / "jvm", own, bare):
        folder.mkdir(parents=True)
    monkeypatch.setenv("EOS_STATE_DIR", str(setup_state))

    paths.share_setup_state(own)
    assert {p.name: p.resolve() for p in own.iterdir()} == {
        "jars": setup_state / "jars",
        "jvm": setup_state / "jvm",
    }

    (setup_state / "jvm").rmdir()
    paths.share_setup_state(bare)
    assert [p.name for p in bare.iterdir()] == ["jars"]
