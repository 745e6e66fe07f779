"""Reading the suite's YAML files (models, scenarios, studies) with the numbers people write.

PyYAML follows YAML 1.1, where a float needs a decimal point: ``1e-3``, ``2e11`` or ``1.0e6``
without one would be read as strings. ROS 2 parameter files (yaml-cpp, YAML 1.2) and most
people read them as numbers, so every YAML file of the suite is read with :func:`load_yaml`,
whose loader also resolves exponent notation without a point to floats. Everything else is
PyYAML's safe loader unchanged.

:func:`number_problem` is the one wording of a bad number in any of these files, used by the
model YAML checker (:class:`~multibody_dynamics.model.config.YamlChecker`) and by the scenario
and study checker (:mod:`multibody_control.scenarios.schema`): NaN, a boolean or text is "expected
a number", ±inf "expected a finite number" (unless the key is a limit, where ``.inf`` means
none).
"""

from __future__ import annotations

import math
import re

import yaml

__all__ = ["load_yaml", "number_problem"]


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


def number_problem(value, *, infinite: bool = False, positive: bool = False,
                   minimum: float | None = None) -> str | None:
    """What is wrong with ``value`` read from YAML as a real number, or None when it is one.

    Parameters
    ----------
    value : object
        The value as read (:func:`load_yaml`).
    infinite : bool
        ``value`` is a limit: ``.inf`` / ``-.inf`` mean "none" and are accepted.
    positive : bool
        ``value`` must be > 0.
    minimum : float, optional
        ``value`` must be >= ``minimum``.

    Returns
    -------
    str or None
        ``"expected a number, got nan"`` (also for a boolean, text, a list, null),
        ``"expected a finite number, got inf"``, ``"expected a positive number (> 0), got 0"``,
        ``"expected a number >= 1, got 0.5"``; None for a good value. Callers prefix the file
        and the key.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return f"expected a number, got {value!r}"
    if not infinite and math.isinf(value):
        return f"expected a finite number, got {value!r}"
    if positive and not value > 0:
        return f"expected a positive number (> 0), got {value!r}"
    if minimum is not None and value < minimum:
        return f"expected a number >= {minimum:g}, got {value!r}"
    return None
