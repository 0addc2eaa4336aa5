"""One module per log format, each exporting one ``FORMAT``; modules whose names start with
``_`` are helpers of a format. Formats never import each other.
"""
