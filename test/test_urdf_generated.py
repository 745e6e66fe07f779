"""The shipped URDFs are exactly what tools/make_robots.py writes (one source for parameters)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_robots", ROOT / "tools" / "make_robots.py")
make_robots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_robots)
GENERATED = make_robots.build_all()


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_urdf_up_to_date(name):
    shipped = (ROOT / "urdf" / f"{name}.urdf").read_text()
    assert shipped == GENERATED[name], f"urdf/{name}.urdf is stale: run `make urdf`"
