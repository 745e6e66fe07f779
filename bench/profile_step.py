"""Where the compiled fixed step spends its time: each part of the kernel timed alone.

Not a suite of ``bench/run.py`` (nothing is written to bench/results.json): a diagnostic for
work on ``multibody_dynamics/fast_step.py``.  Each part runs N times in a compiled loop on the
state of the speed bench (after one projection), CPU time of the process, best of three:
the tree terms (kinematics, ``M`` and ``h``; ``M`` only as in the projection; the planar
kernel for a planar tree, as the step), the closure rows ``A`` and ``gamma``, the basis of the
row space of ``A`` (the rows themselves or the Jacobi SVD: ``_basis``), the Cholesky of ``M``,
the residual ``phi``, one constrained acceleration (``_fd_closed``: all of the above and the
Gauss-form solves) and one projection (``_project``: Newton test, velocity projection), then a
whole 10 s run without output.  An RK4 step is four accelerations and one projection pass
(more when a Newton iteration is needed).

Then the per-step API (``Simulator.step``, one call a step: the scenario runner's and
simulator_node's path) and its compiled entry alone against the whole-run kernel over the same
2000 steps.

``OPENBLAS_NUM_THREADS=1 python -m bench.profile_step`` (compiles the timing loop first, about
half a minute).
"""

from __future__ import annotations

import time

import numpy as np

from multibody_dynamics import load_model
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import Simulator, SimulatorConfig

PARTS = ("terms (M and h)", "terms (M only)", "closure rows", "basis of A", "Cholesky of M",
         "closure residual", "constrained acceleration", "projection")


def _loop():
    import numba

    from multibody_dynamics import fast_step as fs

    fs._compiled()
    terms, planar_terms, rows, basis, chol = (fs._terms, fs._terms_planar, fs._closure_rows,
                                              fs._basis, fs._chol)
    residual, fd, project, workspace = (fs._closure_residual, fs._fd_closed, fs._project,
                                        fs._workspace)

    # the parts without numba's reference counting, as the step loop fast_step._run
    @numba.njit(_nrt=False)
    def parts(part, N, q, v, tau, mdl, wk, par, sp, a, qq, vv):  # pragma: no cover - numba
        ji, jf, g, fi, ff, cl, cf, lphi, spring = mdl
        n = q.shape[0]
        M, nle, J, dJ, H, X, L, W = wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], wk[6], wk[7]
        A, gam, ws = wk[8], wk[9], wk[20]
        one, two = n * 0 + 1, n * 0 + 2  # int64 as in the step (one compiled _terms)
        planar = par[4] != 0.0  # the step's tree terms: those of a planar tree, or general
        s = terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, one, W)
        rows(v, J, dJ, H, cl, cf, A, gam, ws)
        for _ in range(N):
            if part == 0 or part == 1:
                need = one if part == 0 else two
                if planar:
                    s += planar_terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, need, W)
                else:
                    s += terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, need, W)
            elif part == 2:
                rows(v, J, dJ, H, cl, cf, A, gam, ws)
            elif part == 3:
                s += basis(A, wk, par)[0]
            elif part == 4:
                chol(M, L, n)
            elif part == 5:
                s += residual(H, cl, cf, lphi, wk[23])
            elif part == 6:
                s += fd(q, v, tau, mdl, wk, par, a, False, -1)[0]
            else:
                for i in range(n):
                    qq[i] = q[i]
                    vv[i] = v[i]
                s += project(qq, vv, mdl, wk, par, sp)[1]
        return s

    @numba.njit
    def loop(part, N, q, v, tau, ji, jf, g, fi, ff, cl, cf, lphi, spring, buf, ibuf, par,
             sp):  # pragma: no cover - numba
        n = q.shape[0]
        wk = workspace(buf, ibuf, n, cl[0, 5], fi.shape[0])
        return parts(part, N, q, v, tau, (ji, jf, g, fi, ff, cl, cf, lphi, spring), wk, par, sp,
                     np.empty(n), q.copy(), v.copy())

    return loop


def _best(fn, rounds=3):
    best = np.inf
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _profile(loop, name, model, q, v, n_calls):
    sim = Simulator(model, SimulatorConfig(dt=1e-3))
    sim.reset(q, v)
    fast = sim.fast_stepper()
    tau = np.zeros(model.nv)
    args = (sim.q, sim.v, tau, *fast.mdl, fast.par, fast.sp)
    for part, label in enumerate(PARTS):
        loop(part, 10, *args)
        t = _best(lambda part=part: loop(part, n_calls, *args))
        print(f"{name:13s} {label:26s} {t / n_calls * 1e9:8.0f} ns")
    none1, none2 = np.zeros(0), np.zeros((0, model.nv))
    t = _best(lambda: fast._run(sim.q.copy(), sim.v.copy(), tau, 0.0, 10000, 0, 0, 10000,
                                *fast.mdl, fast.par, fast.sp, fast.closed, none1, none2, none2,
                                none1, np.zeros((0, fast.m)), none1, none1, 0))
    print(f"{name:13s} {'RK4 step (10 s, no output)':26s} {t / 10000 * 1e9:8.0f} ns "
          f"({10.0 / t:.0f} simulated s per CPU s)")
    _step_calls(name, sim, q, v, tau)


def _step_calls(name, sim, q, v, tau, n=2000):
    """The per-step API against the whole-run kernel over the same ``n`` steps from (q, v):
    ``Simulator.step``, the compiled step entry alone (``FastStepper.step_kernel``, the state
    advanced in place, no copies) and the whole run (``_run``, nothing recorded)."""
    fast = sim.fast_stepper()
    none1, none2 = np.zeros(0), np.zeros((0, sim.model.nv))

    def whole():
        sim.reset(q, v)
        fast._run(sim.q.copy(), sim.v.copy(), tau, 0.0, n, 0, 0, n, *fast.mdl, fast.par,
                  fast.sp, fast.closed, none1, none2, none2, none1, np.zeros((0, fast.m)),
                  none1, none1, 0)

    def entry():
        sim.reset(q, v)
        qq, vv, kernel, ip, fp = sim.q.copy(), sim.v.copy(), fast.step_kernel, fast.ip, fast.fp
        for _ in range(n):
            kernel(qq, vv, tau, 0.0, 1e-3, ip, fp)

    def step():
        sim.reset(q, v)
        for _ in range(n):
            sim.step(tau)

    t_whole = _best(whole)
    for label, fn in (("step entry alone", entry), ("Simulator.step", step)):
        t = _best(fn)
        print(f"{name:13s} {label:26s} {t / n * 1e9:8.0f} ns ({t / t_whole:.2f} x the whole "
              f"run's {t_whole / n * 1e9:.0f} ns over the same {n} steps)")


def main(n_calls: int = 100000) -> None:
    loop = _loop()
    fb = load_model("four_bar")
    q0 = ProjectedDynamics(fb).project_position(np.array([0.5, 0.3, 1.5])).q
    _profile(loop, "four_bar", fb, q0, [3.0, 0.0, 0.0], n_calls)
    _profile(loop, "slider_crank", load_model("slider_crank"), [0.3, -0.6], [6.0, -12.0],
             n_calls)


if __name__ == "__main__":
    main()
