"""Parquet at the byte level: the Thrift compact codec, the footer's structures, and row-group stitching."""
