"""Modal data of one planar flexible body (the "standard input data", SID) and its file format.

The floating frame of reference formulation needs the volume integrals of Seifried (2014)
eqs. (2.110)-(2.122) as functions of the elastic coordinates ``q_e`` (nq,). They are stored in
the Taylor form of eq. (2.128), ``X(q_e) = X0 + sum_i X1_i q_e,i``, which for the linear Ritz
approach ``r = r0 + Phi q_e`` (eq. 2.100) is exact for every integral except the inertia, whose
quadratic term ``q_e^T M_e q_e`` is exact as well in the plane and needs no extra data.

Planar specialisation (bending in the x-y plane of the reference frame K_R, rotation about z):
``J = [[0, -1], [1, 0]]`` plays the role of ``omega~`` per unit angular velocity, ``r~^T r~``
reduces to ``|r|^2`` and every 3x3 inertia block to its zz entry.

============  ==========  ====================================================================
key           shape       meaning (dm = rho dV; units for mass-normalised ``q_e``)
============  ==========  ====================================================================
format_version ()         int, currently 1
mass          ()          m = int dm [kg]  (2.111)
mc0           (2,)        m c(0) = int r0 dm [kg m]  (2.113); the linear term is ``Ct.T``
Ct            (nq, 2)     C_t = int Phi^T dm  (2.115); ``m c(q_e) = mc0 + Ct.T q_e``
I0            ()          I_zz(0) = int |r0|^2 dm about the frame origin [kg m^2]  (2.112)
I1            (nq,)       linear term 2 int r0^T Phi dm; ``I_zz = I0 + I1 q + q^T Me q``
Cr0           (nq,)       C_r(0) = int Phi^T J r0 dm  (2.116)
Cr1           (nq, nq)    int Phi^T J Phi dm (skew); ``C_r(q_e) = Cr0 + Cr1 q_e``
Me            (nq, nq)    M_e = int Phi^T Phi dm, symmetric positive definite  (2.114)
Ke            (nq, nq)    K_e, symmetric positive semi-definite [N/m per q^2]  (2.124)
De            (nq, nq)    D_e (e.g. Rayleigh alpha Me + beta Ke), symmetric PSD [N s/m]
Komega        (nq, nq)    centrifugal geometric stiffness per unit Omega^2 (see below), sym.
node_positions (nn, 2)    undeformed node positions r0 in K_R [m]
node_shapes   (nn, 3, nq) (u_x, u_y, theta) of each node per unit q_e (output points)
============  ==========  ====================================================================

Derived gyroscopic terms (Seifried 2014, eqs. 2.117-2.122, with the errata): ``G_e = 2 Cr1``
(2.122, planar), ``G_r omega`` (2.119 erratum) equals ``dI_zz/dt omega`` in the plane, and the
centrifugal term of ``h_omega,e`` (2.121) is ``omega^2 o_e(q_e)`` with
``o_e = -(I1 / 2 + Me q_e)``. That is ``omega^T O_e^k omega`` with ``O_e^k = int phi~_k r~ dm``:
the *opposite* sign of the printed ``int phi~_k r~^T dm`` (2.122). Derivation: the k-th row of
``int Phi^T omega~ omega~ r dm`` is ``int phi_k^T omega~ omega~ r dm
= -omega^T (int phi~_k r~^T dm) omega``. The rotating-beam test confirms it: with the corrected
sign a clamped beam spinning about z softens in-plane (``omega^2 = omega_0^2 - Omega^2`` for
bending modes, the known linear FFR result) and, with the geometric stiffening below, matches
published rotating-beam frequencies; the printed sign would stiffen by ``+Omega^2`` instead.

``Komega`` (not among Seifried's printed integrals; it is the centrifugal part of the nonlinear
stiffness (2.125), Wallrapp and Schwertassek's geometric stiffening) is
``int rho A (l^2 - x^2)/2 w'^T w' dx`` for a beam clamped at the frame origin along x: the
axial foreshortening ``-1/2 int_0^x w'^2`` of a bent beam lowers ``int x u_x dm`` and adds
``-1/2 Omega^2 q^T Komega q`` to the kinetic energy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ..errors import DimensionError, InputError, ModelError
from .beam import _GAUSS_W, _GAUSS_XI, DOFS_PER_NODE, _stepped_gauss_shapes, gauss_shapes
from .modal import ModalBasis

__all__ = ["FORMAT_VERSION", "KEYS", "ModalData", "modal_data_from_beam", "save_modal_data",
           "load_modal_data", "stepped_element_fields"]

FORMAT_VERSION = 1
#: Keys of a version-1 modal data file, in documentation order.
KEYS = ("format_version", "mass", "mc0", "Ct", "I0", "I1", "Cr0", "Cr1", "Me", "Ke", "De",
        "Komega", "node_positions", "node_shapes")

def _shapes(nq: int, nn: int) -> dict[str, tuple[int, ...]]:
    return {"mass": (), "mc0": (2,), "Ct": (nq, 2), "I0": (), "I1": (nq,), "Cr0": (nq,),
            "Cr1": (nq, nq), "Me": (nq, nq), "Ke": (nq, nq), "De": (nq, nq),
            "Komega": (nq, nq), "node_positions": (nn, 2), "node_shapes": (nn, 3, nq)}


def _failer(source):
    def fail(key, why):
        raise ModelError(f"{source}: key {key!r}: {why}")

    return fail


def _check_arrays(arrays: dict, fail, keys, scalars: dict[str, int], shapes_fn,  # noqa: C901
                  symmetric, definite) -> dict[str, np.ndarray]:
    """The checks every modal data file gets (planar and spatial): all ``keys`` present, the
    integer ``scalars`` equal to their expected values, the other arrays numeric and finite
    with the shapes of ``shapes_fn(nq, nn)``, mass > 0, the ``symmetric`` keys symmetric, the
    ``definite`` ones positive definite, K_e and D_e positive semi-definite."""
    missing = [k for k in keys if k not in arrays]
    if missing:
        fail(missing[0], f"missing (all missing keys: {missing}; expected keys {list(keys)})")
    for key, expected in scalars.items():
        value = np.asarray(arrays[key])
        if value.shape != () or not np.issubdtype(value.dtype, np.integer):
            fail(key, f"expected an integer scalar, got {value!r}")
        if int(value) != expected:
            what = "version" if key == "format_version" else "value"
            fail(key, f"unsupported {what} {int(value)}, expected {expected}")
    out = {}
    for key in keys:
        if key in scalars:
            continue
        try:
            out[key] = np.array(arrays[key], dtype=float)
        except (TypeError, ValueError):
            fail(key, "not a numeric array")
        if not np.all(np.isfinite(out[key])):
            fail(key, "contains NaN or inf")
    me = out["Me"]
    if me.ndim != 2 or me.shape[0] != me.shape[1] or me.shape[0] < 1:
        fail("Me", f"expected a square (nq, nq) matrix with nq >= 1, got shape {me.shape}")
    nq = me.shape[0]
    pos = out["node_positions"]
    nn = pos.shape[0] if pos.ndim == 2 else -1
    for key, shape in shapes_fn(nq, nn).items():
        if out[key].shape != shape:
            fail(key, f"expected shape {shape} (nq={nq}, nn=number of nodes), "
                      f"got {out[key].shape}")
    if out["mass"] <= 0.0:
        fail("mass", f"must be > 0, got {float(out['mass'])}")
    for key in symmetric:
        a = out[key]
        if np.abs(a - a.T).max() > _tol(a):
            fail(key, f"not symmetric (max |A - A^T| = {np.abs(a - a.T).max():.3g})")
    for key in definite:
        lam = np.linalg.eigvalsh(out[key])
        if lam.min() <= 1e-12 * lam.max():
            fail(key, f"not positive definite (smallest eigenvalue {lam.min():.3g})")
    for key in ("Ke", "De"):
        lam = np.linalg.eigvalsh(out[key])
        if lam.min() < -1e-9 * max(abs(lam).max(), np.finfo(float).tiny):
            fail(key, f"has a negative eigenvalue {lam.min():.3g}; expected positive "
                      "semi-definite")
    return out


def _tol(a):
    return 1e-8 * max(np.abs(a).max(), np.finfo(float).tiny)


def _check(arrays: dict, source: str) -> dict[str, np.ndarray]:
    """Validate raw arrays; return float copies. Raises ModelError naming source and key."""
    fail = _failer(source)
    out = _check_arrays(arrays, fail, KEYS, ModalData._TAGS, _shapes,
                        ("Me", "Ke", "De", "Komega"), ("Me",))
    if out["I0"] <= 0.0:
        fail("I0", f"must be > 0, got {float(out['I0'])}")
    if np.abs(out["Cr1"] + out["Cr1"].T).max() > _tol(out["Cr1"]):
        fail("Cr1", "not skew-symmetric")
    return out


class _ModalDataBase:
    """What the planar :class:`ModalData` and the spatial ``ModalData3D`` share: validation on
    construction, the elastic coordinate count, the ``q_e`` check and the ``.npz`` arrays.

    A subclass is a frozen dataclass whose fields are the float keys of its file format plus the
    integer tags ``_TAGS`` (key -> value written), and names its validator ``_validate``
    (``(arrays, source) -> dict``, ModelError naming source and key).
    """

    _TAGS: ClassVar[dict[str, int]]

    @staticmethod
    def _validate(arrays: dict, source: str) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def __post_init__(self):
        arrays = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in self._TAGS:
            arrays[key] = np.asarray(arrays[key])
        checked = self._validate(arrays, type(self).__name__)
        for key, value in checked.items():
            value.setflags(write=False)
            object.__setattr__(self, key, float(value) if value.shape == () else value)

    @property
    def nq(self) -> int:
        """Number of elastic coordinates."""
        return self.Me.shape[0]

    def _q(self, q_e, name: str = "q_e") -> np.ndarray:
        """``q_e`` as a float array of shape (nq,).

        A wrong shape raises :class:`~multibody_dynamics.errors.DimensionError` (the class of
        the hierarchy for every wrong-shape argument, "the message states the expected
        shape"), for the planar data as for the spatial; the planar data raised ``InputError``
        before they shared this check. Both subclass ``ValueError``, which is what callers
        catch across the suite.
        """
        q_e = np.asarray(q_e, float)
        if q_e.shape != (self.nq,):
            raise DimensionError(f"{name} must have shape ({self.nq},), got {q_e.shape}")
        return q_e

    @classmethod
    def _save(cls, path: str | os.PathLike, data) -> None:
        """Write ``data`` (an instance of ``cls``, InputError otherwise) as one ``.npz`` file."""
        if not isinstance(data, cls):
            raise InputError(f"data must be a {cls.__name__}, got {type(data).__name__}")
        with open(path, "wb") as fh:  # open ourselves so numpy does not append a second ".npz"
            np.savez(fh, **data.arrays())

    @classmethod
    def _load(cls, path: str | os.PathLike):
        """Read and validate the ``.npz`` file at ``path`` (ModelError naming file and key)."""
        path = os.fspath(path)
        return cls(**cls._validate(_read_npz(path), path))

    def arrays(self) -> dict[str, np.ndarray]:
        """All keys as arrays, ready for :func:`numpy.savez`."""
        out = {f.name: np.asarray(getattr(self, f.name), float)
               for f in fields(self) if f.name not in self._TAGS}
        for key, value in self._TAGS.items():
            out[key] = np.asarray(value, dtype=np.int64)
        return out


@dataclass(frozen=True, eq=False)
class ModalData(_ModalDataBase):
    """Taylor-expanded mass integrals, stiffness and damping of one planar flexible body.

    Fields are the keys of the file format (see the module docstring for shapes, units and
    equations). Construction validates them (:class:`ModelError` naming the key); a ``q_e`` of
    the wrong shape given to a method raises :class:`DimensionError` with the expected shape.
    """

    mass: float
    mc0: np.ndarray
    Ct: np.ndarray
    I0: float
    I1: np.ndarray
    Cr0: np.ndarray
    Cr1: np.ndarray
    Me: np.ndarray
    Ke: np.ndarray
    De: np.ndarray
    Komega: np.ndarray
    node_positions: np.ndarray
    node_shapes: np.ndarray
    format_version: int = FORMAT_VERSION

    _TAGS: ClassVar[dict[str, int]] = {"format_version": FORMAT_VERSION}
    _validate = staticmethod(_check)

    def first_moment(self, q_e) -> np.ndarray:
        """``m c(q_e) = mc0 + Ct^T q_e`` (2,) [kg m] in K_R (Seifried 2014 eq. 2.113)."""
        return self.mc0 + self.Ct.T @ self._q(q_e)

    def inertia(self, q_e, second_order: bool = True) -> float:
        """``I_zz(q_e)`` about the frame origin [kg m^2] (eq. 2.112, zz entry).

        ``second_order=False`` drops the exact quadratic term ``q^T Me q`` (first-order
        Taylor form (2.128) only).
        """
        q = self._q(q_e)
        out = self.I0 + self.I1 @ q
        return out + q @ self.Me @ q if second_order else out

    def Cr(self, q_e) -> np.ndarray:
        """``C_r(q_e) = Cr0 + Cr1 q_e`` (nq,) (eq. 2.116, z column)."""
        return self.Cr0 + self.Cr1 @ self._q(q_e)

    @property
    def Ge(self) -> np.ndarray:
        """Elastic gyroscopic matrix ``G_e = 2 int Phi^T J Phi dm`` (nq, nq) (eq. 2.122)."""
        return 2.0 * self.Cr1

    def centrifugal(self, q_e, second_order: bool = True) -> np.ndarray:
        """``o_e(q_e)`` (nq,): ``omega^T O_e^k omega = omega_z^2 o_e[k]`` (eq. 2.121).

        Sign corrected with respect to the printed (2.122): ``o_e = -(I1/2 + Me q_e)``, i.e.
        ``int Phi^T omega~ omega~ r dm``. ``second_order=False`` drops ``Me q_e`` consistently
        with :meth:`inertia`.
        """
        q = self._q(q_e)
        out = -0.5 * self.I1
        return out - self.Me @ q if second_order else out


def stepped_element_fields(basis: ModalBasis) -> dict[str, np.ndarray]:
    """The mode fields of a beam at the Gauss points of every element, batched.

    Returns ``"u", "w", "theta", "dw"`` (n, 5, nq) per unit ``q_e`` (m, m, rad, -), ``"x"``
    (n, 5) [m] the Gauss points, ``"wg"`` (5,) [m] the weights, ``"rho_a"``, ``"rho_i"``
    (n,) [kg/m], [kg m] per element (``rho_i`` zero without rotary inertia).
    """
    beam = basis.beam
    cfg = beam.config
    n, h = cfg.n_elements, cfg.element_length
    sh = _stepped_gauss_shapes(cfg)
    dofs = DOFS_PER_NODE * np.arange(n)[:, None] + np.arange(2 * DOFS_PER_NODE)[None, :]
    pe = basis.Phi[dofs]  # (n, 6, nq)
    out = {k: np.einsum("ngi,niq->ngq", sh[k], pe) for k in ("u", "w", "theta", "dw")}
    secs = [cfg.element_section(e) for e in range(n)]
    out["rho_a"] = np.array([s.rho * s.A for s in secs])
    out["rho_i"] = (np.array([s.rho * s.I for s in secs]) if cfg.rotary_inertia
                    else np.zeros(n))
    out["x"] = beam.nodes[:-1, None] + _GAUSS_XI[None, :] * h
    out["wg"] = _GAUSS_W * h
    return out


def _stepped_integrals(basis: ModalBasis):
    """The mass integrals of :func:`modal_data_from_beam` for a stepped beam, batched over the
    elements (each with its own section): mass, mx, I0, Ct, I1, Cr0, Cr1 (unsymmetrised), Me,
    Komega (unsymmetrised)."""
    f = stepped_element_fields(basis)
    u, w, th, dw = f["u"], f["w"], f["theta"], f["dw"]
    ra, ri, x, wg = f["rho_a"], f["rho_i"], f["x"], f["wg"]
    nodes = basis.beam.nodes
    wa = ra[:, None] * wg[None, :]  # (n, 5): rho A dx at each Gauss point
    wi = ri[:, None] * wg[None, :]

    def gram(weight, a, b):
        return np.einsum("ng,ngp,ngq->pq", weight, a, b)

    mass = float(wa.sum())
    mx = float((wa * x).sum())
    i0 = float((wa * x**2 + wi).sum())
    ct = np.column_stack([np.einsum("ng,ngq->q", wa, u), np.einsum("ng,ngq->q", wa, w)])
    i1 = 2.0 * np.einsum("ng,ngq->q", wa * x, u)
    cr0 = np.einsum("ng,ngq->q", wa * x, w) + np.einsum("ng,ngq->q", wi, th)
    cr1 = gram(wa, w, u) - gram(wa, u, w)
    me = gram(wa, u, u) + gram(wa, w, w) + gram(wi, th, th)
    # centrifugal axial force per unit Omega^2 at x: int_x^l rho A s ds, element-wise
    own = 0.5 * ra * (nodes[1:] ** 2 - nodes[:-1] ** 2)
    beyond = np.concatenate([np.cumsum(own[::-1])[::-1][1:], [0.0]])
    pull = ra[:, None] * 0.5 * (nodes[1:, None] ** 2 - x**2) + beyond[:, None]
    kom = gram(pull * wg[None, :], dw, dw)
    return mass, mx, i0, ct, i1, cr0, cr1, me, kom


class _ElementSums:
    """Running sums of the planar mass integrals over beam elements by Gauss quadrature:
    ``m``, ``int x dm``, ``I0``, ``Ct``, ``I1``, ``Cr0`` and the unsymmetrised ``Cr1``
    (Seifried 2014 eqs. 2.112-2.116), for :func:`modal_data_from_beam` and the closed chain's
    arm (which adds lumped masses to the same sums).

    Parameters
    ----------
    nq : int
        Number of elastic coordinates.
    """

    def __init__(self, nq: int):
        self.mass, self.mx, self.i0 = 0.0, 0.0, 0.0
        self.ct = np.zeros((nq, 2))
        self.i1, self.cr0 = np.zeros(nq), np.zeros(nq)
        self.cr1 = np.zeros((nq, nq))

    def add(self, u, w, th, x, wg, rho_a, rho_i) -> None:
        """Add one element: its mode fields ``u, w, th`` (5, nq) at the Gauss points ``x`` (5,)
        [m] with weights ``wg`` (5,) [m], line density ``rho_a`` [kg/m] and section inertia
        ``rho_i`` [kg m] (zero without rotary inertia)."""
        self.mass += rho_a * wg.sum()
        self.mx += rho_a * wg @ x
        self.i0 += wg @ (rho_a * x**2 + rho_i)
        self.ct[:, 0] += rho_a * wg @ u
        self.ct[:, 1] += rho_a * wg @ w
        self.i1 += 2.0 * rho_a * (wg * x) @ u
        self.cr0 += (wg * rho_a * x) @ w + rho_i * wg @ th
        self.cr1 += rho_a * (w.T @ (wg[:, None] * u) - u.T @ (wg[:, None] * w))


def modal_data_from_beam(basis: ModalBasis) -> ModalData:
    """Mass integrals of a beam body by consistent (Gauss) integration over its elements.

    The beam lies along x of K_R from the frame origin; each cross-section point at height eta
    moves by ``(u - eta theta, w)`` with the element interpolations of
    :mod:`~multibody_dynamics.flexible.beam`, so the integrals use the same shape functions as
    the consistent mass matrix (and ``Me`` equals ``Phi^T M Phi`` to rounding). Section terms
    ``int eta^2 dm`` = ``rho I`` per length enter only if the beam has rotary inertia. A
    stepped beam (``config.sections``) is integrated with each element's own section.

    Parameters
    ----------
    basis : ModalBasis
        Modes of a beam, normally clamped at x = 0 (tangent frame).

    Returns
    -------
    ModalData
    """
    beam = basis.beam
    cfg = beam.config
    nq = basis.n_modes
    if not cfg.uniform:
        mass, mx, i0, ct, i1, cr0, cr1, me, kom = _stepped_integrals(basis)
    else:
        s = cfg.section
        h, phi_s, length = cfg.element_length, cfg.shear_parameter(), cfg.length
        rho_a = s.rho * s.A
        rho_i = s.rho * s.I if cfg.rotary_inertia else 0.0
        sh = gauss_shapes(h, phi_s)
        sums = _ElementSums(nq)
        me, kom = np.zeros((nq, nq)), np.zeros((nq, nq))
        for e in range(cfg.n_elements):
            pe = basis.Phi[DOFS_PER_NODE * e:DOFS_PER_NODE * e + 6]
            x = beam.nodes[e] + _GAUSS_XI * h
            wg = _GAUSS_W * h
            u, w, th, dw = (sh[k] @ pe for k in ("u", "w", "theta", "dw"))
            sums.add(u, w, th, x, wg, rho_a, rho_i)
            me += rho_a * (u.T @ (wg[:, None] * u) + w.T @ (wg[:, None] * w))
            me += rho_i * th.T @ (wg[:, None] * th)
            kom += dw.T @ ((wg * rho_a * 0.5 * (length**2 - x**2))[:, None] * dw)
        mass, mx, i0 = sums.mass, sums.mx, sums.i0
        ct, i1, cr0, cr1 = sums.ct, sums.i1, sums.cr0, sums.cr1
    nodes = np.column_stack([beam.nodes, np.zeros_like(beam.nodes)])
    node_shapes = basis.Phi.reshape(-1, DOFS_PER_NODE, nq)
    return ModalData(
        mass=mass, mc0=np.array([mx, 0.0]), Ct=ct, I0=i0, I1=i1, Cr0=cr0,
        Cr1=0.5 * (cr1 - cr1.T), Me=0.5 * (me + me.T), Ke=basis.Ke, De=basis.De,
        Komega=0.5 * (kom + kom.T), node_positions=nodes, node_shapes=node_shapes,
    )


def save_modal_data(path: str | os.PathLike, data: ModalData) -> None:
    """Write ``data`` as one ``.npz`` file with the keys of :data:`KEYS` (format version 1)."""
    ModalData._save(path, data)


def load_modal_data(path: str | os.PathLike) -> ModalData:
    """Read and validate a modal data file written by :func:`save_modal_data` or by hand.

    External finite element data may be brought in this way: write the keys of the module
    docstring (SI units, K_R coordinates) with ``numpy.savez``.

    Raises
    ------
    ModelError
        Unreadable file, missing key, wrong version, shape, symmetry or definiteness; the
        message names the file and the key.
    """
    return ModalData._load(path)


def _read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of a modal data ``.npz`` file (ModelError naming the file if unreadable)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except FileNotFoundError as exc:
        raise ModelError(f"{path}: modal data file not found") from exc
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: not a readable .npz modal data file ({exc})") from exc
