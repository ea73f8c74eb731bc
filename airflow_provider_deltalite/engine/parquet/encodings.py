"""What the input files' own writers learnt about each column's encoding, read from their footers' encoding stats.

A writer that tried a dictionary for a column chunk and saw it outgrow its page wrote the rest of the chunk in plain
pages: the footer's ``encoding_stats`` show data pages of both kinds. That is a verdict over the whole chunk, where a
re-encoding writer that judges by the first rows it sees can be fooled (sorted or clustered data starts with few
distinct values). `dictionary_verdicts` collects those verdicts per column over a bin's inputs.
"""

from __future__ import annotations

from collections.abc import Iterable

from airflow_provider_deltalite.engine.parquet.footer import FileMetaData

# parquet-format PageType and Encoding values
_DATA_PAGES = frozenset((0, 3))  # DATA_PAGE, DATA_PAGE_V2
_DICTIONARY_PAGE = 2
_DICTIONARY_ENCODINGS = frozenset((2, 8))  # PLAIN_DICTIONARY, RLE_DICTIONARY


def dictionary_verdicts(footers: Iterable[FileMetaData]) -> dict[str, bool]:
    """Per top-level column: False when some input chunk's dictionary overflowed (data pages in both a dictionary
    and another encoding), True when every input chunk that says anything had all its data pages dictionary-encoded.
    Columns on which no input says anything (no encoding stats, or no dictionary tried) are left out.

    Example:
        >>> dictionary_verdicts([])
        {}
    """
    out: dict[str, bool] = {}
    for meta in footers:
        for group in meta.row_groups:
            for chunk in group.columns:
                md = chunk.meta_data
                stats = md.encoding_stats if md is not None else []
                if not stats:
                    continue
                dictionary_pages = other_pages = 0
                tried = False
                for s in stats:
                    if s.page_type == _DICTIONARY_PAGE:
                        tried = True
                    elif s.page_type in _DATA_PAGES:
                        if s.encoding in _DICTIONARY_ENCODINGS:
                            dictionary_pages += s.count or 0
                        else:
                            other_pages += s.count or 0
                name = md.path[0] if md.path else ""
                if tried and other_pages:
                    out[name] = False
                elif dictionary_pages and not other_pages and out.get(name) is not False:
                    out[name] = True
    return out
