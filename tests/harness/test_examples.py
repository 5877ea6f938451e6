"""The example plugin: scans whose merged values do not depend on the split, a real model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from pydantic import ValidationError

from simrun_examples.scan import OdeScan, SbmlScan, grid
from simrun_harness.plugin import SettingsError, TaskContext, load_task_types
from tests.harness.conftest import MODELS
from tests.harness.scans import open_scan, run_in_process

SCAN = {
    "parameters": {"alpha": {"start": 10, "stop": 500, "num": 4, "scale": "log"}, "n": [1.5, 3]},
    "t_end": 50.0,
    "n_points": 101,
}
MODEL = MODELS / "repressilator"


def test_the_plugin_declares_every_example_type() -> None:
    types = load_task_types()
    for name in ("ode_scan", "sbml_scan", "summary", "sleep", "spin", "allocate", "fail"):
        assert types[name].name == name


@pytest.mark.parametrize("scan_type", [OdeScan, SbmlScan])
def test_a_scan_merged_from_any_split_equals_the_serial_run(
    tmp_path: Path, scan_type: type[OdeScan] | type[SbmlScan]
) -> None:
    serial = run_in_process(scan_type(), {**SCAN, "chunk": 8}, tmp_path / "one", model_dir=MODEL)
    split = run_in_process(
        scan_type(),
        {**SCAN, "chunk": 3},
        tmp_path / "split",
        model_dir=MODEL,
        order=[2, 0, 1],  # units computed out of order, as several workers would
    )

    one, many = open_scan(serial), open_scan(split)
    xr.testing.assert_equal(one, many)
    assert one.sizes == {"point": 8, "time": 101}
    assert list(one["alpha"].values[::2]) == pytest.approx([10, 36.8403, 135.7209, 500], rel=1e-5)


def test_the_antimony_model_and_the_python_odes_agree(tmp_path: Path) -> None:
    settings = {**SCAN, "chunk": 8}
    sbml = open_scan(run_in_process(SbmlScan(), settings, tmp_path / "sbml", model_dir=MODEL))
    ode = open_scan(run_in_process(OdeScan(), settings, tmp_path / "ode"))

    for species in ("m1", "p1", "p3"):
        np.testing.assert_allclose(sbml[species].values, ode[species].values, rtol=1e-3, atol=1e-3)


def test_the_grid_is_the_product_of_the_values_in_order() -> None:
    settings = OdeScan.settings_model.model_validate({"parameters": {"alpha": [1, 2], "n": [3, 4]}})
    assert grid(settings) == [  # type: ignore[arg-type]
        {"alpha": 1, "n": 3},
        {"alpha": 1, "n": 4},
        {"alpha": 2, "n": 3},
        {"alpha": 2, "n": 4},
    ]


def test_an_ode_scan_of_an_unknown_parameter_is_invalid() -> None:
    with pytest.raises(ValidationError, match="unknown parameters"):
        OdeScan().parse_settings({"parameters": {"gamma": [1.0]}})


def test_an_sbml_scan_of_a_parameter_the_model_lacks_is_a_settings_error() -> None:
    scan = SbmlScan()
    ctx = TaskContext(
        "scan", scan.parse_settings({"parameters": {"gamma": [1.0]}}), model_dir=MODEL
    )
    with pytest.raises(SettingsError, match="gamma"):
        scan.units(ctx)


def test_an_sbml_scan_without_its_model_file_is_a_settings_error(tmp_path: Path) -> None:
    scan = SbmlScan()
    ctx = TaskContext("scan", scan.parse_settings({"parameters": {"n": [1.0]}}), model_dir=tmp_path)
    with pytest.raises(SettingsError, match=r"repressilator\.ant"):
        scan.units(ctx)


def test_a_scan_of_more_units_than_the_cap_is_a_settings_error() -> None:
    """Two ranges of 100,000 values are ten billion points: refused when the settings are
    read, before any service lists the units (which would build the grid to count it)."""
    huge = {"start": 1.0, "stop": 2.0, "num": 100_000}
    with pytest.raises(ValidationError, match=r"250,000,000 units of 40; at most 100,000 units"):
        OdeScan().parse_settings({"parameters": {"alpha": huge, "n": huge}})
    ctx = TaskContext(
        "scan", OdeScan().parse_settings({"parameters": {"alpha": [1.0] * 9}, "chunk": 4})
    )
    assert [u["stop"] for u in OdeScan().units(ctx)] == [4, 8, 9]
