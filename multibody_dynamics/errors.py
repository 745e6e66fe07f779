"""Exception hierarchy of the suite.

Every error raised on purpose derives from :class:`MultibodyError` and from the
builtin that describes its nature, so callers may catch either
(``except ValueError`` keeps working for bad input).
"""


class MultibodyError(Exception):
    """Base class of every error raised by multibody_suite on purpose."""


class ModelError(MultibodyError, ValueError):
    """A robot description (URDF or model YAML) is missing, malformed or inconsistent."""


class FrameNotFound(ModelError, KeyError):
    """A frame or joint name does not exist in the model; the message lists the valid names."""

    def __str__(self):  # KeyError would otherwise quote the whole message
        return str(self.args[0]) if self.args else ""


class DimensionError(MultibodyError, ValueError):
    """An array argument has the wrong shape; the message states the expected shape."""


class InputError(MultibodyError, ValueError):
    """An argument has the right shape but an invalid value (NaN, negative mass, ...)."""


class SolverError(MultibodyError, RuntimeError):
    """A numerical procedure could not produce a result (singular matrix, divergence)."""
