"""The Python quick start of README.md as a script: ``python examples/readme_quickstart.py``.

A closed loop (the five-bar) through the projection-based dynamics, then the passive arm of
Seifried (2014) Sect. 4.2.7: inverse dynamics, the zero dynamics of its linearly combined
output and a stable inversion along a half circle.
"""

import numpy as np

from multibody_control.analysis import analyze_output
from multibody_control.inversion import invert
from multibody_control.outputs import Output
from multibody_control.tasks import half_circle_task
from multibody_dynamics import RigidDynamics, load_model
from multibody_dynamics.projection import ProjectedDynamics

five_bar = load_model("five_bar")            # closed loop: projection-based dynamics
pd = ProjectedDynamics(five_bar)
q0 = pd.project_position(np.array([1.2, -1.0, 1.9, 1.0])).q   # assemble the loop (Newton)
res = pd.forward_dynamics_result(q0, np.zeros(4), np.zeros(4)) # a, constraint force, lambda
print("five_bar assembled at q0 =", np.round(q0, 6))
print("  accelerations at rest [rad/s^2]:", np.round(res.a, 6))

arm = load_model("passive_arm")              # Seifried (2014) Sect. 4.2.7, one passive joint
tau = RigidDynamics(arm).inverse_dynamics(arm.neutral(), np.zeros(arm.nv), np.ones(arm.nv))
print("passive_arm: generalized forces for unit accelerations [N | N m]:", np.round(tau, 4))
y = Output.combined(arm, [[0], [0], [0.5]])  # y = [x, alpha1, alpha2 + beta/2]
print(analyze_output(arm, y).format())       # non-minimum phase: eigenvalues -24.8, +28.3
ff = invert(arm, y, half_circle_task(), "stable")   # pre- and post-actuation, bounded
print(f"stable inversion: {'ok' if ff.success else 'FAILED'} - {ff.message}; "
      f"{ff.t.size} samples from {ff.t[0]:.3g} s to {ff.t[-1]:.3g} s, "
      f"peak |u| {np.max(np.abs(ff.u)):.4g} N | N m")
