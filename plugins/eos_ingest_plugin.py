"""The Airflow plugin of eos-ingest: the *Ingestion* page under Browse (docs/ui.md).

Wiring only: the page is eos_ingest.airflow.ingestion_page's app, built at its first request.

Airflow finds this file two ways, and registers it once either way:

- in its plugins folder, which holds this file (docker-compose.yaml mounts ./plugins there, and
  scripts/airflow.sh points `airflow standalone` at it): Airflow imports it as the module
  ``eos_ingest_plugin``, by its file name;
- through the installed wheel's ``airflow.plugins`` entry point, ``eos_ingest_plugin:from_entry_point``
  (pyproject.toml ships this file as that top-level module), when the plugins folder lacks it.

Airflow (3.3) reads its plugins folder first, then the entry points, and a second plugin of one
name is skipped *and reported as an import error* ("already registered"). So the entry point yields
when the plugins folder already gave Airflow this plugin: ``from_entry_point`` is then None, which
Airflow skips without a word (it only takes classes). tests/unit/airflow/test_plugin_sources.py runs
Airflow's plugins manager both ways, and with the folder holding a copy under another name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from airflow import settings
from airflow.plugins_manager import AirflowPlugin

from eos_ingest.airflow.ingestion_page import URL_PREFIX, LazyApp, build_app

PLUGIN_NAME = "eos_ingest"


class EosIngestPlugin(AirflowPlugin):
    """Registers the status app and its entry in the UI's Browse menu (shown in an iframe)."""

    name = PLUGIN_NAME
    # Typed as AirflowPlugin declares them (instance attributes), which mypy requires of an override.
    fastapi_apps: list[Any] = [  # noqa: RUF012
        {"app": LazyApp(build_app), "url_prefix": URL_PREFIX, "name": "eos-ingest status"}
    ]
    external_views: list[Any] = [  # noqa: RUF012
        {
            "name": "Ingestion",
            "href": URL_PREFIX.lstrip("/") + "/",  # relative to the UI's base URL
            "url_route": "eos-ingest",  # embed at <ui>/plugin/eos-ingest instead of a new tab
            "destination": "nav",
            "category": "browse",
        }
    ]


def loaded_from_plugins_folder(folder: str | Path | None = None) -> bool:
    """Whether a module Airflow imported from its plugins folder (`folder`, default Airflow's own)
    holds a plugin named PLUGIN_NAME: this file under any name, or a copy of it."""
    if folder is None:
        folder = settings.PLUGINS_FOLDER
    if not folder:
        return False
    # Airflow names the files it imports by the folder as configured; a symlinked one resolves.
    inside = tuple(os.path.join(str(p), "") for p in {Path(folder), Path(folder).resolve()})
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.startswith(inside) and any(map(_is_ours, vars(module).values())):
            return True
    return False


def _is_ours(value: Any) -> bool:
    """A plugin class named PLUGIN_NAME. Airflow tells a plugin class by its bases' names (core's and
    the task SDK's AirflowPlugin are two classes), so this does too."""
    return (
        isinstance(value, type)
        and getattr(value, "name", None) == PLUGIN_NAME
        and any(base.__name__ == "AirflowPlugin" for base in value.__mro__[1:])
    )


def __getattr__(name: str) -> Any:
    """``from_entry_point``: the plugin class, or None when the plugins folder already gave it."""
    if name == "from_entry_point":
        return None if loaded_from_plugins_folder() else EosIngestPlugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
