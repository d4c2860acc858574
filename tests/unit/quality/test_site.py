"""The Data Docs builders of eos_ingest/quality/site.py: GX's site and index, at a cost that does not
grow with the results stored. Real GX on pandas frames; no Spark, no broker."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2
import pytest

from eos_ingest.config.pipeline import PipelineConfig
from eos_ingest.quality import context as gx_context
from tests.helpers.gx import frame, pipeline


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def validations(config: PipelineConfig, count: int) -> list[str]:
    """`count` stored results, every third one failed (a wrong expected count); their ids."""
    ids = []
    for n in range(1, count + 1):
        expected = 4 if n % 3 == 0 else 3
        stage = "audit" if n % 2 else "gate"
        result, result_id, _ = gx_context.validate(config, n, stage, frame(), expected)
        assert result.success is (n % 3 != 0)
        ids.append(result_id)
    return ids


def site_builder(context: Any) -> Any:
    site = context.variables.data_docs_sites[gx_context.SITE]
    return context._init_site_builder_for_data_docs_site_creation(gx_context.SITE, site)


def index_links(index_builder: Any) -> list[tuple[Any, ...]]:
    _, links = index_builder.build()
    return [
        (v["filepath"], v["validation_success"], v["asset_name"], v["run_name"], v["run_time"])
        for v in links.get("validations_links", [])
    ]


def test_the_index_lists_the_latest_validations_as_gxs_own_builder_does(tmp_path: Path) -> None:
    from great_expectations.render.renderer.site_builder import DefaultSiteIndexBuilder

    from eos_ingest.quality.site import LatestResultsIndexBuilder

    validations(pipeline(tmp_path / "pipelines", "orders"), 7)
    context = gx_context.open_context(gx_context.gx_root())
    ours = site_builder(context).site_index_builder
    assert isinstance(ours, LatestResultsIndexBuilder)
    ours.validation_results_limit = 4  # fewer than stored: which ones are listed matters
    gxs = DefaultSiteIndexBuilder(
        name="site_index_builder",
        site_name=gx_context.SITE,
        data_context=context,
        target_store=ours.target_store,
        site_section_builders_config=ours.site_section_builders_config,
        show_how_to_buttons=False,
        validation_results_limit=4,
        source_stores=ours.source_stores,
    )
    listed = index_links(ours)
    assert listed == index_links(gxs)
    assert [run_name.split("-batch-")[1] for *_, run_name, _ in listed] == [
        "7-audit",
        "6-gate",
        "5-audit",
        "4-gate",
    ]
    assert [success for _, success, *_ in listed] == [True, False, True, True]


def test_a_page_whose_result_is_gone_leaves_the_index_and_the_site(tmp_path: Path) -> None:
    validations(pipeline(tmp_path / "pipelines", "orders"), 3)
    root = gx_context.gx_root()
    gone = next((root / "validations").rglob("orders-batch-3-audit/*/*.json"))
    page = next((root / "data_docs" / "validations").rglob("orders-batch-3-audit/*/*.html"))
    shutil.rmtree(gone.parent.parent)
    listed = index_links(site_builder(gx_context.open_context(root)).site_index_builder)
    assert [run_name for *_, run_name, _ in listed] == ["orders-batch-2-gate", "orders-batch-1-audit"]
    assert not page.exists()
    assert "orders-batch-3-audit" not in gx_context.data_docs_index().read_text()


def test_a_validation_renders_its_pages_without_listing_the_stored_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from great_expectations.data_context.store.validation_results_store import ValidationResultsStore

    config = pipeline(tmp_path / "pipelines", "orders")
    validations(config, 2)

    def listed(*_: Any, **__: Any) -> Any:
        raise AssertionError("the Data Docs update listed every stored validation result")

    monkeypatch.setattr(ValidationResultsStore, "list_keys", listed)
    result, _, report = gx_context.validate(config, 3, "gate", frame(), 3)
    assert result.success and Path(report).is_file() and "orders-batch-3-gate" in report
    assert "orders-batch-3-gate" in gx_context.data_docs_index().read_text()


def test_a_second_update_reuses_the_compiled_templates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eos_ingest.quality.site import template_cache_dir

    config = pipeline(tmp_path / "pipelines", "orders")
    validations(config, 1)
    assert any(template_cache_dir().iterdir())

    def compiled(*_: Any, **__: Any) -> Any:
        raise AssertionError("a Data Docs template was compiled again")

    # Each update makes new views, each with a new Jinja environment: only the cache spares the compile.
    monkeypatch.setattr(jinja2.Environment, "compile", compiled)
    result, _, report = gx_context.validate(config, 2, "audit", frame(), 3)
    assert result.success and Path(report).is_file() and "orders-batch-2-audit" in report
    assert "orders-batch-2-audit" in gx_context.data_docs_index().read_text()


class _Calls:
    """Counts the calls of some functions of GX, Jinja and the store, still calling them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from great_expectations.data_context.store.validation_results_store import ValidationResultsStore
        from great_expectations.data_context.types.resource_identifiers import ValidationResultIdentifier

        self.counts: Counter[str] = Counter()
        from_tuple = ValidationResultIdentifier.from_tuple.__func__  # type: ignore[attr-defined]
        list_keys, compile_template = ValidationResultsStore.list_keys, jinja2.Environment.compile

        def counted(name: str, function: Any) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                self.counts[name] += 1
                return function(*args, **kwargs)

            return call

        monkeypatch.setattr(
            ValidationResultIdentifier, "from_tuple", classmethod(counted("parse", from_tuple))
        )
        monkeypatch.setattr(ValidationResultsStore, "list_keys", counted("list", list_keys))
        monkeypatch.setattr(jinja2.Environment, "compile", counted("compile", compile_template))


def test_the_index_parses_the_keys_it_lists_where_gxs_own_parses_every_stored_one(tmp_path: Path) -> None:
    """The precondition of LatestResultsIndexBuilder, and its gate: with BUILDERS_ON off (a GX
    outside KNOWN_SERIES) the class is GX's own, which parses every stored page's key to list the
    latest few. When GX's own stops doing that, this fails: the override is moot, remove it."""
    from eos_ingest.quality import site

    validations(pipeline(tmp_path / "pipelines", "orders"), 6)
    context = gx_context.open_context(gx_context.gx_root())
    parsed = {}
    for on in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(site, "BUILDERS_ON", on)
            builder = site_builder(context).site_index_builder
            builder.validation_results_limit = 2
            calls = _Calls(patch)
            assert len(index_links(builder)) == 2
            parsed[on] = calls.counts["parse"]
    assert parsed[True] == 2, "ours parses the keys it lists"
    assert parsed[False] >= 6, "GX's own parses every stored page's key"


def test_gxs_own_update_of_one_result_lists_the_store_and_compiles_the_templates_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The precondition of RequestedPagesSectionBuilder and the cached-template views, and their
    gate: with BUILDERS_ON off, a Data Docs update of one result is GX's own, which lists every
    stored result and compiles its templates again in each new view. (With it on, the two tests
    above show neither happens.) When GX's own stops doing one of them, this fails: the part of
    site.py that saved it is moot, remove it."""
    from eos_ingest.quality import site

    config = pipeline(tmp_path / "pipelines", "orders")
    validations(config, 1)  # with the gate on: the templates compiled and cached
    monkeypatch.setattr(site, "BUILDERS_ON", False)
    calls = _Calls(monkeypatch)
    result, _, report = gx_context.validate(config, 2, "gate", frame(), 3)
    assert result.success and Path(report).is_file() and "orders-batch-2-gate" in report
    assert calls.counts["list"] >= 1, "GX's own section builder lists every stored result"
    assert calls.counts["compile"] >= 1, "GX's own views compile the templates again"


def test_the_builders_gate_is_the_gx_series_pyproject_allows() -> None:
    from eos_ingest.quality import site
    from tests.helpers.dependencies import pyproject_series

    low, high = pyproject_series("great-expectations")
    assert low == site.KNOWN_SERIES and high == (site.KNOWN_SERIES[0], site.KNOWN_SERIES[1] + 1)
    assert site.BUILDERS_ON, "the installed GX (the lock's) is in the tested series"
