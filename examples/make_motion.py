"""Write ``motion.csv``: a joint trajectory of the shipped 7-joint arm ``arm7``.

``python examples/make_motion.py [OUT.csv]`` (default: ``motion.csv`` beside this script).
The arm goes rest to rest (quintic) from a bent start to a second pose between 0.25 s and
2.25 s, sampled every 10 ms for 2.5 s.  The CSV has the columns the suite reads for a joint
trajectory: ``t`` [s], ``q.<joint>`` [rad], ``v.<joint>`` [rad/s], ``a.<joint>`` [rad/s^2]
(velocities and accelerations are optional in such files: without them they come from a
smoothing spline of the positions).
"""

import sys
from pathlib import Path

import numpy as np

from multibody_control.trajectories import rest_to_rest
from multibody_dynamics import load_model

START = [0.0, 0.3, 0.0, -1.2, 0.0, 0.9, 0.0]       # rad
END = [0.8, -0.2, 0.5, -0.6, 0.4, 0.3, -0.5]       # rad


def main(out: Path) -> Path:
    names = load_model("arm7").coordinate_names
    t = np.round(np.arange(0.0, 2.5 + 1e-9, 0.01), 10)
    motion = rest_to_rest(t, START, END, 0.25, 2.25, order=5)
    header = ["t"] + [f"{p}.{n}" for p in "qva" for n in names]
    data = np.column_stack([t, motion.q, motion.v, motion.a])
    np.savetxt(out, data, delimiter=",", header=",".join(header), comments="", fmt="%.10g")
    return out


if __name__ == "__main__":
    path = main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("motion.csv"))
    print(f"wrote {path}")
