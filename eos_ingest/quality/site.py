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

A door into GX's internals: the classes subclass GX's builders and views and override private
methods (`_build_validation_and_profiling_result_site_keys`, `_add_validations_to_index_links`)
and attributes (`source_store`, a view's `env`). Figures (bench/HISTORY.md,
bench/results/table_growth.jsonl, 2026-11-26): an audit of batch N with 1, 10 and 100 batches in
the table 0.113, 0.141, 0.129 s, 1.14x from 1 to 100, against 0.21 -> 0.28 s (1.35x) with GX's
own builders; its validation with the Data Docs update 0.080, 0.091, 0.087 s; with 469 results
stored, a warm update 0.07 s against 0.30-0.51 s with GX's builders (docs/quality.md); the template cache
saves ~0.2 s of a 0.33 s update in a fresh process (the audit's case); a whole audit of 950,000
rows 3.27 -> 2.92 s with these builders and import_gx's gc.freeze() together (medians of 5-6).
Upstream: great-expectations/great_expectations#1826 (Data Docs slow with many validations) and
#3732 (the index rebuilt from every stored result), both closed; GX 1.24 still does both.

Gate: BUILDERS_ON, on the GX series where these overrides were written and tested (KNOWN_SERIES,
pyproject's pin); on any other GX each class does exactly what its GX base does, so a GX upgrade
that moves these internals costs speed, not pages. Exit: test_site's precondition test fails
when GX's own builders stop listing every stored result, parsing every page's key or compiling
the templates again on each update: then the part of this module that saved it goes; when
expectations/great_expectations.yml names none of these classes, the module goes.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from eos_ingest.quality.context import gx_root
from eos_ingest.quality.gx_import import import_gx
from eos_ingest.versions import installed

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
    "BUILDERS_ON",
    "KNOWN_SERIES",
    "CachedTemplatesIndexPageView",
    "CachedTemplatesPageView",
    "LatestResultsIndexBuilder",
    "RequestedPagesSectionBuilder",
    "template_cache_dir",
]

# The great-expectations series whose builders' internals these classes were written against.
KNOWN_SERIES = (1, 24)
GX_VERSION = installed("great-expectations")
BUILDERS_ON = GX_VERSION[:2] == KNOWN_SERIES


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
        if BUILDERS_ON:
            self.env.bytecode_cache = FileSystemBytecodeCache(str(template_cache_dir()))


class CachedTemplatesIndexPageView(DefaultJinjaIndexPageView):
    """GX's index page view, its compiled templates kept across builds and processes."""

    def __init__(self, custom_styles_directory: Any = None, custom_views_directory: Any = None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        if BUILDERS_ON:
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
        if not resource_identifiers or not BUILDERS_ON:
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
        if not isinstance(config, dict) or not BUILDERS_ON:
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
        if not isinstance(config, dict) or not BUILDERS_ON:
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
