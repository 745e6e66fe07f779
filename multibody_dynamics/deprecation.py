"""Read-only aliases for renamed result fields.

A result field renamed so that the result types agree (``docs/inversion-api.md``, "Result
fields") keeps its old name as a property that returns the new field and warns with a
:class:`DeprecationWarning` naming the new one; nothing else of the project reads the old names.
"""

from __future__ import annotations

import warnings


def deprecated_alias(new: str, old: str) -> property:
    """A read-only property ``old`` returning the field ``new`` with a DeprecationWarning.

    Parameters
    ----------
    new : str
        The field's current name.
    old : str
        The name it replaces (the property's name in the class body).

    Returns
    -------
    property
        Without a setter: assigning the old name raises ``AttributeError``, as for a field of
        a frozen dataclass.
    """

    def get(self):
        warnings.warn(f"{type(self).__name__}.{old} is deprecated; use .{new}",
                      DeprecationWarning, stacklevel=2)
        return getattr(self, new)

    get.__name__ = old
    get.__doc__ = f"Deprecated alias of ``{new}`` (read-only)."
    return property(get)
