"""Lines to numbers for every text format, a module a job: :mod:`.lines` (a file's lines read
in chunks), :mod:`.logs` (which files are logs), :mod:`.rows` (the rows of several logs, and
of record files), :mod:`.values` (printed numbers and timestamps), :mod:`.points` (rows to
points and legs), :mod:`.damage` (a cut last line, unparsed lines), :mod:`.layout` (the
native scanner's layouts), :mod:`.fields` (the polars field splitter beside it) and
:mod:`.records` (small JSON-lines files read record by record).
"""
