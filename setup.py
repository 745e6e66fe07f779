"""multibody_suite: one setup.py for `colcon build` (ament_python) and for `pip install`.

Under colcon (AMENT_PREFIX_PATH set) the Python dependencies come from rosdep
(package.xml), so install_requires lists only setuptools: Humble's console
scripts refuse to start when an install_requires entry is not a pip
distribution.  Without ROS, pip installs the numeric stack from PyPI
(pinocchio as the ``pin`` wheel).
"""

import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "multibody_suite"
CORE = ["numpy>=1.24", "scipy>=1.10", "pyyaml>=6", "pin>=3.0", "matplotlib>=3.6", "tqdm>=4.60",
        "numba>=0.59",  # compiled fast path of projection.py (optional at import)
        # `multibody design`: particle swarm (0.6.2, tested: the seed drives the algorithm's own
        # generator, which checkpoints with it) and the Dask executor
        "pymoo>=0.6.2", "dask[distributed]>=2024.1",
        # one BLAS thread per process of a local pool (design/executors.py)
        "threadpoolctl>=3.1"]
ROS = [  # real ROS 2 from PyPI (rclpy + messages + Fast DDS), used where no ROS install exists
    "ros-rclpy", "ros-std-msgs", "ros-sensor-msgs", "ros-trajectory-msgs", "ros-rosgraph-msgs",
    "ros-builtin-interfaces", "ros-action-msgs", "ros-geometry-msgs", "ros-diagnostic-msgs",
    "ros-rmw-fastrtps-cpp", "ros-std-srvs",
]
under_ament = bool(os.environ.get("AMENT_PREFIX_PATH"))


def tree(folder):
    """data_files entries installing ``folder`` (recursively) under share/<package>/."""
    entries = {}
    for path in glob(f"{folder}/**/*", recursive=True):
        if os.path.isfile(path):
            target = os.path.join("share", PACKAGE, os.path.dirname(path))
            entries.setdefault(target, []).append(path)
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*", "bench", "tools"]),
    package_data={"multibody_control.animation": ["player.js", "vendor/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("config"),
        *tree("urdf"),
    ],
    python_requires=">=3.10",
    install_requires=["setuptools"] if under_ament else ["setuptools", *CORE],
    extras_require={
        "test": ["pytest>=7", "hypothesis>=6", "catkin_pkg>=0.5", "xacro",
                 "example-robot-data",  # real robot URDFs (test_real_robots.py)
                 "mujoco>=3.0",  # MuJoCo's own model of the MJCF test files (test_mjcf.py)
                 "imageio-ffmpeg>=0.4",  # the video extra: MP4 written and decoded in tests
                 "pytest-xdist>=3"],  # `make test` runs the library tests in two processes
        "ros": ROS,
        # MP4 animations without a system ffmpeg: the wheel's static ffmpeg binary
        "video": ["imageio-ffmpeg>=0.4"],
        "dev": ["ruff", "mypy", "types-PyYAML", "mkdocs-material"],  # lint, types, `make docs`
        # `make bench` only: the peer simulators of bench/bench_peers.py (never imported by
        # the library; the bench records a missing one as "not installed")
        "bench": ["mujoco>=4.0", "exudyn>=1.13", "drake>=1.51"],
    },
    zip_safe=True,
    maintainer="multibody_suite maintainers",
    maintainer_email="dev@multibody-suite.invalid",
    description="Dynamics and control of closed-loop, underactuated and flexible robots (ROS 2)",
    license="BSD-3-Clause",
    entry_points={
        "console_scripts": [
            "multibody = multibody_control.cli:main",
            "simulator_node = multibody_dynamics.ros.simulator_node:main",
            "dynamics_node = multibody_dynamics.ros.dynamics_node:main",
            "controller_node = multibody_control.ros.controller_node:main",
            "inverter_node = multibody_control.ros.inverter_node:main",
        ],
    },
)
