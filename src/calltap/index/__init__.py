"""The index of pairs: one Parquet row per stored pair, beside the recordings.

Readers learn what a recordings location holds from `_index/day=YYYY-MM-DD/*.parquet` instead
of every pair.json. `rows` says what a row holds (pure data), `layout` names the segments,
`parquet` turns rows into a segment and back, `pending` spools rows until a segment takes them,
`writer` stores segments, `catalog` reads them into DuckDB, `gaps` finds a local tree's pairs
without a row, `compaction` merges a closed day's segments.
"""
