"""The compiled planar-tree dynamics (multibody_dynamics/fast_planar.py) against pinocchio.

Independent references: pinocchio's ``crba`` and ``nonLinearEffects`` on the shipped planar
arms and on a planar tree built here with rotated placements, a prismatic joint off the x
axis, a branch and in-plane gravity (every term the kernel reduces to three components); the
general 6-component kernel of fast_step for the zero-dynamics criterion that uses both.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from multibody_dynamics import load_model

pytest.importorskip("numba")
fast_planar = pytest.importorskip("multibody_dynamics.fast_planar")


def _planar_tree() -> pin.Model:
    """Prismatic joint along (0.6, 0.8) of a placement turned by 0.3 rad, three revolute joints
    about +z / -z with turned and offset placements, a branch (two children of one joint),
    levers and I_zz of their own, gravity in the plane and along z."""
    pm = pin.Model()
    rz = pin.utils.rotate("z", 0.3)
    j0 = pm.addJoint(0, pin.JointModelPrismaticUnaligned(np.array([0.6, 0.8, 0.0])),
                     pin.SE3(rz, np.array([0.1, -0.2, 0.05])), "slide")
    pm.appendBodyToJoint(j0, pin.Inertia(2.0, np.array([0.05, 0.0, 0.01]),
                                         np.diag([0.01, 0.02, 0.03])), pin.SE3.Identity())
    j1 = pm.addJoint(j0, pin.JointModelRZ(), pin.SE3(pin.utils.rotate("z", -0.7),
                                                     np.array([0.2, 0.1, 0.0])), "r1")
    pm.appendBodyToJoint(j1, pin.Inertia(1.5, np.array([0.3, -0.1, 0.02]),
                                         np.array([[0.02, 0.001, 0.002], [0.001, 0.03, 0.003],
                                                   [0.002, 0.003, 0.05]])), pin.SE3.Identity())
    j2 = pm.addJoint(j1, pin.JointModelRevoluteUnaligned(np.array([0.0, 0.0, -1.0])),
                     pin.SE3(pin.utils.rotate("z", 1.1), np.array([0.6, 0.0, 0.0])), "r2")
    pm.appendBodyToJoint(j2, pin.Inertia(0.8, np.array([0.2, 0.05, 0.0]),
                                         np.diag([0.003, 0.01, 0.012])), pin.SE3.Identity())
    j3 = pm.addJoint(j1, pin.JointModelRZ(), pin.SE3(np.eye(3), np.array([-0.3, 0.2, 0.0])),
                     "r3")  # a second child of r1
    pm.appendBodyToJoint(j3, pin.Inertia(0.5, np.array([0.1, 0.1, 0.0]),
                                         np.diag([0.002, 0.002, 0.004])), pin.SE3.Identity())
    pm.gravity.linear = np.array([1.2, -9.81, -3.0])
    return pm


def _compare(pm: pin.Model, states: int = 4):
    ji, jp = fast_planar.pack_planar(pm)
    terms = fast_planar.planar_terms()
    data = pm.createData()
    n = pm.nv
    rng = np.random.default_rng(5)
    for _ in range(states):
        q, v = rng.uniform(-2, 2, n), rng.normal(size=n) * 2
        M, nle = np.zeros((n, n)), np.zeros(n)
        terms(q, v, ji, jp, np.array(pm.gravity.linear), M, nle,
              np.zeros((n, fast_planar.PLANAR_WORK)), np.ones(n, np.int64))
        Mp = pin.crba(pm, data, q)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        hp = pin.nonLinearEffects(pm, data, q, v)
        # round-off of a few dozen products of numbers of order 1-10: 1e-13 of the largest
        np.testing.assert_allclose(M, Mp, rtol=0, atol=1e-13 * max(1.0, np.abs(Mp).max()))
        np.testing.assert_allclose(nle, hp, rtol=0, atol=1e-13 * max(1.0, np.abs(hp).max()))
        # only some rows wanted (a design study's passive joints): those rows, bit for bit
        for wanted in ([n - 1], [n // 2], [1, n - 1]):
            rows = fast_planar.wanted_rows(ji, wanted)
            Mw, hw = np.zeros((n, n)), np.zeros(n)
            terms(q, v, ji, jp, np.array(pm.gravity.linear), Mw, hw,
                  np.zeros((n, fast_planar.PLANAR_WORK)), rows)
            np.testing.assert_array_equal(Mw[wanted], M[wanted])
            np.testing.assert_array_equal(hw[wanted], nle[wanted])


@pytest.mark.parametrize("robot", ["passive_arm2", "passive_arm4", "passive_arm"])
def test_shipped_planar_arms_match_pinocchio(robot):
    _compare(load_model(robot).pin_model)


def test_general_planar_tree_matches_pinocchio():
    _compare(_planar_tree())


def test_wanted_rows_follow_the_tree_down():
    ji, _ = fast_planar.pack_planar(_planar_tree())  # slide -> r1 -> (r2, r3)
    np.testing.assert_array_equal(fast_planar.wanted_rows(ji, [1]), [0, 1, 1, 1])
    np.testing.assert_array_equal(fast_planar.wanted_rows(ji, [2]), [0, 0, 1, 0])
    np.testing.assert_array_equal(fast_planar.wanted_rows(ji, [0]), [1, 1, 1, 1])


def test_non_planar_trees_are_not_packed():
    pm = _planar_tree()
    tilted = pin.Model(pm)
    tilted.jointPlacements[2] = pin.SE3(pin.utils.rotate("x", 0.1), np.zeros(3))
    assert fast_planar.pack_planar(tilted) is None
    lifting = pin.Model(pm)
    lifting.addJoint(3, pin.JointModelPZ(), pin.SE3.Identity(), "lift")
    assert fast_planar.pack_planar(lifting) is None
    spinning = pin.Model(pm)
    spinning.addJoint(3, pin.JointModelRX(), pin.SE3.Identity(), "roll")
    assert fast_planar.pack_planar(spinning) is None
    free = pin.Model()
    free.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
    assert fast_planar.pack_planar(free) is None
    assert fast_planar.pack_planar(load_model("arm7").pin_model) is None
