"""OPTIMIZE on liquid-clustered tables: the domain's shapes, Delta's tags, the candidates, incremental runs, refusals.

Tables are written by hand (`liquid_tables`) as Delta lays them out; rows are checked with delta-rs and with
delta-kernel-rs, layouts against the files' own Parquet contents.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import delta_kernel_rust_sharing_wrapper as kernel
import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine import InvalidArgument
from airflow_provider_deltalite.engine.clustering_domain import clustering_spec
from airflow_provider_deltalite.engine.errors import CorruptLog, InvalidTableProperty
from airflow_provider_deltalite.maintenance.clustering.liquid import plan_clustering
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.maintenance.options import OptimizeOptions
from tests.conformance.corpus import row_multiset
from tests.helpers import CORPUS, cli_failure, copy_table, run_cli, tree_state
from tests.maintenance import liquid_tables as lt
from tests.oracles import DELTA_RS, KERNEL, agreed_rows, assert_rows_agree

CUBE_TAGS = ("ZCUBE_ID", "ZCUBE_ZORDER_BY", "ZCUBE_ZORDER_CURVE")


def _delta_rs_rows(path: Path) -> collections.Counter:
    table = pa.table(deltalake.DeltaTable(str(path)).to_pyarrow_table())
    return row_multiset(table, table.column_names)


def _kernel_rows(path: Path) -> collections.Counter:
    url = path.resolve().as_uri() + "/"
    interface = kernel.PythonInterface(url)
    table = kernel.ScanBuilder(kernel.Table(url).snapshot(interface)).build().execute(interface).read_all()
    return row_multiset(table, table.column_names)


def _actions(path: Path, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def _adds(path: Path, version: int) -> list[dict[str, Any]]:
    return [a["add"] for a in _actions(path, version) if "add" in a]


def _removes(path: Path, version: int) -> list[dict[str, Any]]:
    return [a["remove"] for a in _actions(path, version) if "remove" in a]


def _size(path: Path) -> int:
    return DeltaTable(str(path)).snapshot().size_in_bytes


# -- the domain ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clustering", "domain", "feature", "physical", "expected"),
    [
        ([["x"], ["y"]], "delta.clustering", "clustering", None, ("x", "y")),
        (["y", "x"], "delta.clustering", "clustering", None, ("y", "x")),
        ([{"physicalName": ["x"]}], "delta.liquid", "liquid", None, ("x",)),
        (
            [["col-2"], ["col-1"]],
            "delta.clustering",
            "clustering",
            {"x": "col-1", "y": "col-2", "payload": "col-3"},
            ("y", "x"),
        ),
        (["col-1"], "delta.clustering", "clustering", {"x": "col-1", "y": "col-2", "payload": "col-3"}, ("x",)),
    ],
    ids=["list-of-paths", "flat", "delta.liquid", "column-mapping-paths", "column-mapping-flat"],
)
def test_the_domain_in_every_shape_gives_the_logical_columns(
    tmp_path: Path, clustering: Any, domain: str, feature: str, physical: Any, expected: tuple[str, ...]
) -> None:
    path = tmp_path / "t"
    lt.create(path, lt.SCHEMA, clustering, domain=domain, feature=feature, physical=physical)
    lt.append(path, lt.points(1, 50), physical=physical)
    spec = clustering_spec(DeltaTable(str(path)).snapshot())
    assert spec is not None and (spec.domain, spec.names) == (domain, expected)
    doc = json.loads(run_cli("describe", path, "--json").stdout)
    assert doc["clusteringColumns"] == list(expected)
    assert "clustering  " + ", ".join(expected) + " (liquid)" in run_cli("describe", path).stdout


def test_a_nested_clustering_column_resolves_to_its_dotted_name(tmp_path: Path) -> None:
    path = tmp_path / "t"
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("a.b", pa.int64()), ("c", pa.int64())]))])
    lt.create(path, schema, [["s", "a.b"], ["s", "c"]])
    spec = clustering_spec(DeltaTable(str(path)).snapshot())
    assert spec is not None and spec.names == ("s.`a.b`", "s.c")


def test_a_table_without_the_feature_is_not_clustered_and_full_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    deltalake.write_deltalake(str(path), lt.points(1, 100))
    assert clustering_spec(DeltaTable(str(path)).snapshot()) is None
    assert json.loads(run_cli("describe", path, "--json").stdout)["clusteringColumns"] is None
    before = tree_state(path)
    line = cli_failure("optimize", path, "--full")
    assert line.endswith(
        "full applies only to a liquid-clustered table (one with clustering columns), and this one has none"
    )
    line = cli_failure("optimize", path, "--min-cube-size", "1000")
    assert "min_cube_size applies only to a liquid-clustered table" in line
    assert tree_state(path) == before


# -- what a run writes ---------------------------------------------------------------------------------------------


def test_first_run_clusters_everything_into_one_cube_with_deltas_tags(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=8)
    before_rs, before_kernel = _delta_rs_rows(path), _kernel_rows(path)
    domains_before = DeltaTable(str(path)).snapshot().domain_metadata
    size = _size(path)
    stats = optimize(DeltaTable(str(path)), target_size=size // 4)
    assert (stats.read_version, stats.committed_version) == (8, 9)
    assert (stats.num_files_removed, stats.num_files_added) == (8, 4)
    assert stats.files_removed.total_size == size
    info = _actions(path, 9)[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"
    assert info["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": "[]",
        "clusterBy": '["x","y"]',
        "auto": False,
        "isFull": False,
    }
    adds = _adds(path, 9)
    assert all(a["dataChange"] is False for a in adds + _removes(path, 9))
    assert all(a["clusteringProvider"] == "liquid" for a in adds)
    assert all(set(a["tags"]) == set(CUBE_TAGS) for a in adds)
    assert len({a["tags"]["ZCUBE_ID"] for a in adds}) == 1  # one cube
    assert {(a["tags"]["ZCUBE_ZORDER_BY"], a["tags"]["ZCUBE_ZORDER_CURVE"]) for a in adds} == {('["x","y"]', "hilbert")}
    # statistics for both clustering columns, equal to the files' own contents
    for add in adds:
        data = pq.read_table(path / add["path"])
        stats_json = json.loads(add["stats"])
        for column in ("x", "y"):
            values = data.column(column).to_numpy()
            assert (stats_json["minValues"][column], stats_json["maxValues"][column]) == (values.min(), values.max())
    assert _delta_rs_rows(path) == before_rs and _kernel_rows(path) == before_kernel
    snapshot = DeltaTable(str(path)).snapshot()
    assert snapshot.domain_metadata == domains_before
    assert "clustering" in snapshot.protocol.writer_features
    # the files follow the curve: point queries on each column skip most files (4 files, 2 columns: about half)
    assert _skipping(path, "x") > 0.4 and _skipping(path, "y") > 0.4


def _skipping(path: Path, column: str, queries: int = 200) -> float:
    """Share of live files whose actual [min, max] of ``column`` excludes a point query, averaged over queries."""
    snapshot = DeltaTable(str(path)).snapshot()
    ranges = []
    for p in snapshot.files.column("path").to_pylist():
        values = pq.read_table(path / p, columns=[column]).column(column).to_numpy()
        ranges.append((values.min(), values.max()))
    lows, highs = np.array([r[0] for r in ranges]), np.array([r[1] for r in ranges])
    rng = np.random.default_rng(3)
    return float(np.mean([np.mean((v < lows) | (v > highs)) for v in rng.integers(0, 10**6, queries)]))


def test_single_column_clustering_uses_the_zorder_curve(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=4, clustering=[["y"]])
    optimize(DeltaTable(str(path)), target_size=_size(path) // 4)
    adds = _adds(path, 5)
    assert {(a["tags"]["ZCUBE_ZORDER_BY"], a["tags"]["ZCUBE_ZORDER_CURVE"]) for a in adds} == {('["y"]', "zorder")}
    assert _skipping(path, "y") > 0.6


def test_column_mapping_writes_physical_names_and_tags_logical_ones(tmp_path: Path) -> None:
    physical = {"x": "col-1", "y": "col-2", "payload": "col-3"}
    path = tmp_path / "t"
    lt.create(path, lt.SCHEMA, [["col-2"], ["col-1"]], physical=physical)
    for i in range(3):
        lt.append(path, lt.points(i, 500), physical=physical)
    before = _kernel_rows(path)  # delta-rs 1.6.3 cannot read column mapping
    stats = optimize(DeltaTable(str(path)))
    assert (stats.num_files_removed, stats.num_files_added) == (3, 1)
    add = _adds(path, 4)[0]
    assert add["tags"]["ZCUBE_ZORDER_BY"] == '["y","x"]'
    assert pq.read_schema(path / add["path"]).names == ["col-1", "col-2", "col-3"]
    assert set(json.loads(add["stats"])["minValues"]) == {"col-1", "col-2", "col-3"}
    assert _kernel_rows(path) == before


# -- incremental ---------------------------------------------------------------------------------------------------


def test_a_second_run_commits_nothing_and_an_append_rewrites_only_the_new_files(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=8)
    target = _size(path) // 4
    first = optimize(DeltaTable(str(path)), target_size=target)
    cube = {a["tags"]["ZCUBE_ID"] for a in _adds(path, first.committed_version)}
    again = optimize(DeltaTable(str(path)), target_size=target)
    assert (again.committed_version, again.num_files_removed, lt.next_version(path)) == (None, 0, 10)
    assert again.clustering_stats is not None and again.clustering_stats["numPartialZCubesKept"] == 1
    new = [lt.append(path, lt.points(100 + i, 1000)) for i in range(2)]  # versions 10, 11
    before = _delta_rs_rows(path), _kernel_rows(path)
    third = optimize(DeltaTable(str(path)), target_size=target)
    assert third.committed_version == 12
    removed = _removes(path, 12)
    assert sorted(r["path"] for r in removed) == sorted(a["path"] for a in new)
    assert third.files_removed.total_size == sum(a["size"] for a in new)
    c = third.clustering_stats
    assert c is not None
    assert (c["numOutputZCubes"], c["inputNumZCubes"], c["numPartialZCubesKept"]) == (1, 0, 1)
    assert c["skippedFiles"] == {"num": 4, "size": first.files_added.total_size}
    new_adds = _adds(path, 12)
    assert len(new_adds) == max(1, round(sum(a["size"] for a in new) / target)) == 1
    assert {a["tags"]["ZCUBE_ID"] for a in new_adds}.isdisjoint(cube)
    assert (_delta_rs_rows(path), _kernel_rows(path)) == before
    # the first cube's files are untouched
    live = set(DeltaTable(str(path)).snapshot().files.column("path").to_pylist())
    assert {a["path"] for a in _adds(path, 9)} <= live


def test_small_cubes_merge_once_the_new_data_reaches_their_size(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=6, rows=2000)
    target = _size(path)  # one file per cube
    optimize(DeltaTable(str(path)), target_size=target)  # v7: cube A, 6 x 2000 rows
    lt.append(path, lt.points(50, 500))  # v8
    optimize(DeltaTable(str(path)), target_size=target)  # v9: cube B, 500 rows, alone
    b = _adds(path, 9)
    lt.append(path, lt.points(51, 200))  # v10: smaller than B -> a cube of its own
    small = optimize(DeltaTable(str(path)), target_size=target)
    assert (small.committed_version, small.num_files_removed) == (11, 1)
    c_adds = _adds(path, 11)
    lt.append(path, lt.points(52, 400))  # v12: 400 rows >= cube C (200) -> C merges; then 600 >= B (500) -> B too
    merged = optimize(DeltaTable(str(path)), target_size=target)
    assert merged.committed_version == 13
    removed = {r["path"] for r in _removes(path, 13)}
    assert removed == {a["path"] for a in b + c_adds} | {_adds(path, 12)[0]["path"]}
    stats = merged.clustering_stats
    assert stats is not None and (stats["inputNumZCubes"], stats["numPartialZCubesKept"]) == (2, 1)
    assert stats["inputZCubeFiles"]["num"] == 2 and stats["inputOtherFiles"]["num"] == 1
    assert sum(json.loads(a["stats"])["numRecords"] for a in _adds(path, 13)) == 1100


def test_sealed_cubes_stay_but_full_reclusters_them(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=4)
    size = _size(path)
    optimize(DeltaTable(str(path)), target_size=size // 2, min_cube_size=size // 2)  # v5: sealed
    sealed = {a["path"] for a in _adds(path, 5)}
    lt.append(path, lt.points(9, 3000))
    before = _kernel_rows(path)
    stats = optimize(DeltaTable(str(path)), target_size=size // 2, min_cube_size=size // 2)
    assert stats.clustering_stats is not None and stats.clustering_stats["numSealedZCubes"] == 1
    assert {r["path"] for r in _removes(path, 7)} == {_adds(path, 6)[0]["path"]}
    assert sealed <= set(DeltaTable(str(path)).snapshot().files.column("path").to_pylist())
    # FULL reclusters every record (Delta's OPTIMIZE FULL), the sealed cube included
    live = set(DeltaTable(str(path)).snapshot().files.column("path").to_pylist())
    full = optimize(DeltaTable(str(path)), target_size=size // 2, min_cube_size=size // 2, full=True)
    assert full.committed_version == 8
    assert full.clustering_stats is not None and full.clustering_stats["numSealedZCubes"] == 0
    assert {r["path"] for r in _removes(path, 8)} == live
    assert _kernel_rows(path) == before


def _live_sizes(path: Path) -> dict[str, int]:
    """Path -> size of every live file, as delta-rs reads the log."""
    adds = pa.table(deltalake.DeltaTable(str(path)).get_add_actions(flatten=True))
    return dict(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True))


def _even_cubes(sizes: dict[str, int], count: int) -> list[list[str]]:
    """`liquid._pack`'s cut, by hand: the files in path order, a new cube closed after the first file at which
    the bytes so far reach the next ``k / count`` of the total (the last cube takes the rest)."""
    total = sum(sizes.values())
    cubes: list[list[str]] = [[]]
    done = 0
    for name in sorted(sizes):
        cubes[-1].append(name)
        done += sizes[name]
        if len(cubes) < count and done * count >= total * len(cubes):
            cubes.append([])
    return cubes


def test_max_bytes_to_rewrite_takes_the_first_new_cube_and_defers_the_rest(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=6)  # versions 1-6: six unclustered files
    sizes = _live_sizes(path)
    total = sum(sizes.values())
    # a new cube starts at 1.5 x min_cube_size: the six files make 3.5 of those, so 3 cubes; which files each takes
    # depends on the (random) path order, as the files are nearly the same size
    min_cube = total * 4 // 21
    assert total // (min_cube * 3 // 2) == 3
    target = total // 6
    cubes = _even_cubes(sizes, 3)
    assert len(cubes) == 3 and all(cubes)
    cube_bytes = [sum(sizes[name] for name in cube) for cube in cubes]
    # the plan without a cap cuts those three cubes, in that order
    snapshot = DeltaTable(str(path)).snapshot()
    spec = clustering_spec(snapshot)
    assert spec is not None
    plan = plan_clustering(snapshot, spec, target_size=target, min_cube_size=min_cube)
    assert [sorted(f["path"] for f in b.files) for b in plan.bins] == cubes and plan.deferred == ()
    before = agreed_rows(path)

    capped = optimize(
        DeltaTable(str(path)), target_size=target, min_cube_size=min_cube, max_bytes_to_rewrite=cube_bytes[0]
    )
    assert (capped.read_version, capped.committed_version, capped.num_bins) == (6, 7, 1)
    assert {r["path"] for r in _removes(path, 7)} == set(cubes[0])
    assert (capped.num_files_removed, capped.files_removed.total_size) == (len(cubes[0]), cube_bytes[0])
    assert capped.num_files_added == len(_adds(path, 7)) == max(1, round(cube_bytes[0] / target))
    assert (capped.num_bins_deferred, capped.bytes_deferred) == (2, cube_bytes[1] + cube_bytes[2])
    assert (capped.to_dict()["numBinsDeferred"], capped.to_dict()["bytesDeferred"]) == (2, total - cube_bytes[0])
    assert capped.clustering_stats is not None and capped.clustering_stats["numOutputZCubes"] == 1
    # the deferred cubes' files are still live, beside the one new cube
    live = _live_sizes(path)
    assert set(live) == set(cubes[1] + cubes[2]) | {a["path"] for a in _adds(path, 7)}
    assert all(live[name] == sizes[name] for name in cubes[1] + cubes[2])
    assert assert_rows_agree(path, before, columns=list(lt.SCHEMA.names)) == [DELTA_RS, KERNEL]

    # without the cap the next run clusters every deferred file (3 or 4 of them: 1 or 2 new cubes); the cube the
    # first run wrote is sealed (at least min_cube_size bytes), so it stays
    deferred = cubes[1] + cubes[2]
    rest_bytes = cube_bytes[1] + cube_bytes[2]
    rest_cubes = rest_bytes // (min_cube * 3 // 2)
    assert rest_cubes in (1, 2) and sum(live[a["path"]] for a in _adds(path, 7)) >= min_cube
    rest = optimize(DeltaTable(str(path)), target_size=target, min_cube_size=min_cube)
    assert (rest.committed_version, rest.num_bins, rest.num_bins_deferred, rest.bytes_deferred) == (8, rest_cubes, 0, 0)
    assert {r["path"] for r in _removes(path, 8)} == set(deferred)
    assert (rest.num_files_removed, rest.files_removed.total_size) == (len(deferred), rest_bytes)
    assert rest.clustering_stats is not None and rest.clustering_stats["numSealedZCubes"] == 1
    assert set(_live_sizes(path)) == {a["path"] for a in _adds(path, 7) + _adds(path, 8)}
    assert assert_rows_agree(path, before, columns=list(lt.SCHEMA.names)) == [DELTA_RS, KERNEL]


# -- candidates ----------------------------------------------------------------------------------------------------


def test_files_of_another_provider_or_other_columns_are_left_alone_unless_full(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2)
    other_provider = lt.append(path, lt.points(7, 500), provider="spark-sort")
    other_columns = lt.append(
        path,
        lt.points(8, 500),
        provider="liquid",
        tags={"ZCUBE_ID": "c-old", "ZCUBE_ZORDER_BY": '["y"]', "ZCUBE_ZORDER_CURVE": "zorder"},
    )
    # a cube Delta wrote on the current columns: no ZCUBE_ZORDER_CURVE tag, and it is a partial cube
    delta_cube = lt.append(
        path, lt.points(9, 100), provider="liquid", tags={"ZCUBE_ID": "c-d", "ZCUBE_ZORDER_BY": '["x","y"]'}
    )
    unclustered = {a["path"] for a in _adds(path, 1) + _adds(path, 2)}
    before = _delta_rs_rows(path), _kernel_rows(path)
    stats = optimize(DeltaTable(str(path)))
    removed = {r["path"] for r in _removes(path, 6)}
    assert removed == unclustered | {delta_cube["path"]}  # the new data (2 files) merges Delta's 100-row cube
    assert stats.clustering_stats is not None
    assert stats.clustering_stats["skippedOtherFiles"]["num"] == 2
    assert (_delta_rs_rows(path), _kernel_rows(path)) == before
    # nothing new: nothing to do, the other files stay
    assert optimize(DeltaTable(str(path))).committed_version is None
    full = optimize(DeltaTable(str(path)), full=True)
    assert full.committed_version == 7
    # FULL: the other files, and every cube below min_cube_size (the one run 6 wrote)
    expected = {other_provider["path"], other_columns["path"]} | {a["path"] for a in _adds(path, 6)}
    assert {r["path"] for r in _removes(path, 7)} == expected
    assert _actions(path, 7)[0]["commitInfo"]["operationParameters"]["isFull"] is True
    assert all(a["clusteringProvider"] == "liquid" for a in _adds(path, 7))
    assert (_delta_rs_rows(path), _kernel_rows(path)) == before


# -- refusals ------------------------------------------------------------------------------------------------------


def test_zorder_and_where_on_a_clustered_table_are_refused_with_one_line(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2)
    before = tree_state(path)
    line = cli_failure("zorder", path, "--columns", "x,y")
    assert line.endswith(
        "zorder cannot reorder a liquid-clustered table (zorder by x, y): run optimize, which clusters such tables "
        "on their clustering columns"
    )
    line = cli_failure("optimize", path, "--where", "x > 3")
    assert line.endswith(
        "optimize on a clustered table takes no where predicate: it clusters the table's new data and small cubes, "
        "as Delta does (remove where='x > 3')"
    )
    with pytest.raises(InvalidArgument):
        zorder(DeltaTable(str(path)), ["x"])
    assert tree_state(path) == before


def test_where_is_refused_on_a_clustered_table_without_clustering_columns(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2, clustering=[])
    assert json.loads(run_cli("describe", path, "--json").stdout)["clusteringColumns"] == []
    before = tree_state(path)
    assert "takes no where predicate" in cli_failure("optimize", path, "--where", "x > 3")
    assert tree_state(path) == before
    # without columns OPTIMIZE compacts, as Delta does
    assert optimize(DeltaTable(str(path))).num_files_removed == 2


def test_a_domain_naming_a_missing_column_fails_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2, clustering=[["x"], ["gone"]])
    before = tree_state(path)
    expected = "the delta.clustering domain names clustering column 'gone', which is not in the table schema"
    assert cli_failure("optimize", path) == f"deltalite: error: table {path}: {expected}"
    assert cli_failure("describe", path).endswith(expected)
    with pytest.raises(CorruptLog):
        optimize(DeltaTable(str(path)))
    assert tree_state(path) == before


def test_a_clustering_column_without_statistics_is_named(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2, configuration={"delta.dataSkippingNumIndexedCols": "1"})
    before = tree_state(path)
    line = cli_failure("optimize", path)
    assert "clustering column 'y' has no statistics" in line
    with pytest.raises(InvalidTableProperty):
        optimize(DeltaTable(str(path)))
    assert tree_state(path) == before


def test_the_corpus_liquid_table_clusters_and_keeps_its_row_ids(tmp_path: Path) -> None:
    # delta-rs's table_with_liquid_clustering: Databricks' preview (feature `liquid`, domain `delta.liquid` with
    # {"physicalName": [...]} entries), row tracking and deletion vectors enabled
    from tests.row_tracking_oracle import row_identities

    path = copy_table(CORPUS / "delta-rs" / "table_with_liquid_clustering", tmp_path / "t")
    spec = clustering_spec(DeltaTable(str(path)).snapshot())
    assert spec is not None and (spec.domain, spec.names) == ("delta.liquid", ("id",))
    before = row_identities(path)
    result = optimize(DeltaTable(str(path)))
    assert (result.committed_version, result.num_files_removed, result.num_files_added) == (1, 10, 1)
    lines = [json.loads(line) for line in (path / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    assert lines[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    (add,) = [line["add"] for line in lines if "add" in line]
    assert (add["clusteringProvider"], add["tags"]["ZCUBE_ZORDER_BY"]) == ("liquid", '["id"]')
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (10, 1)
    assert row_identities(path) == before == [(i, 0, json.dumps({"id": i}, sort_keys=True)) for i in range(10)]


def test_the_options_carry_full_and_min_cube_size() -> None:
    options = OptimizeOptions.from_text({"full": "true", "min_cube_size": "1048576"})
    assert (options.full, options.min_cube_size) == (True, 1048576)
    assert OptimizeOptions.from_json(options.to_json()) == options
    with pytest.raises(InvalidArgument, match="min_cube_size must be a positive number of bytes, got 0"):
        OptimizeOptions(min_cube_size=0)
    with pytest.raises(InvalidArgument, match="full must be true or false"):
        OptimizeOptions.from_text({"full": "maybe"})


def test_the_cli_passes_full_and_min_cube_size_and_prints_the_cubes(tmp_path: Path) -> None:
    path = lt.clustered_points(tmp_path / "t", files=3, rows=500)
    size = _size(path)
    out = run_cli("optimize", path, "--full", "--min-cube-size", str(size // 10), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    c = doc["clusteringStats"]
    # 3 files of about 3.3 x min_cube_size: floor(bytes / (1.5 x min_cube_size)) = 6 cubes asked, one per file made
    assert (c["isFull"], c["minCubeSize"], c["numOutputZCubes"], doc["numFilesRemoved"]) == (True, size // 10, 3, 3)
    assert _actions(path, 4)[0]["commitInfo"]["operationParameters"]["isFull"] is True
    text = run_cli("optimize", path, "--min-cube-size", str(size // 10)).stdout
    assert "clustered on x, y (hilbert): 0 new cubes, 0 small cubes merged, 3 sealed and 0 small cubes left" in text


def test_unset_full_and_min_cube_size_keep_their_defaults_from_text() -> None:
    options = OptimizeOptions.from_text({"full": None, "min_cube_size": "None", "where": ""})
    assert (options.full, options.min_cube_size) == (False, None)


def test_compaction_options_on_a_clustered_table_are_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = lt.clustered_points(tmp_path / "t", files=2)
    with caplog.at_level("WARNING", logger="airflow_provider_deltalite.maintenance.optimize"):
        stats = optimize(DeltaTable(str(path)), min_file_size=10, batch_size=1 << 20)
    assert stats.committed_version == 3 and stats.clustering_stats is not None
    assert [r.getMessage() for r in caplog.records] == [
        f"table {path} is liquid-clustered: min_file_size, batch_size apply to compaction only and are ignored"
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="airflow_provider_deltalite.maintenance.optimize"):
        optimize(DeltaTable(str(path)))
    assert caplog.records == []
