"""Frozen dataclasses that are quick to build.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` (the class's own ``__setattr__`` refuses), some three times the
cost of a plain class's. A big check builds tens of thousands of them (classes, fields,
members, requirements), so :func:`quick_init` gives such a class an ``__init__`` that
fills the new instance's ``__dict__`` in one step, with the same parameters, defaults
and default factories, and pickles it as its class and field values (loading then calls
that ``__init__``: twice as fast as restoring the instance dict). Everything else stays
the dataclass's own: assigning a field still raises ``FrozenInstanceError``, and
equality, hashing, ``repr`` and ``dataclasses.replace`` are unchanged.
"""

from __future__ import annotations

import dataclasses
import operator

TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, TypeVar

    T = TypeVar("T")

_UNSET = object()


def quick_init(cls: type[T]) -> type[T]:
    """Replace the generated ``__init__`` of the frozen dataclass ``cls`` (see above)."""
    params = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        not getattr(cls, "__dataclass_params__").frozen  # noqa: B009 - not in the stubs
        or hasattr(cls, "__post_init__")
        or "__slots__" in cls.__dict__
        or any(not f.init for f in params)
    ):
        raise TypeError(f"quick_init takes a frozen dataclass with plain fields: {cls!r}")
    names: dict[str, Any] = {"_UNSET": _UNSET}
    positional: list[str] = []
    keyword: list[str] = []
    values: list[str] = []
    for f in params:
        value = f.name
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            spec = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            spec = f"{f.name}=_UNSET"
            value = f"_factory_{f.name}() if {f.name} is _UNSET else {f.name}"
        else:
            spec = f.name
        (keyword if f.kw_only else positional).append(spec)
        values.append(f"{f.name!r}: {value}")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n    self.__dict__.update({{{', '.join(values)}}})\n"
    exec(source, names)  # noqa: S102 - our own text, built from the field names
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    if not keyword and len(params) > 1:
        # Pickled as the class and its field values, unpickled by the quick __init__
        # (faster to load, and half the size, of the instance dict copyreg would keep).
        values_of = operator.attrgetter(*(f.name for f in params))  # a tuple of them

        def __reduce__(self: Any) -> tuple[type[Any], tuple[Any, ...]]:
            return cls, values_of(self)

        __reduce__.__qualname__ = f"{cls.__qualname__}.__reduce__"
        cls.__reduce__ = __reduce__  # type: ignore[method-assign]
        _VALUES[cls] = values_of
    return cls


_VALUES: dict[type[Any], Callable[[Any], tuple[Any, ...]]] = {}


def rows(items: Iterable[object]) -> list[tuple[Any, ...]]:
    """The field values of each record (of quick classes with two fields or more), as
    tuples: what :func:`records` builds them back from. Plain data (``marshal`` stores
    it several times faster than ``pickle`` stores the records)."""
    return [_VALUES[type(item)](item) for item in items]


def records(cls: type[T], found: object) -> list[T] | None:
    """``cls`` built from each of :func:`rows`' tuples; ``None`` when ``found`` is not a
    list of such tuples (a damaged cache entry)."""
    if not isinstance(found, list):
        return None
    try:
        return [cls(*row) for row in found]
    except TypeError:  # not a tuple, or not this many fields
        return None
