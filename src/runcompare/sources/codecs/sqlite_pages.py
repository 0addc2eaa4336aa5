"""The rows of an SQLite database file read page by page, for a file SQLite itself refuses (cut
short, or damaged where it parses its schema): each table's b-tree is walked from its root
page, and a page beyond the file's end or not a table page is skipped and counted, so every row
on the pages that survive is read and none is made up (freed pages are never visited: only
what a live b-tree points at). Only table b-trees (rowid tables) are read; indexes are not
needed. No format knowledge; never writes.

The file format: https://www.sqlite.org/fileformat2.html (header, b-tree pages, cells,
records, overflow pages).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Database", "NotSqlite", "Table"]

_MAGIC = b"SQLite format 3\x00"
_LEAF, _INTERIOR = 0x0D, 0x05


class NotSqlite(ValueError):
    """The bytes do not start with an SQLite database header."""


@dataclass
class Table:
    """A table's columns (as its CREATE statement names them, ALTERed ones last), the rows read
    (values in column order; columns a row predates hold their DEFAULT), and the pages of its
    b-tree that could not be read."""

    name: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    lost_pages: int = 0


class Database:
    """The tables of ``data``, an SQLite file's bytes (whole or cut short)."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(_MAGIC) or len(data) < 100:
            raise NotSqlite("not an SQLite database")
        size = int.from_bytes(data[16:18], "big")
        self.page_size = 65536 if size == 1 else size
        if self.page_size < 512 or self.page_size & (self.page_size - 1):
            raise NotSqlite(f"page size {self.page_size} is not a power of two from 512")
        self.usable = self.page_size - data[20]
        self.data = data
        self.pages = len(data) // self.page_size  # whole pages in the file
        schema = self._walk(1)
        self.lost_schema_pages = schema.lost_pages
        self._roots: dict[str, tuple[int, str]] = {}
        for _, values in schema.rows:
            if len(values) >= 5 and values[0] == "table" and isinstance(values[3], int) \
                    and isinstance(values[4], str):
                self._roots[str(values[1])] = (values[3], values[4])

    @property
    def tables(self) -> list[str]:
        """The tables whose schema entry could be read."""
        return sorted(self._roots)

    def table(self, name: str) -> Table | None:
        """Every row of table ``name`` that the surviving pages hold; None when its schema entry
        was on a lost page."""
        if name not in self._roots:
            return None
        root, sql = self._roots[name]
        columns, defaults, alias = _columns(sql)
        walked = self._walk(root)
        rows = []
        for rowid, values in walked.rows:
            if len(values) < len(columns):
                values = values + defaults[len(values):]
            if alias is not None and values[alias] is None:  # stored as the rowid
                values[alias] = rowid
            rows.append(values)
        return Table(name, columns, rows, walked.lost_pages)

    def _page(self, number: int) -> bytes | None:
        if not 1 <= number <= self.pages:
            return None
        return self.data[(number - 1) * self.page_size:number * self.page_size]

    def _walk(self, root: int) -> _Walked:
        """The (rowid, values) of the table b-tree at ``root``, depth first in key order."""
        walked = _Walked()
        stack, seen = [root], set()
        while stack:
            number = stack.pop()
            page = self._page(number)
            if page is None or number in seen:
                walked.lost_pages += 1
                continue
            seen.add(number)
            head = 100 if number == 1 else 0
            try:
                kind = page[head]
                cells = int.from_bytes(page[head + 3:head + 5], "big")
                if kind == _INTERIOR:
                    pointers = page[head + 12:head + 12 + 2 * cells]
                    children = [int.from_bytes(page[p:p + 4], "big")
                                for p in struct.unpack(f">{cells}H", pointers)]
                    children.append(int.from_bytes(page[head + 8:head + 12], "big"))
                    stack.extend(reversed(children))  # leftmost first
                elif kind == _LEAF:
                    pointers = page[head + 8:head + 8 + 2 * cells]
                    for offset in struct.unpack(f">{cells}H", pointers):
                        row = self._cell(page, offset)
                        if row is None:
                            walked.lost_cells += 1
                        else:
                            walked.rows.append(row)
                else:
                    walked.lost_pages += 1
            except (IndexError, struct.error, ValueError):
                walked.lost_pages += 1
        return walked

    def _cell(self, page: bytes, offset: int) -> tuple[int, list[Any]] | None:
        """A leaf cell's rowid and record; None when its overflow pages are lost."""
        size, at = _varint(page, offset)
        rowid, at = _varint(page, at)
        usable = self.usable
        most = usable - 35
        payload: bytes | bytearray
        if size <= most:
            payload = page[at:at + size]
        else:
            least = (usable - 12) * 32 // 255 - 23
            local = least + (size - least) % (usable - 4)
            local = local if local <= most else least
            payload = bytearray(page[at:at + local])
            following = int.from_bytes(page[at + local:at + local + 4], "big")
            seen = set()
            while len(payload) < size:
                overflow = self._page(following)
                if overflow is None or following in seen:
                    return None
                seen.add(following)
                payload += overflow[4:usable][:size - len(payload)]
                following = int.from_bytes(overflow[:4], "big")
            payload = bytes(payload)
        if len(payload) != size:
            return None
        return (rowid if rowid < 1 << 63 else rowid - (1 << 64)), _record(payload)


@dataclass
class _Walked:
    rows: list[tuple[int, list[Any]]] = field(default_factory=list)
    lost_pages: int = 0
    lost_cells: int = 0


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at ``at`` (big-endian, 7 bits a byte, the 9th byte whole) and the offset
    after it."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def _record(payload: bytes) -> list[Any]:
    """The values of a record: its header of serial types, then their bodies."""
    header, at = _varint(payload, 0)
    types = []
    while at < header:
        kind, at = _varint(payload, at)
        types.append(kind)
    body, values = header, list[Any]()
    for kind in types:
        if kind == 0:
            values.append(None)
        elif kind in _INT_SIZES:
            size = _INT_SIZES[kind]
            values.append(int.from_bytes(payload[body:body + size], "big", signed=True))
            body += size
        elif kind == 7:
            values.append(struct.unpack(">d", payload[body:body + 8])[0])
            body += 8
        elif kind in (8, 9):
            values.append(kind - 8)
        elif kind >= 12:
            size = (kind - 12) // 2
            chunk = payload[body:body + size]
            values.append(chunk.decode("utf-8", "replace") if kind % 2 else bytes(chunk))
            body += size
        else:
            raise ValueError(f"reserved serial type {kind}")
    if body > len(payload):
        raise ValueError("a record longer than its cell")
    return values


_CONSTRAINT = re.compile(r"(?i)^\s*(CONSTRAINT|PRIMARY|FOREIGN|CHECK|UNIQUE)\b")
_DEFAULT = re.compile(r"(?i)\bDEFAULT\s+('(?:[^']|'')*'|-?\d+(?:\.\d+)?)")


def _columns(sql: str) -> tuple[list[str], list[Any], int | None]:
    """The column names of a CREATE TABLE statement, each one's DEFAULT (as SQLite would
    store it: a quoted number is text, which the reader casts; None where there is none), and
    the index of the column that is the rowid (an INTEGER PRIMARY KEY, stored as NULL)."""
    body = sql[sql.index("(") + 1:sql.rindex(")")]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(body):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    names, defaults, types, keys = [], [], [], []
    for part in parts:
        if not part.strip():
            continue
        if _CONSTRAINT.match(part):
            key = re.search(r"(?i)PRIMARY\s+KEY\s*\(([^)]*)\)", part)
            keys += [] if key is None else [k.strip().strip('"`[]') for k in key.group(1).split(",")]
            continue
        words = part.split()
        names.append(words[0].strip('"`[]'))
        types.append(words[1].upper() if len(words) > 1 else "")
        if re.search(r"(?i)\bPRIMARY\s+KEY\b", part):
            keys.append(names[-1])
        default = _DEFAULT.search(part)
        value = None if default is None else default.group(1)
        if isinstance(value, str) and value.startswith("'"):
            value = value[1:-1].replace("''", "'")
        defaults.append(value)
    alias = names.index(keys[0]) if len(keys) == 1 and keys[0] in names \
        and types[names.index(keys[0])] == "INTEGER" else None
    return names, defaults, alias
