"""Deferred modules (eos_ingest/quality/deferred_modules.py): a stand-in until the first use, then the
real module; hidden packages fail one thread's imports for a while; GX validates and builds its
pages without scipy.stats and altair, and without pyspark where asked and not imported yet."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from eos_ingest.quality.deferred_modules import DeferredModule, defer, hidden

REPO = Path(__file__).resolve().parents[2]
PROBES = ("eos_probe_plain", "eos_probe_pkg", "eos_probe_pkg.sub", "eos_probe_broken")


@pytest.fixture()
def probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Modules that record in `loaded.txt` when their body runs."""
    log = tmp_path / "loaded.txt"
    record = f"open({str(log)!r}, 'a').write(__name__ + '\\n')\n"
    (tmp_path / "eos_probe_plain.py").write_text(record + "VALUE = 42\n")
    (tmp_path / "eos_probe_pkg").mkdir()
    (tmp_path / "eos_probe_pkg" / "__init__.py").write_text(record)
    (tmp_path / "eos_probe_pkg" / "sub.py").write_text(record + "def twice(x):\n    return 2 * x\n")
    (tmp_path / "eos_probe_broken.py").write_text(record + "raise RuntimeError('broken probe')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield log
    for name in PROBES:
        sys.modules.pop(name, None)


def loaded(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_deferred_module_runs_on_its_first_use_and_then_replaces_its_stand_in(probes: Path) -> None:
    assert defer(["eos_probe_plain", "eos_probe_pkg.sub"]) == ["eos_probe_plain", "eos_probe_pkg.sub"]
    import eos_probe_plain
    from eos_probe_pkg import sub

    assert isinstance(eos_probe_plain, DeferredModule) and isinstance(sub, DeferredModule)
    assert loaded(probes) == ["eos_probe_pkg"]  # the package itself is imported as usual

    assert eos_probe_plain.VALUE == 42
    assert sub.twice(21) == 42
    assert loaded(probes) == ["eos_probe_pkg", "eos_probe_plain", "eos_probe_pkg.sub"]
    assert not isinstance(sys.modules["eos_probe_plain"], DeferredModule)
    assert sys.modules["eos_probe_pkg"].sub is sys.modules["eos_probe_pkg.sub"]
    assert sub.twice(1) == 2 and loaded(probes).count("eos_probe_pkg.sub") == 1  # loaded once


def test_a_module_not_installed_or_already_imported_is_not_deferred(probes: Path) -> None:
    import eos_probe_plain

    assert defer(["eos_probe_plain", "eos_probe_not_installed"]) == []
    assert sys.modules["eos_probe_plain"] is eos_probe_plain
    with pytest.raises(ModuleNotFoundError):
        import eos_probe_not_installed  # noqa: F401


def test_a_module_that_fails_to_load_raises_at_each_use_and_keeps_its_stand_in(probes: Path) -> None:
    defer(["eos_probe_broken"])
    import eos_probe_broken

    for _ in range(2):
        with pytest.raises(RuntimeError, match="broken probe"):
            eos_probe_broken.anything  # noqa: B018
    assert sys.modules["eos_probe_broken"] is eos_probe_broken
    assert loaded(probes) == ["eos_probe_broken", "eos_probe_broken"]


def test_a_hidden_package_fails_this_threads_imports_only_and_only_inside_the_block(probes: Path) -> None:
    import eos_probe_plain  # imported before: never hidden

    seen: dict[str, str] = {}

    def other_thread() -> None:
        from eos_probe_pkg import sub

        seen["other"] = sub.__name__

    with hidden(["eos_probe_pkg", "eos_probe_plain"]) as packages:
        assert packages == {"eos_probe_pkg"}
        with pytest.raises(ModuleNotFoundError, match="hidden while GX imports"):
            import eos_probe_pkg.sub
        assert "eos_probe_pkg" not in sys.modules
        assert eos_probe_plain.VALUE == 42
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(timeout=30)
    assert seen == {"other": "eos_probe_pkg.sub"}
    assert "eos_probe_pkg.sub" in sys.modules
    sys.modules.pop("eos_probe_pkg.sub")
    sys.modules.pop("eos_probe_pkg")
    import eos_probe_pkg.sub  # noqa: F401  after the block: imported as usual

    assert not any(type(f).__name__ == "_HiddenPackages" for f in sys.meta_path)


GX_RUN = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    if sys.argv[2] == "spark-first":
        import pyspark.sql
    from eos_ingest.quality import context as gx_context
    from eos_ingest.quality import suite as quality_suite
    quality_suite.import_gx(hide=["pyspark"])  # as an audit-only process (operations.audit_batches)
    from tests.gx_helpers import frame, pipeline

    config = pipeline(Path(sys.argv[1]), "deferred")
    result, _, report = gx_context.validate(config, 1, "gate", frame(), 3)
    after_gx = {name: name in sys.modules for name in ("scipy.stats._stats_py", "altair.vegalite")}
    from great_expectations.compatibility import pyspark as gx_pyspark
    gx_spark = bool(gx_pyspark.pyspark)
    spark_after_gx = "pyspark" in sys.modules
    class SparkLike:  # what validate() takes for a Spark frame
        sparkSession = None
    try:
        gx_context.validate(config, 2, "gate", SparkLike(), 3)
        refused = ""
    except Exception as exc:  # ours (GX without pyspark), or GX's own for a fake frame
        refused = f"{type(exc).__name__}: {exc}"
    import pyspark.sql  # the hiding ended with GX's import
    # GX's KL-divergence expectation still finds both, imported on use.
    from great_expectations.expectations.core import expect_column_kl_divergence_to_be_less_than as kl
    entropy = float(kl.stats.entropy([0.5, 0.5], [0.5, 0.5]))
    chart = kl.alt.Chart.__name__
    print(json.dumps({"success": result.success, "report": Path(report).is_file(),
                      "after_gx": after_gx, "entropy": entropy, "chart": chart,
                      "stats_loaded": "scipy.stats._stats_py" in sys.modules,
                      "gx_spark": gx_spark, "spark_after_gx": spark_after_gx, "refused": refused}))
    """
)


def gx_run(tmp_path: Path, order: str) -> dict:
    """GX_RUN in a fresh interpreter (this one has imported pyspark and may have imported the rest)."""
    env = {"EOS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", GX_RUN, str(tmp_path / "pipelines"), order],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_gx_validates_and_renders_without_importing_scipy_stats_altair_or_pyspark(tmp_path: Path) -> None:
    run = gx_run(tmp_path, "gx-only")
    assert run["success"] and run["report"]
    assert run["after_gx"] == {"scipy.stats._stats_py": False, "altair.vegalite": False}
    assert run["entropy"] == 0.0 and run["chart"] == "Chart" and run["stats_loaded"]
    # As the audit's process: GX without its Spark bindings, and a Spark frame refused clearly.
    assert not run["gx_spark"] and not run["spark_after_gx"]
    assert "import pyspark before the first GX call" in run["refused"]


def test_gx_keeps_its_spark_bindings_where_pyspark_was_imported_first(tmp_path: Path) -> None:
    run = gx_run(tmp_path, "spark-first")  # a process that imported pyspark: nothing hidden
    assert run["success"] and run["gx_spark"]
    assert run["refused"].startswith("BuildBatchRequestError")  # GX's, for a fake frame: not ours
