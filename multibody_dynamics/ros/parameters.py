"""Typed node parameters with descriptors, ranges and run-time validation.

A node lists its parameters as :class:`ParameterSpec` objects and hands them to
:class:`ParameterSet`, which

- declares each one with its type, default and a ``ParameterDescriptor``
  (description with unit, ``FloatingPointRange``/``IntegerRange``, allowed
  choices in ``additional_constraints``, ``read_only``);
- checks the start-up values (overrides from YAML/launch/command line) and
  raises :class:`ParameterError` naming the parameter and what was expected;
- validates run-time changes in an ``add_on_set_parameters_callback`` and
  rejects bad ones with ``SetParametersResult(successful=False, reason=...)``
  before the node sees them; accepted changes are handed to the node's
  ``on_change`` callback, which may still refuse them by raising ``ValueError``.

rclpy itself enforces types, ranges of scalars and ``read_only``; the checks are
repeated here so that the reason is uniform, arrays get element-wise ranges and
string parameters get their choices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    ParameterType,
    SetParametersResult,
)
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.parameter import Parameter

from ..errors import InputError

_TYPES = {
    bool: ParameterType.PARAMETER_BOOL,
    int: ParameterType.PARAMETER_INTEGER,
    float: ParameterType.PARAMETER_DOUBLE,
    str: ParameterType.PARAMETER_STRING,
}
_TYPE_NAMES = {
    ParameterType.PARAMETER_BOOL: "bool",
    ParameterType.PARAMETER_INTEGER: "integer",
    ParameterType.PARAMETER_DOUBLE: "double",
    ParameterType.PARAMETER_STRING: "string",
    ParameterType.PARAMETER_DOUBLE_ARRAY: "double array",
    ParameterType.PARAMETER_STRING_ARRAY: "string array",
    ParameterType.PARAMETER_INTEGER_ARRAY: "integer array",
    ParameterType.PARAMETER_BOOL_ARRAY: "bool array",
}


class ParameterError(InputError):
    """A node parameter has an invalid value; the message names it and what was expected."""


@dataclass(frozen=True)
class ParameterSpec:
    """One node parameter.

    Parameters
    ----------
    name : str
    default : bool | int | float | str | list
        Default value; its Python type fixes the parameter type.  A list default
        is a double array unless ``type`` says otherwise (an empty list needs it).
    description : str
        What it does; the unit goes in ``unit``.
    unit : str
        Appended to the description as ``[unit]``.
    range : (low, high) or None
        Inclusive bounds of a number, element-wise for arrays.
    choices : tuple of str or None
        Allowed values of a string parameter.
    read_only : bool
        Set once at start-up (launch/YAML), refused at run time.
    min_length, max_length : int
        Allowed lengths of an array (a node may check the model-dependent length).
    type : ParameterType value or None
        Explicit type (needed for an empty list default).
    """

    name: str
    default: Any
    description: str
    unit: str = ""
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    read_only: bool = False
    min_length: int = 0
    max_length: int | None = None
    type: int | None = None

    @property
    def ptype(self) -> int:
        if self.type is not None:
            return self.type
        if isinstance(self.default, (list, tuple)):
            if self.default and all(isinstance(x, str) for x in self.default):
                return ParameterType.PARAMETER_STRING_ARRAY
            return ParameterType.PARAMETER_DOUBLE_ARRAY
        return _TYPES[type(self.default)]

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.ptype, str(self.ptype))

    def descriptor(self) -> ParameterDescriptor:
        text = self.description + (f" [{self.unit}]" if self.unit else "")
        constraints = []
        d = ParameterDescriptor(name=self.name, type=self.ptype, description=text,
                                read_only=self.read_only)
        if self.range is not None:
            lo, hi = self.range
            if self.ptype == ParameterType.PARAMETER_INTEGER:
                d.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
            else:
                d.floating_point_range = [FloatingPointRange(from_value=float(lo),
                                                             to_value=float(hi), step=0.0)]
            if self.ptype == ParameterType.PARAMETER_DOUBLE_ARRAY:
                constraints.append(f"each element in [{lo:g}, {hi:g}]")
        if self.choices:
            constraints.append("one of: " + ", ".join(self.choices))
        if self.min_length or self.max_length is not None:
            hi = "" if self.max_length is None else str(self.max_length)
            constraints.append(f"length {self.min_length}..{hi}")
        d.additional_constraints = "; ".join(constraints)
        return d

    def check(self, value) -> str | None:
        """Why ``value`` is not acceptable, or None."""
        if self.ptype == ParameterType.PARAMETER_DOUBLE_ARRAY:
            values = list(value)
            if len(values) < self.min_length or (self.max_length is not None
                                                  and len(values) > self.max_length):
                most = "" if self.max_length is None else f" and at most {self.max_length}"
                return (f"{self.name}: expected at least {self.min_length}{most} values, "
                        f"got {len(values)}")
            for k, x in enumerate(values):
                if not math.isfinite(x):
                    return f"{self.name}[{k}]: expected a finite number, got {x}"
                if self.range is not None and not self.range[0] <= x <= self.range[1]:
                    return (f"{self.name}[{k}]: {x:g} out of range [{self.range[0]:g}, "
                            f"{self.range[1]:g}]")
            return None
        if self.ptype in (ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_INTEGER):
            if not math.isfinite(value):
                return f"{self.name}: expected a finite number, got {value}"
            if self.range is not None and not self.range[0] <= value <= self.range[1]:
                return (f"{self.name}: {value:g} out of range [{self.range[0]:g}, "
                        f"{self.range[1]:g}]" + (f" {self.unit}" if self.unit else ""))
        if self.choices is not None and value not in self.choices:
            return f"{self.name}: expected one of {', '.join(self.choices)}, got {value!r}"
        return None


def _plain(value):
    """Parameter value as a plain Python object (arrays as lists)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return list(value)


class ParameterSet:
    """Declares ``specs`` on ``node`` and guards their run-time changes.

    Parameters
    ----------
    node : rclpy.node.Node
    specs : sequence of ParameterSpec
    on_change : callable(dict name -> new value), optional
        Called with the accepted changes (after validation, before rclpy stores
        them); raising ``ValueError`` (incl. every suite error) refuses the change
        with that message as the reason.

    Raises
    ------
    ParameterError
        A start-up value (override) of the wrong type, out of range or not one of the choices.
    """

    def __init__(self, node, specs: Sequence[ParameterSpec],
                 on_change: Callable[[dict[str, Any]], None] | None = None):
        self._node = node
        self.specs = {s.name: s for s in specs}
        self.values: dict[str, Any] = {}
        self._on_change = on_change
        for spec in specs:
            self.values[spec.name] = self._declare(spec)
            problem = spec.check(self.values[spec.name])
            if problem:
                raise ParameterError(f"parameter {problem}")
        node.add_on_set_parameters_callback(self._on_set)

    def __getitem__(self, name: str):
        return self.values[name]

    def _declare(self, spec: ParameterSpec):
        node, desc = self._node, spec.descriptor()
        try:
            if isinstance(spec.default, (list, tuple)) and not spec.default:
                node.declare_parameter(spec.name, Parameter.Type(spec.ptype), desc)
            else:
                default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
                node.declare_parameter(spec.name, default, desc)
        except InvalidParameterTypeException:
            raise ParameterError(f"parameter {spec.name}: expected a {spec.type_name} value "
                                 f"(e.g. {spec.default!r})") from None
        except InvalidParameterValueException as exc:
            reason = getattr(exc, "args", ("",))[-1]
            raise ParameterError(f"parameter {spec.name}: invalid value ({reason}); expected "
                                 f"{spec.descriptor().additional_constraints or spec.type_name}"
                                 ) from None
        try:
            value = node.get_parameter(spec.name).value
        except ParameterUninitializedException:
            value = []
        return _plain(value) if value is not None else []

    def _on_set(self, params) -> SetParametersResult:
        changes = {}
        for p in params:
            spec = self.specs.get(p.name)
            if spec is None:
                continue
            if spec.read_only:
                return SetParametersResult(successful=False,
                                           reason=f"{p.name} is read-only (set it at start-up)")
            if p.type_.value != spec.ptype and not (
                    spec.ptype == ParameterType.PARAMETER_DOUBLE_ARRAY
                    and p.type_ == Parameter.Type.NOT_SET):
                return SetParametersResult(successful=False, reason=(
                    f"{p.name}: expected a {spec.type_name} value, got {p.type_.name.lower()}"))
            value = _plain(p.value) if p.value is not None else []
            problem = spec.check(value)
            if problem:
                return SetParametersResult(successful=False, reason=problem)
            changes[p.name] = value
        if changes and self._on_change is not None:
            try:
                self._on_change(changes)
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=" ".join(str(exc).split()))
        self.values.update(changes)
        return SetParametersResult(successful=True)

    def table(self) -> list[tuple[str, str, Any, str, str]]:
        """(name, type, default, constraints, description) rows, for documentation."""
        return [(s.name, s.type_name, s.default, s.descriptor().additional_constraints or (
            f"[{s.range[0]:g}, {s.range[1]:g}]" if s.range else ""), s.descriptor().description)
            for s in self.specs.values()]
