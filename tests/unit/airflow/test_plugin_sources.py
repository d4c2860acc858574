"""Airflow finds the plugin in its plugins folder and through the package's entry point, and
registers it once, without an import error, whichever way it found it.

Each case runs Airflow's own plugins manager (`airflow.plugins_manager._get_plugins`, what the API
server, the scheduler and `airflow plugins` call) in a fresh interpreter with a plugins folder of
its own; the entry point is the one of this venv's install of the package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from eos_ingest import paths
from tests.helpers.fresh_python import python_json

PLUGINS = paths.REPO_ROOT / "plugins"
# One interpreter for the three folders (importing Airflow is most of the cost): each call of the
# plugins manager reads a folder anew, and its cache is cleared between them. Modules stay
# imported, as they would in a fresh process for what each case asks (see the plugin's docstring).
PROBE = """
import json, sys
from airflow import plugins_manager, settings
found = []
for folder in sys.argv[1:]:
    settings.PLUGINS_FOLDER = folder
    plugins_manager._get_plugins.cache_clear()
    plugins, errors = plugins_manager._get_plugins()
    found.append({"plugins": [[p.name, type(p.source).__name__] for p in plugins], "errors": errors})
print(json.dumps(found))
"""
CASES = {
    "an empty plugins folder: the entry point": "EntryPointSource",
    "the repository's plugins folder": "PluginsDirectorySource",
    "a copy in the plugins folder under another name": "PluginsDirectorySource",
}


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What Airflow's plugins manager registers with each case's plugins folder."""
    home = tmp_path_factory.mktemp("airflow")
    empty, copy = home / "empty", home / "copy"
    empty.mkdir()
    copy.mkdir()
    shutil.copy(PLUGINS / "eos_ingest_plugin.py", copy / "ingestion.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="True",  # no config file written into AIRFLOW_HOME
    )
    folders = [str(empty), str(PLUGINS), str(copy)]
    return dict(zip(CASES, python_json(["-c", PROBE, *folders], env=env, cwd=home), strict=True))


@pytest.mark.parametrize(("case", "source"), CASES.items())
def test_the_plugin_is_registered_once_without_an_error_whichever_way_airflow_finds_it(
    registered: dict[str, dict[str, Any]], case: str, source: str
) -> None:
    found = registered[case]
    ours = [p for p in found["plugins"] if p[0] == "eos_ingest"]
    assert ours == [["eos_ingest", source]], found
    assert found["errors"] == {}, found


def test_the_plugins_folder_holds_the_plugin_module_and_the_entry_point_names_it() -> None:
    """plugins/ is the plugin's one home: the wheel ships that file (pyproject.toml's package-dir
    maps the root to plugins/), and the entry point names that module."""
    import importlib.metadata
    import tomllib

    pyproject = tomllib.loads((paths.REPO_ROOT / "pyproject.toml").read_text())
    setuptools = pyproject["tool"]["setuptools"]
    assert setuptools["package-dir"][""] == "plugins" and setuptools["py-modules"] == ["eos_ingest_plugin"]
    ((name, value),) = pyproject["project"]["entry-points"]["airflow.plugins"].items()
    assert (name, value) == ("eos_ingest", "eos_ingest_plugin:from_entry_point")
    assert sorted(p.name for p in PLUGINS.iterdir() if p.suffix == ".py") == ["eos_ingest_plugin.py"]
    (installed,) = importlib.metadata.entry_points(group="airflow.plugins", name="eos_ingest")
    assert installed.value == value, "the venv's install is older than pyproject.toml: make setup"
    module = __import__(installed.module)
    assert Path(module.__file__).resolve() == (PLUGINS / "eos_ingest_plugin.py").resolve()


def test_airflow_standalone_of_the_checkout_reads_the_repositorys_plugins_folder(tmp_path: Path) -> None:
    """scripts/airflow.sh (`make demo`, the e2e tests) points Airflow at plugins/, as the compose
    file mounts it, so those runs register the plugin from the folder."""
    import re
    import shlex

    (tmp_path / "airflow").mkdir()
    env = subprocess.run(
        ["bash", str(paths.REPO_ROOT / "scripts" / "airflow.sh"), "env"],
        env={**os.environ, "EOS_AIRFLOW_HOME": str(tmp_path / "airflow")},
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    match = re.search(r"^export AIRFLOW__CORE__PLUGINS_FOLDER=(.*)$", env, re.M)
    assert match, env
    assert Path(shlex.split(match.group(1))[0]).resolve() == PLUGINS.resolve()
