"""The Data Docs site's builders, so that a gate or an audit costs the same with 10 or 10,000
validation results stored (expectations/great_expectations.yml names these classes).

GX's own builders, on every update of one result's page:
- list every stored result three times (the validations and profiling sections, then the index),
  parsing each key's run time with dateutil, and list the site's pages once more;
- read back every result the index lists (up to `validation_results_limit`) through GX's schema;
- compile each Jinja template again: every build makes new views, each with its own Jinja
  environment (0.2 s of a 0.33 s docs update in a fresh process, the audit's case).

Here a section renders only the pages asked for (a whole-site build, with none asked for, is GX's
own), the index picks its latest results from the site's page names without parsing the others
and reads only their status, and the views keep compiled templates in Jinja's bytecode cache.
What the pages and the index show is GX's rendering, unchanged.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from eos_ingest.quality.context import gx_root
from eos_ingest.quality.gx_import import import_gx

import_gx()  # GX's classes are the bases below; the import is paused-GC and quiet

from great_expectations.core.run_identifier import RunIdentifier  # noqa: E402
from great_expectations.data_context.types.resource_identifiers import (  # noqa: E402
    ValidationResultIdentifier,
)
from great_expectations.render.renderer.site_builder import (  # noqa: E402
    DefaultSiteIndexBuilder,
    DefaultSiteSectionBuilder,
    resource_key_passes_run_name_filter,
)
from great_expectations.render.view.view import (  # noqa: E402
    DefaultJinjaIndexPageView,
    DefaultJinjaPageView,
)
from jinja2 import FileSystemBytecodeCache  # noqa: E402

__all__ = [
    "CachedTemplatesIndexPageView",
    "CachedTemplatesPageView",
    "LatestResultsIndexBuilder",
    "RequestedPagesSectionBuilder",
    "template_cache_dir",
]


def template_cache_dir() -> Path:
    """Where compiled Data Docs templates are kept: <state folder>/gx/.jinja-cache. Jinja keys
    each entry by the template's name and source checksum, and writes it atomically, so a GX
    upgrade or several processes at once are safe."""
    folder = gx_root() / ".jinja-cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class CachedTemplatesPageView(DefaultJinjaPageView):
    """GX's page view, its compiled templates kept across builds and processes."""

    def __init__(self, custom_styles_directory: Any = None, custom_views_directory: Any = None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        self.env.bytecode_cache = FileSystemBytecodeCache(str(template_cache_dir()))


class CachedTemplatesIndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view, its compiled templates kept across builds and processes."""

    def __init__(self, custom_styles_directory: Any = None, custom_views_directory: Any = None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        self.env.bytecode_cache = FileSystemBytecodeCache(str(template_cache_dir()))


class _RequestedKeys:
    """A store as GX's section builder sees it, listing only the keys asked for."""

    def __init__(self, store: Any, keys: list[Any]) -> None:
        self._store, self._keys = store, keys

    def list_keys(self) -> list[Any]:
        return list(self._keys)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class RequestedPagesSectionBuilder(DefaultSiteSectionBuilder):
    """Renders the pages of the resources asked for, without listing the whole store first (GX
    lists it, and parses every key, to find them). With none asked for: GX's whole-section build."""

    def build(self, resource_identifiers: list[Any] | None = None) -> None:
        if not resource_identifiers:
            return super().build(resource_identifiers)
        store = self.source_store
        asked = [k for k in resource_identifiers if isinstance(k, store.key_class) and store.has_key(k)]
        self.source_store = _RequestedKeys(store, asked)
        try:
            return super().build(resource_identifiers)
        finally:
            self.source_store = store


def _run_time(key: tuple[str, ...]) -> str:
    """A page key's run time as GX names it (…/run_name/run_time/batch): "%Y%m%dT%H%M%S.%fZ",
    fixed width in UTC, so its text sorts in time order."""
    return key[-2]


class LatestResultsIndexBuilder(DefaultSiteIndexBuilder):
    """GX's index of the latest `validation_results_limit` validations, found from the names of the
    site's pages (only those listed are parsed) and listed with the status read from each result's
    JSON (GX reads each back through its schema). A page whose result is gone is removed, as GX does."""

    def _build_validation_and_profiling_result_site_keys(
        self, skip_and_clean_missing: bool
    ) -> list[ValidationResultIdentifier]:
        config = self.site_section_builders_config.get("validations")
        if not isinstance(config, dict):
            return super()._build_validation_and_profiling_result_site_keys(skip_and_clean_missing)
        pages = self.target_store.store_backends[ValidationResultIdentifier]
        source = self.data_context.stores[config["source_store_name"]]
        limit = self.validation_results_limit or float("inf")
        latest: list[ValidationResultIdentifier] = []
        for page in sorted(pages.list_keys(), key=_run_time, reverse=True):
            if len(latest) >= limit:
                break
            key = ValidationResultIdentifier.from_tuple(page)
            if not resource_key_passes_run_name_filter(key, config.get("run_name_filter") or {}):
                continue
            if not source.has_key(key):
                if skip_and_clean_missing:
                    pages.remove_key(page)
                continue
            latest.append(key)
        return latest

    def _add_validations_to_index_links(
        self, index_links_dict: OrderedDict[str, Any], validation_and_profiling_result_site_keys: list[Any]
    ) -> None:
        config = self.site_section_builders_config.get("validations")
        if not isinstance(config, dict):
            return super()._add_validations_to_index_links(
                index_links_dict, validation_and_profiling_result_site_keys
            )
        source = self.data_context.stores[config["source_store_name"]]
        for key in validation_and_profiling_result_site_keys:
            try:
                result = json.loads(source.store_backend.get(source.key_to_tuple(key)))
            except Exception:  # as GX: a result that cannot be read is left out of the index
                continue
            meta = result.get("meta") or {}
            batch_kwargs, batch_spec = meta.get("batch_kwargs") or {}, meta.get("batch_spec") or {}
            run_id: RunIdentifier = key.run_id
            self.add_resource_info_to_index_links_dict(
                index_links_dict=index_links_dict,
                expectation_suite_name=key.expectation_suite_identifier.name,
                section_name="validations",
                batch_identifier=key.batch_identifier,
                run_id=run_id,
                validation_success=result.get("success"),
                run_time=run_id.run_time,
                run_name=run_id.run_name,
                asset_name=batch_kwargs.get("data_asset_name")  # as GX's _resolve_asset_name
                or batch_spec.get("data_asset_name")
                or (meta.get("active_batch_definition") or {}).get("data_asset_name"),
                batch_kwargs=batch_kwargs,
                batch_spec=batch_spec,
            )
