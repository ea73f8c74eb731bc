"""Arrow's compute functions, called as ``pc.<name>(...)`` like `pyarrow.compute`'s, without importing it.

Importing `pyarrow.compute` builds a Python wrapper, with a docstring scraped from the C++ documentation, for each of
its ~400 kernels: 55-70 ms of one core on every deltalite process, a thirtieth of a small-file OPTIMIZE, before the
first file is read. The engine calls about fifty of them. Here a wrapper is built on first use, from the same
registry and with the same calling convention: positional arguments up to the kernel's arity, then the options
class's arguments, positionally or by name, or ``options=``; an `Expression` as first argument builds an expression.

`cast`, `fill_null` and `field` are written out, as `pyarrow.compute` writes them; `Expression` and the options
classes are pyarrow's own.

Example::

    from airflow_provider_deltalite.engine import arrow_compute as pc

    pc.min_max(pa.array([3, 1, 2]))  # <pyarrow.StructScalar: [('min', 1), ('max', 3)]>
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyarrow import _compute
from pyarrow._compute import CastOptions, Expression, call_function, function_registry

__all__ = ["Expression", "call_function", "cast", "field", "fill_null"]

# Python keywords: pyarrow.compute exposes these kernels with a trailing underscore.
_KEYWORDS = {"and_": "and", "or_": "or"}


def __getattr__(name: str) -> Callable[..., Any]:
    """The wrapper of the kernel ``name`` (built once, then a module attribute like any other)."""
    if name.startswith("__"):
        raise AttributeError(name)
    kernel = _KEYWORDS.get(name, name)
    try:
        function = function_registry().get_function(kernel)
    except (pa.ArrowKeyError, KeyError):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    options_class = getattr(_compute, function._doc.options_class) if function._doc.options_class else None
    wrapper = _wrapper(kernel, function, options_class, function.arity)
    wrapper.__name__ = wrapper.__qualname__ = name
    globals()[name] = wrapper
    return wrapper


def _wrapper(kernel: str, function: Any, options_class: type | None, arity: Any) -> Callable[..., Any]:
    if options_class is None:

        def plain(*args: Any, memory_pool: Any = None) -> Any:
            if arity is not Ellipsis and len(args) != arity:
                raise TypeError(f"{kernel} takes {arity} positional argument(s), but {len(args)} were given")
            if args and isinstance(args[0], Expression):
                return Expression._call(kernel, list(args))
            return function.call(args, None, memory_pool)

        return plain

    def with_options(*args: Any, memory_pool: Any = None, options: Any = None, **kwargs: Any) -> Any:
        option_args: tuple[Any, ...] = ()
        if arity is not Ellipsis:
            if len(args) < arity:
                raise TypeError(f"{kernel} takes {arity} positional argument(s), but {len(args)} were given")
            args, option_args = args[:arity], args[arity:]
        if option_args or kwargs:
            if options is not None:
                raise TypeError(f"Function {kernel!r} called with both an 'options' argument and additional arguments")
            options = options_class(*option_args, **kwargs)
        elif isinstance(options, dict):
            options = options_class(**options)
        elif options is not None and not isinstance(options, options_class):
            raise TypeError(f"Function {kernel!r} expected a {options_class} parameter, got {type(options)}")
        if args and isinstance(args[0], Expression):
            return Expression._call(kernel, list(args), options)
        return function.call(args, options, memory_pool)

    return with_options


def cast(arr: Any, target_type: Any = None, safe: bool | None = None, options: Any = None) -> Any:
    """``arr`` cast to ``target_type`` (checked for overflow and truncation unless ``safe=False``)."""
    if options is None:
        target_type = pa.types.lib.ensure_type(target_type)
        options = CastOptions.unsafe(target_type) if safe is False else CastOptions.safe(target_type)
    elif safe is not None or target_type is not None:
        raise ValueError("Must either pass values for 'target_type' and 'safe' or pass a value for 'options'")
    return call_function("cast", [arr], options)


def fill_null(values: Any, fill_value: Any) -> Any:
    """``values`` with each null replaced by ``fill_value`` (a scalar, or an array of the same length)."""
    if not isinstance(fill_value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        fill_value = pa.scalar(fill_value, type=values.type)
    elif values.type != fill_value.type:
        fill_value = pa.scalar(fill_value.as_py(), type=values.type)
    return call_function("coalesce", [values, fill_value])


def field(*name_or_index: Any) -> Expression:
    """A reference to a column (a name or index) or, given several names or a tuple, to a nested field."""
    if len(name_or_index) == 1:
        if isinstance(name_or_index[0], (str, int)):
            return Expression._field(name_or_index[0])
        if isinstance(name_or_index[0], tuple):
            return Expression._nested_field(name_or_index[0])
        raise TypeError(f"field reference should be str, multiple str, tuple or integer, got {type(name_or_index[0])}")
    return Expression._nested_field(name_or_index)
