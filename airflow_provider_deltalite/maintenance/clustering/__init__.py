"""Clustering: rewriting files so that rows close on a curve over some columns share files (data skipping).

- `curves`: the Z-order and Hilbert keys (range ids per column, bit interleaving, the Hilbert index, noise).
- `runs`: one clustering task: sample a partition, route its rows into sorted runs on local disk, write the files.
- `shuffle`: the same task spread over many Spark tasks through the executor's shuffle.
- `zorder`: the Z-order / Hilbert operation: plan per partition (cubes already clustered are skipped), run, commit.
"""
