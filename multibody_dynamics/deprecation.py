"""Old names kept working: renamed result fields and module attributes that left a module.

A result field renamed so that the result types agree (``docs/inversion-api.md``, "Result
fields") keeps its old name as a property that returns the new field and warns with a
:class:`DeprecationWarning` naming the new one (:func:`deprecated_alias`); a module attribute
that was replaced or moved keeps its import path through the module's ``__getattr__`` (PEP 562,
:func:`module_getattr`), with the same warning. Nothing else of the project reads the old names.

An attribute that moved to ``multibody_control`` (which ``multibody_dynamics`` never imports)
is named by its new dotted path and imported by :func:`forwarded` only when the old name is
used: importing a ``multibody_dynamics`` module loads nothing of ``multibody_control``, and
this module is the only one of ``multibody_dynamics`` that imports by name
(``test/test_architecture.py`` checks both).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from .errors import InputError


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


def forwarded(target: str) -> Callable[[], Any]:
    """A getter for :func:`module_getattr` that imports ``target`` when called.

    Parameters
    ----------
    target : str
        ``"package.module.attribute"``: the attribute's new place.

    Returns
    -------
    callable
        ``getter()`` imports ``package.module`` (on the first call only, as any import) and
        returns its ``attribute``: the same object as ``from package.module import attribute``.
    """
    module, _, attribute = target.rpartition(".")
    if not module or not attribute:
        raise InputError(f"target must be 'package.module.attribute', got {target!r}")

    def get() -> Any:
        return getattr(importlib.import_module(module), attribute)

    return get


def module_getattr(module: str,
                   deprecated: Mapping[str, str | tuple[str, Callable[[], Any]]],
                   moved: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for attributes that left ``module``.

    Parameters
    ----------
    module : str
        The module's ``__name__`` (named in the messages).
    deprecated : mapping
        ``{old name: (what to use instead, getter)}``: ``getter()`` returns an object that keeps
        the old use working; or ``{old name: "package.module.attribute"}`` for an attribute that
        moved there unchanged (the getter is :func:`forwarded`, the old name returns the very
        object of the new place). Each access warns with a :class:`DeprecationWarning` naming
        the replacement.
    moved : mapping, optional
        ``{old name: new place}`` for attributes the module cannot offer any more (removed, or
        replaced by something that does not keep the old use working): accessing or importing
        one raises an :class:`ImportError` naming the new place (an ``AttributeError`` would be
        turned into a bare "cannot import name" by ``from ... import``).

    Returns
    -------
    callable
        To assign to the module's ``__getattr__``.
    """
    entries = {name: (entry, forwarded(entry)) if isinstance(entry, str) else entry
               for name, entry in deprecated.items()}
    moved = dict(moved or {})

    def __getattr__(name: str) -> Any:
        if name in entries:
            use, getter = entries[name]
            warnings.warn(f"{module}.{name} is deprecated; use {use}", DeprecationWarning,
                          stacklevel=2)
            return getter()
        if name in moved:
            raise ImportError(f"{module}.{name} is no longer there: use {moved[name]}",
                              name=module)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
