"""Common interface of the tracking controllers.

Every control law is a class built from a frozen config dataclass and a
:class:`~multibody_dynamics.model.MultibodyModel`; ``step(t, q, v, reference)``
returns the model's inputs ``u`` (nu,) [N | N m] (generalized force ``tau = B u``)
and ``reset()`` clears the internal state (integrators, previous time).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.validation import as_vector

from .reference import Reference


@dataclass(frozen=True)
class ControllerConfig:
    """Base of the controller configs (frozen: a gain change builds a new controller)."""


def gain_vector(value, n: int, name: str, *, positive: bool = True, unit: str = "",
                per: str = "input") -> np.ndarray:
    """A gain as (n,) float array: a scalar (same for every input) or n values.

    ``per`` names what the n values are one per (``"input"``, ``"coordinate"``, ...), for the
    message of a wrong count.

    Raises
    ------
    DimensionError
        Wrong number of values (the message states the expected count).
    InputError
        NaN, or a value <= 0 (``positive``) / < 0 (otherwise).
    """
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    elif arr.ndim == 1 and arr.size == 1:
        arr = np.full(n, float(arr[0]))
    elif arr.shape != (n,):
        raise DimensionError(f"{name}: expected a scalar or {n} values (one per {per}), "
                             f"got shape {arr.shape}")
    u = f" {unit}" if unit else ""
    if np.any(np.isnan(arr)):
        raise InputError(f"{name}: NaN in {arr.tolist()}")
    if positive and np.any(arr <= 0):
        raise InputError(f"{name}: expected values > 0{u}, got {arr.tolist()}")
    if not positive and np.any(arr < 0):
        raise InputError(f"{name}: expected values >= 0{u}, got {arr.tolist()}")
    arr.setflags(write=False)
    return arr


def check_gain_config(value, name: str, *, positive: bool = True):
    """Config-time check of a gain (scalar or sequence); the length is checked against the model
    later."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim > 1:
        raise DimensionError(f"{name}: expected a scalar or a 1-D sequence, got shape {arr.shape}")
    if (np.any(np.isnan(arr)) or (positive and np.any(arr <= 0))
            or (not positive and np.any(arr < 0))):
        bound = "> 0" if positive else ">= 0"
        raise InputError(f"{name}: expected values {bound}, got {arr.tolist()}")
    return float(arr) if arr.ndim == 0 else tuple(arr.tolist())


def inputs_from_generalized(model: MultibodyModel, tau, name: str = "effort") -> np.ndarray:
    """Inputs ``u`` (nu,) with ``B u = tau`` for a generalized force ``tau`` (nv,) the actuators
    can produce.

    Raises
    ------
    InputError
        If ``tau`` has a component the actuation cannot produce (e.g. on a passive joint).
    """
    tau = as_vector(tau, model.nv, name)
    B = np.asarray(model.B, float)
    u, *_ = np.linalg.lstsq(B, tau, rcond=None)
    if not np.allclose(B @ u, tau, atol=1e-9 * (1.0 + np.max(np.abs(tau)))):
        passive = ", ".join(model.passive_joint_names) or "-"
        raise InputError(f"{name}: {tau.tolist()} is not producible by the actuators (B u = "
                         f"effort has no solution; passive joints: {passive})")
    return u


class Controller(ABC):
    """Base of the control laws.

    Parameters
    ----------
    model : MultibodyModel
    config : ControllerConfig
    """

    config_type: type[ControllerConfig] = ControllerConfig

    def __init__(self, model: MultibodyModel, config: ControllerConfig):
        if not isinstance(config, self.config_type):
            raise InputError(f"{type(self).__name__}: expected a {self.config_type.__name__}, "
                             f"got {type(config).__name__}")
        self.model = model
        self.config = config
        self._B = np.asarray(model.B, float)

    @abstractmethod
    def step(self, t: float, q, v, reference: Reference) -> np.ndarray:
        """Inputs ``u`` (nu,) [N | N m] at time ``t`` [s] for the state (q (nq,), v (nv,))."""

    def reset(self) -> None:  # noqa: B027 -- stateless laws keep the default
        """Clear the internal state (integrators, last time)."""

    def tau(self, u) -> np.ndarray:
        """Generalized force ``B u`` (nv,) of inputs ``u`` (nu,)."""
        return self._B @ u

    def _state(self, q, v):
        return as_vector(q, self.model.nq, "q"), as_vector(v, self.model.nv, "v")


def require_fully_actuated(model: MultibodyModel, law: str) -> np.ndarray:
    """``B^-1`` (nv, nv) of a fully actuated model; :class:`ModelError` otherwise."""
    B = np.asarray(model.B, float)
    if B.shape[0] != B.shape[1] or np.linalg.matrix_rank(B) < B.shape[0]:
        passive = ", ".join(model.passive_joint_names) or "none"
        raise ModelError(f"{law}: needs a fully actuated model (B square and invertible); "
                         f"{model.name} has nv={model.nv}, nu={model.nu}, passive joints: "
                         f"{passive}")
    return np.linalg.inv(B)
