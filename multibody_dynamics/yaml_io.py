"""Reading the suite's YAML files (models, scenarios, studies) with the numbers people write.

PyYAML follows YAML 1.1, where a float needs a decimal point: ``1e-3``, ``2e11`` or ``1.0e6``
without one would be read as strings. ROS 2 parameter files (yaml-cpp, YAML 1.2) and most
people read them as numbers, so every YAML file of the suite is read with :func:`load_yaml`,
whose loader also resolves exponent notation without a point to floats. Everything else is
PyYAML's safe loader unchanged.
"""

from __future__ import annotations

import re

import yaml

__all__ = ["load_yaml"]


class _Loader(yaml.SafeLoader):
    """yaml.SafeLoader that also reads ``1e-3``, ``+2E11``, ``1.e6`` as floats."""


# Tried after PyYAML's own int and float resolvers (which reject these), so it only adds.
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(text: str):
    """Parse YAML ``text`` (safe loader, exponent floats as numbers); raises yaml.YAMLError."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
