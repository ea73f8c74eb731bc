"""`engine/arrow_compute`: Arrow's kernels called as `pyarrow.compute` calls them, without importing it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as real
import pytest

import airflow_provider_deltalite
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import struct_array, validity_bitmap

PACKAGE = Path(airflow_provider_deltalite.__file__).parent


def names_the_package_calls() -> list[str]:
    names: set[str] = set()
    for source in PACKAGE.rglob("*.py"):
        names.update(re.findall(r"\bpc\.([A-Za-z_][A-Za-z0-9_]*)\b", source.read_text()))
    return sorted(names)


def test_every_name_the_package_calls_is_a_kernel_of_pyarrow_compute() -> None:
    names = names_the_package_calls()
    assert len(names) > 40
    for name in names:
        ours, theirs = getattr(pc, name), getattr(real, name)
        assert callable(ours) and callable(theirs), name


def test_importing_it_does_not_import_pyarrow_compute() -> None:
    # pandas kept out as the CLI keeps it out: `pa.array` of a list looks for pandas, which imports pyarrow.compute
    code = (
        "import sys\n"
        "from airflow_provider_deltalite.cli.startup import pandas_kept_out\n"
        "from airflow_provider_deltalite.engine import arrow_compute as pc\n"
        "import pyarrow as pa\n"
        "with pandas_kept_out('describe', None):\n"
        "    pc.sum(pa.array([1, 2]))\n"
        "    pc.cast(pa.array([1]), pa.int8())\n"
        "    pc.filter(pa.table({'a': [1, 2]}), pc.is_valid(pa.array([1, None])))\n"
        "print('pyarrow.compute' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # no options class
        (lambda m: m.is_valid(pa.array([1, None])), [True, False]),
        (lambda m: m.invert(pa.array([True, None])), [False, None]),
        (lambda m: m.and_(pa.array([True, True]), pa.array([True, False])), [True, False]),
        (lambda m: m.or_(pa.array([False, False]), pa.array([True, False])), [True, False]),
        (lambda m: m.binary_join_element_wise(pa.array(["a", None]), pa.array(["b", "c"]), "-"), ["a-b", None]),
        (lambda m: m.coalesce(pa.array([None, 2]), pa.array([1, 1])), [1, 2]),
        # options: by name, positionally after the arguments, as an object, as a dict
        (lambda m: m.is_in(pa.array(["a", "b"]), value_set=pa.array(["b"])), [False, True]),
        (lambda m: m.struct_field(pa.array([{"x": 1, "y": 2}]), [1]), [2]),
        (lambda m: m.match_substring(pa.array(["abc", "x"]), "b"), [True, False]),
        (lambda m: m.is_null(pa.array([1.0, float("nan"), None]), nan_is_null=True), [False, True, True]),
        (lambda m: m.is_null(pa.array([1.0, float("nan"), None])), [False, False, True]),
        (lambda m: m.sort_indices(pa.array([1, 3, 2]), options=real.SortOptions([("", "descending")])), [1, 2, 0]),
        (lambda m: m.sort_indices(pa.array([1, 3, 2]), options={"sort_keys": [("", "descending")]}), [1, 2, 0]),
        (lambda m: m.extract_regex(pa.array(["a1"]), pattern=r"(?P<d>\d)"), [{"d": "1"}]),
        (lambda m: m.replace_substring_regex(pa.array(["a1b2"]), r"\d", "_"), ["a_b_"]),
        (lambda m: m.map_lookup(pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string())), "k", "first"), ["v"]),
        (lambda m: m.rank(pa.array([30, 10, 20]), sort_keys="ascending"), [3, 1, 2]),
        (lambda m: m.take(pa.array(["a", "b", "c"]), [2, 0]), ["c", "a"]),
        (lambda m: m.filter(pa.array([1, 2, 3]), pa.array([True, None, False])), [1]),
        (lambda m: m.filter(pa.array([1, 2, 3]), pa.array([True, None, False]), "emit_null"), [1, None]),
        (lambda m: m.dictionary_encode(pa.array(["a", None, "a"]), null_encoding="encode").indices, [0, 1, 0]),
        (lambda m: m.unique(pa.chunked_array([["b", "a"], ["b"]])), ["b", "a"]),
        (lambda m: m.drop_null(pa.array([None, 1])), [1]),
        # the three written out
        (lambda m: m.cast(pa.array([1, 2]), pa.string()), ["1", "2"]),
        (lambda m: m.cast(pa.array([300]), pa.int8(), safe=False), [44]),
        (lambda m: m.cast(pa.array([1.5]), options=real.CastOptions.unsafe(pa.int64())), [1]),
        (lambda m: m.fill_null(pa.array([None, 2]), 7), [7, 2]),
        (lambda m: m.fill_null(pa.array([None, 2], pa.int8()), pa.scalar(7, pa.int64())), [7, 2]),
        (lambda m: m.fill_null(pa.array([None, 2]), pa.array([5, 6])), [5, 2]),
    ],
)
def test_calls_give_what_pyarrow_compute_gives(call, expected) -> None:  # type: ignore[no-untyped-def]
    ours, theirs = call(pc), call(real)
    assert ours.to_pylist() == theirs.to_pylist() == expected
    assert ours.type == theirs.type


def test_aggregates_return_scalars() -> None:
    values = pa.array([3, None, 1])
    assert pc.min_max(values).as_py() == real.min_max(values).as_py() == {"min": 1, "max": 3}
    assert pc.sum(values).as_py() == 4
    assert pc.sum(pa.array([], pa.int64()), min_count=0).as_py() == 0
    assert pc.count_distinct(values, mode="all").as_py() == 3
    assert pc.any(pa.array([False, None])).as_py() is False
    assert pc.all(pa.array([True, None]), skip_nulls=False).as_py() is None


def test_an_expression_as_first_argument_builds_an_expression() -> None:
    ours = pc.and_(pc.greater(pc.field("a"), 1), pc.is_in(pc.field("b"), value_set=pa.array(["x"])))
    both = [real.greater(real.field("a"), 1), real.is_in(real.field("b"), value_set=pa.array(["x"]))]
    # the kernel's own name, "and": pyarrow.compute's wrapper calls it "and_", a name no kernel has when the expression
    # is bound (ArrowKeyError)
    assert ours.equals(real.Expression._call("and", both))
    assert pc.field("s", "x").equals(real.field("s", "x")) and pc.field(("s", "x")).equals(real.field(("s", "x")))
    table = pa.table({"a": [0, 2, 3], "b": ["x", "x", "y"]})
    assert table.filter(ours).to_pylist() == [{"a": 2, "b": "x"}]


def test_misuse_is_refused_as_pyarrow_compute_refuses_it() -> None:
    with pytest.raises(TypeError, match="is_valid takes 1 positional argument"):
        pc.is_valid(pa.array([1]), pa.array([2]))
    with pytest.raises(pa.ArrowInvalid, match="'is_in' cannot be called without options"):
        pc.is_in(pa.array([1]))
    with pytest.raises(TypeError, match="both an 'options' argument and additional arguments"):
        pc.is_null(pa.array([1.0]), nan_is_null=True, options=real.NullOptions())
    with pytest.raises(TypeError, match="expected a"):
        pc.is_null(pa.array([1.0]), options=real.SortOptions())
    with pytest.raises(ValueError, match="Must either pass values for 'target_type'"):
        pc.cast(pa.array([1]), pa.int8(), options=real.CastOptions.safe(pa.int8()))
    with pytest.raises(pa.ArrowInvalid):
        pc.cast(pa.array([300]), pa.int8())
    with pytest.raises(TypeError, match="field reference should be"):
        pc.field(1.5)
    with pytest.raises(AttributeError, match="no attribute 'no_such_kernel'"):
        pc.no_such_kernel  # noqa: B018


@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.parametrize("valid", [[True, True, True], [True, False, True], [False, False, False]])
def test_a_struct_from_its_validity_is_what_from_arrays_with_a_mask_builds(offset: int, valid: list[bool]) -> None:
    # arrow_util.struct_array and validity_bitmap, which the checkpoint reader and writer use instead of
    # `StructArray.from_arrays(mask=...)` (that inverts its mask through pyarrow.compute)
    padded = pa.array([False] * offset + valid).slice(offset)
    children = [pa.array([1, 2, 3]), pa.array(["a", None, "c"])]
    fields = [pa.field("x", pa.int64()), pa.field("y", pa.string())]
    ours = struct_array(children, fields, padded)
    ours.validate(full=True)
    theirs = pa.StructArray.from_arrays(children, fields=fields, mask=real.invert(padded))
    assert ours.to_pylist() == theirs.to_pylist()
    assert ours.null_count == valid.count(False)
    assert (validity_bitmap(padded) is None) == all(valid)
