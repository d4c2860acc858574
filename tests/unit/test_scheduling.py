"""How the suite is spread over xdist's workers (tests/scheduling.py): a file per unit, the shared
Airflow stack's e2e files as one, the longest units first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.scheduling import SHARED_STACK_SCOPE, durations_from_junit, longest_first, scope_of


def test_a_unit_is_a_file_except_the_e2e_files_sharing_one_airflow() -> None:
    assert scope_of("tests/unit/x/test_a.py::test_one[1]") == "tests/unit/x/test_a.py"
    assert scope_of("tests/e2e/test_airflow_e2e.py::test_dag") == SHARED_STACK_SCOPE
    assert scope_of("tests/e2e/test_airflow_ui_browser.py::T::test_page") == SHARED_STACK_SCOPE
    assert scope_of("tests/e2e/test_spark_cluster.py::test_c") == SHARED_STACK_SCOPE
    assert scope_of("tests/e2e/test_docker_compose_up.py::test_d") == "tests/e2e/test_docker_compose_up.py"


def test_units_go_longest_first_unknown_ones_before_them_each_units_tests_together_in_order() -> None:
    ids = ["a.py::1", "b.py::1", "a.py::2", "c.py::1", "new.py::1", "b.py::2"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    longest_first(items, {"a.py": 10.0, "b.py": 30.0, "c.py": 20.0})  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["new.py::1", "b.py::1", "b.py::2", "c.py::1", "a.py::1", "a.py::2"]


def test_durations_are_read_per_unit_from_junit_xml(tmp_path: Path) -> None:
    xml = tmp_path / "times.xml"
    xml.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="tests.unit.test_a" name="t1" time="1.5"/>'
        '<testcase classname="tests.unit.test_a.TestB" name="t2" time="2"/>'
        '<testcase classname="tests.e2e.test_airflow_e2e" name="t3" time="7"/>'
        '<testcase classname="tests.e2e.test_sasl_ssl_e2e" name="t4" time="3"/>'
        "</testsuite></testsuites>"
    )
    assert durations_from_junit(xml) == {"tests/unit/test_a.py": 3.5, SHARED_STACK_SCOPE: 10.0}
