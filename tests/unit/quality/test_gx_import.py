"""GX's import (eos_ingest/quality/gx_import.py) and its three tricks. Deferred modules: a stand-in
until the first use, then the real module, and find_spec still works meanwhile; hidden packages fail
one thread's imports for a while; GX validates and builds its pages without scipy.stats and altair,
and without pyspark where asked and not imported yet; the frame-stack chunk is kept where CPython
churns. The precondition tests fail when an upgrade makes a trick moot: then remove it."""

from __future__ import annotations

import importlib.util
import json
import resource
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eos_ingest.quality.gx_import import (
    FRAME_STACK_CHURNS,
    GX_DEFERRED_MODULES,
    DeferredModule,
    defer,
    hidden,
    in_one_chunk,
)
from tests.helpers.fresh_python import python_json

REPO = Path(__file__).resolve().parents[3]
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


def test_find_spec_still_finds_a_deferred_module_and_does_not_load_it(probes: Path) -> None:
    # Another library asking whether a module is installed, while it is deferred.
    defer(["eos_probe_plain", "eos_probe_pkg.sub"])
    for name in ("eos_probe_plain", "eos_probe_pkg.sub"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.name == name and spec.origin and spec.origin.endswith(".py")
    assert loaded(probes) == ["eos_probe_pkg"]  # found, not loaded
    assert isinstance(sys.modules["eos_probe_plain"], DeferredModule)


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
    import importlib.util
    from eos_ingest.quality import gx_import
    gx_import.import_gx(hide=["pyspark"])  # as an audit-only process (operations.audit_batches)
    specs = {name: importlib.util.find_spec(name).name for name in gx_import.GX_DEFERRED_MODULES}
    from tests.helpers.gx import frame, pipeline

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
                      "after_gx": after_gx, "specs": specs, "entropy": entropy, "chart": chart,
                      "stats_loaded": "scipy.stats._stats_py" in sys.modules,
                      "gx_spark": gx_spark, "spark_after_gx": spark_after_gx, "refused": refused}))
    """
)


def gx_run(tmp_path: Path, order: str) -> dict:
    """GX_RUN in a fresh interpreter (this one has imported pyspark and may have imported the rest)."""
    env = {"EOS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"}
    return python_json(["-c", GX_RUN, str(tmp_path / "pipelines"), order], env=env, cwd=REPO, timeout=300)


def test_gx_validates_and_renders_without_importing_scipy_stats_altair_or_pyspark(tmp_path: Path) -> None:
    run = gx_run(tmp_path, "gx-only")
    assert run["success"] and run["report"]
    assert run["after_gx"] == {"scipy.stats._stats_py": False, "altair.vegalite": False}
    assert run["specs"] == {"scipy.stats": "scipy.stats", "altair": "altair"}  # find_spec still works
    assert run["entropy"] == 0.0 and run["chart"] == "Chart" and run["stats_loaded"]
    # As the audit's process: GX without its Spark bindings, and a Spark frame refused clearly.
    assert not run["gx_spark"] and not run["spark_after_gx"]
    assert "import pyspark before the first GX call" in run["refused"]


def test_gx_keeps_its_spark_bindings_where_pyspark_was_imported_first(tmp_path: Path) -> None:
    run = gx_run(tmp_path, "spark-first")  # a process that imported pyspark: nothing hidden
    assert run["success"] and run["gx_spark"]
    assert run["refused"].startswith("BuildBatchRequestError")  # GX's, for a fake frame: not ours


def test_gx_still_imports_what_the_tricks_keep_it_from_importing() -> None:
    """The precondition of deferring and hiding: a plain import of GX imports them. When this
    fails after a GX upgrade, the trick for that module is moot: remove it from gx_import."""
    probe = (
        "import json, sys, great_expectations; print(json.dumps({n: n in sys.modules for n in sys.argv[1:]}))"
    )
    names = [*GX_DEFERRED_MODULES, "pyspark"]
    out = subprocess.run(
        [sys.executable, "-c", probe, *names], capture_output=True, text=True, timeout=300, check=True
    )
    imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert imported == dict.fromkeys(names, True), (
        f"GX no longer imports {[n for n, i in imported.items() if not i]}"
    )


CALLS_PER_DEPTH = 200


def _leaf() -> None:
    return None


def _descend(depth: int) -> None:
    if depth:
        _descend(depth - 1)
        return
    for _ in range(CALLS_PER_DEPTH):
        _leaf()


def _every_depth() -> None:
    # Some start depth puts the leaf's frame just past a chunk's end: each of its calls maps a chunk.
    for depth in range(400):
        _descend(depth)


def _minor_faults(run: Callable[[], object]) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    run()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_the_frame_stack_trick_is_on_exactly_where_cpython_maps_a_chunk_per_call() -> None:
    """Each call at a chunk's end costs a fresh page where CPython maps a chunk per call, which the
    process's minor page faults count. Fails when the gate (FRAME_STACK_CHURNS) is wrong for this
    Python either way: a fixed Python the gate calls churning (moot: narrow the gate), or a
    churning one it calls fixed (extend it); and when the trick stops helping (harmful or moot)."""
    _every_depth()  # warm: the interpreter's own first-call allocations
    baseline = _minor_faults(_every_depth)
    churns = baseline >= CALLS_PER_DEPTH
    assert churns == FRAME_STACK_CHURNS, (
        f"Python {sys.version}: {baseline} minor faults, gate {FRAME_STACK_CHURNS}"
    )
    if churns:
        in_chunk = _minor_faults(lambda: in_one_chunk(_every_depth))
        print(f"minor page faults: {baseline} plain, {in_chunk} in one chunk")
        assert in_chunk < baseline / 4


def test_the_result_and_errors_of_a_call_in_one_chunk_come_back() -> None:
    assert in_one_chunk(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        in_one_chunk(lambda: 1 // 0)
