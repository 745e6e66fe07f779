"""Old names kept working: ``multibody_dynamics.deprecation.module_getattr`` and ``forwarded``."""

from __future__ import annotations

import json

import pytest

from multibody_dynamics.deprecation import forwarded, module_getattr
from multibody_dynamics.errors import InputError


def test_module_getattr_kinds_of_old_names():
    getattr_ = module_getattr("pkg.old", deprecated={
        "table": ("pkg.new.TABLE", lambda: {"a": 1}),
        "dumps": "json.dumps",
    }, moved={"gone": "the file's section x:"})
    with pytest.warns(DeprecationWarning, match=r"^pkg\.old\.table is deprecated; use "
                                                r"pkg\.new\.TABLE$"):
        assert getattr_("table") == {"a": 1}
    with pytest.warns(DeprecationWarning, match=r"^pkg\.old\.dumps is deprecated; use "
                                                r"json\.dumps$"):
        assert getattr_("dumps") is json.dumps  # the new place's object, not a copy
    with pytest.raises(ImportError, match=r"pkg\.old\.gone is no longer there: use the file's"):
        getattr_("gone")
    with pytest.raises(AttributeError, match="module 'pkg.old' has no attribute 'other'"):
        getattr_("other")


def test_forwarded_names_a_module_and_an_attribute():
    assert forwarded("json.dumps")() is json.dumps
    with pytest.raises(InputError, match="'package.module.attribute', got 'dumps'"):
        forwarded("dumps")
