"""Lines to numbers for every text format: line reading, layouts, the native scanner and
the polars field splitter beside it.
"""
