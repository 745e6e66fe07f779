"""Checks of a URDF file made before pinocchio reads it.

pinocchio accepts negative masses and non-physical inertias silently and its
parser errors are terse, so the XML is read once here to give messages that
name the file, the link and what was expected.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..errors import ModelError

_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _float_attr(elem, key, where, path):
    raw = elem.get(key)
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ModelError(f"{path}: {where}: attribute '{key}' must be a number, "
                         f"got {raw!r}") from None


def massless_links(root: ET.Element) -> list[str]:
    """Names of the links whose ``<inertial>`` has a mass of exactly zero.

    Real URDFs (UR5's ``ee_link``, Panda's ``panda_link8``) use such links as named frames;
    pinocchio loads them as bodies without inertia, and so does the suite (:func:`check_urdf`
    accepts them); the model's summary lists them.
    """
    names: list[str] = []
    for link in root.findall("link"):
        mass_el = link.find("inertial/mass")
        value = None if mass_el is None else mass_el.get("value")
        if value is None:
            continue
        try:
            if float(value) == 0.0:
                names.append(link.get("name") or "")
        except ValueError:
            continue  # check_urdf reports it
    return names


def check_urdf(path: Path) -> ET.Element:
    """Parse ``path`` and check every ``<inertial>``; return the XML root.

    A mass of exactly zero is a frame-only link (see :func:`massless_links`): it is accepted
    when its rotational inertia is zero too.

    Raises
    ------
    ModelError
        Missing or malformed file, no ``<robot>`` root, a negative mass, a zero mass with a
        non-zero inertia, or a rotational inertia that is not symmetric positive
        definite or violates the triangle inequality (not realizable by any body).
    """
    if not path.is_file():
        raise ModelError(f"{path}: URDF file not found")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ModelError(f"{path}: malformed XML ({exc})") from None
    if root.tag != "robot":
        raise ModelError(f"{path}: expected a <robot> root element, got <{root.tag}>")
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        where = f"link '{link.get('name')}' <inertial>"
        mass_el = inertial.find("mass")
        if mass_el is None:
            raise ModelError(f"{path}: {where}: missing <mass value=...> (kg)")
        mass = _float_attr(mass_el, "value", where, path)
        if not mass >= 0.0:
            raise ModelError(f"{path}: {where}: mass must be positive (kg), or zero for a "
                             f"frame-only link, got {mass}")
        inertia_el = inertial.find("inertia")
        if inertia_el is None:
            if mass == 0.0:
                continue
            raise ModelError(f"{path}: {where}: missing <inertia .../> (kg m^2)")
        ixx, ixy, ixz, iyy, iyz, izz = (_float_attr(inertia_el, k, where, path)
                                        for k in _INERTIA_KEYS)
        inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        if mass == 0.0:
            if np.any(inertia != 0.0):
                raise ModelError(
                    f"{path}: {where}: mass must be positive (kg) for a body with a rotational "
                    "inertia, got 0 (a frame-only link has mass 0 and inertia 0)"
                )
            continue
        eig = np.linalg.eigvalsh(inertia)
        if not eig[0] > 0.0:
            raise ModelError(
                f"{path}: {where}: rotational inertia must be positive definite (kg m^2), "
                f"got principal moments {np.round(eig, 12).tolist()}"
            )
        # Principal moments of a real body satisfy I1 + I2 >= I3 (up to rounding in the file).
        if eig[0] + eig[1] < eig[2] * (1.0 - 1e-6):
            raise ModelError(
                f"{path}: {where}: principal moments {np.round(eig, 9).tolist()} violate the "
                "triangle inequality I1 + I2 >= I3; no physical body has this inertia"
            )
    return root
