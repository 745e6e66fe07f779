"""What a design study optimizes: a design problem and the result of one evaluation.

A *design problem* maps a design vector ``x`` (named, bounded) to a scalar criterion that
the optimizer minimizes (Seifried (2014) Ch. 7: balancing masses, link geometry, output
parameters). Problems are evaluated many thousands of times, in this process, in a local
process pool or on Dask workers, so a problem must be

* picklable and cheap to pickle: keep only plain options in the object and build heavy
  state (a loaded model) lazily in the process that evaluates, cached per process;
* pure: the same ``x`` gives the same :class:`Evaluation` in any process, so a study that
  lost a worker and re-ran its evaluations ends with the same result;
* total: a failed or unstable design is an :class:`Evaluation` with ``ok=False`` and the
  problem's penalty value (the book's "large default value"), never an exception. Only
  misuse (a vector of the wrong length, a value outside the bounds) raises.

Concrete problems register themselves by name with :func:`register_problem`; study files
name them, and :func:`get_problem` builds one from its options.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from multibody_dynamics.errors import DimensionError, InputError

__all__ = ["PROBLEMS", "DesignProblem", "Evaluation", "check_design_vector", "get_problem",
           "register_problem"]


@dataclass(frozen=True)
class Evaluation:
    """The outcome of evaluating one design.

    Attributes
    ----------
    value : float
        The criterion (smaller is better); the problem's penalty when ``ok`` is False.
    ok : bool
        False when the design is infeasible or its evaluation failed (unstable zero
        dynamics, a failed integration); ``message`` then says why.
    message : str
        Empty on success, one line otherwise.
    info : dict
        JSON-serializable extras for reports (e.g. ``min_phase``, ``eigenvalues`` as
        ``[[re, im], ...]``, ``mass``).
    """

    value: float
    ok: bool = True
    message: str = ""
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class DesignProblem(Protocol):
    """A bounded, named design space and a criterion on it (see the module docstring)."""

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray

    def evaluate(self, x: np.ndarray) -> Evaluation:
        """Evaluate the design ``x`` of shape ``(len(names),)``."""
        ...


def check_design_vector(problem: DesignProblem, x) -> np.ndarray:
    """``x`` as a float array after checking its length, finiteness and bounds.

    Raises
    ------
    DimensionError
        ``x`` does not have one entry per design variable.
    InputError
        An entry is not finite or lies outside its bounds; the message names it.
    """
    x = np.asarray(x, dtype=float)
    n = len(problem.names)
    if x.shape != (n,):
        raise DimensionError(f"design vector: expected shape ({n},) for {list(problem.names)}, "
                             f"got {x.shape}")
    for name, value, lo, hi in zip(problem.names, x, problem.lower, problem.upper):
        if not np.isfinite(value):
            raise InputError(f"design parameter {name!r}: expected a finite number, got {value}")
        if value < lo or value > hi:
            raise InputError(f"design parameter {name!r} = {value:g} is outside its bounds "
                             f"[{lo:g}, {hi:g}]")
    return x


PROBLEMS: dict[str, Callable[..., DesignProblem]] = {}

# Modules whose import registers problems; imported on the first lookup so that naming a
# problem in a study file needs no import by the caller.
_PROBLEM_MODULES = ("multibody_control.design.problems", "multibody_control.design.analytic",
                    "multibody_control.design.flexible_output",
                    "multibody_control.design.flexible_cart_output",
                    "multibody_control.design.flexible_shape",
                    "multibody_control.design.flexible_cart_shape")


_PER_THREAD = threading.local()


def per_thread(factory: Callable[..., Any], *key):
    """``factory(*key)``, built once per thread of this process and then reused (``key``
    hashable): what a design problem's evaluations share and may change in place (a loaded
    model, its parametric copy, a tabulated task), kept out of the problem object so that the
    problem stays small to pickle to pool or Dask workers."""
    store = getattr(_PER_THREAD, "store", None)
    if store is None:
        store = _PER_THREAD.store = {}
    k = (factory, *key)
    if k not in store:
        store[k] = factory(*key)
    return store[k]


def register_problem(name: str):
    """Class or factory decorator: make a problem buildable by ``name`` from a study file."""

    def decorate(factory):
        if name in PROBLEMS and PROBLEMS[name] is not factory:
            raise ValueError(f"design problem {name!r} is registered twice")
        PROBLEMS[name] = factory
        return factory

    return decorate


def _load_problem_modules():
    for module in _PROBLEM_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a module not written yet registers nothing
            if exc.name != module:
                raise


def get_problem(name: str, **options) -> DesignProblem:
    """Build the registered problem ``name`` with ``options`` (a study file's ``options``).

    Raises
    ------
    InputError
        ``name`` is not a registered problem (the message lists the known ones).
    """
    _load_problem_modules()
    if name not in PROBLEMS:
        raise InputError(f"unknown design problem {name!r}; expected one of {sorted(PROBLEMS)}")
    return PROBLEMS[name](**options)
