"""Old names kept working: renamed result fields and module attributes that left a module.

A result field renamed so that the result types agree (``docs/inversion-api.md``, "Result
fields") keeps its old name as a property that returns the new field and warns with a
:class:`DeprecationWarning` naming the new one (:func:`deprecated_alias`); a module attribute
that was replaced keeps its import path through the module's ``__getattr__`` (PEP 562,
:func:`module_getattr`), with the same warning. Nothing else of the project reads the old names.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any


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


def module_getattr(module: str, deprecated: Mapping[str, tuple[str, Callable[[], Any]]],
                   moved: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for attributes that left ``module``.

    Parameters
    ----------
    module : str
        The module's ``__name__`` (named in the messages).
    deprecated : mapping
        ``{old name: (what to use instead, getter)}``: ``getter()`` returns an object that keeps
        the old use working; each access warns with a :class:`DeprecationWarning` naming the
        replacement.
    moved : mapping, optional
        ``{old name: new place}`` for attributes the module cannot offer any more (moved to
        ``multibody_control``, which ``multibody_dynamics`` never imports, or replaced by data):
        accessing or importing one raises an :class:`ImportError` naming the new place (an
        ``AttributeError`` would be turned into a bare "cannot import name" by ``from ...
        import``).

    Returns
    -------
    callable
        To assign to the module's ``__getattr__``.
    """
    moved = dict(moved or {})

    def __getattr__(name: str) -> Any:
        if name in deprecated:
            use, getter = deprecated[name]
            warnings.warn(f"{module}.{name} is deprecated; use {use}", DeprecationWarning,
                          stacklevel=2)
            return getter()
        if name in moved:
            raise ImportError(f"{module}.{name} is no longer there: use {moved[name]}",
                              name=module)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
