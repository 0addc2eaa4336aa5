"""Reading a log file whole into memory, the fast way, for the binary decoders.

The file's bytes go into an anonymous memory map in huge pages where the kernel gives them:
filled 2.5 times faster than small pages (no page fault per 4 KiB), and the decoders' random
reads into a file of many megabytes miss the TLB less. The map is private and anonymous: the
file itself is never mapped, so it is never changed and a file truncated meanwhile cannot
fault.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from ...errors import InputError

__all__ = ["LFS_POINTER", "LISTINGS", "Buffer", "exists", "files_below", "files_in",
           "folder_stamp", "folders_in", "is_dir", "is_file", "lfs_message", "may_read",
           "natural", "one_look", "passed_over", "read_file", "refuse_lfs_pointer", "resolved",
           "roots_under", "writable"]

#: What the decoders read: ``bytes``, or a writable buffer with the same slicing and searching
#: (``bytearray``, ``mmap.mmap``).
Buffer = bytes | bytearray | mmap.mmap


#: How a Git LFS pointer file starts: a repository cloned without its LFS objects holds these
#: ~130-byte stand-ins instead of the files.
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def lfs_message(file: Path, start: bytes) -> str | None:
    """What to tell the user when ``start`` (a file's first bytes) is a Git LFS pointer."""
    if not start.startswith(LFS_POINTER):
        return None
    return (f"{file}: is a Git LFS pointer, not the log itself (the repository was cloned or "
            "downloaded without its LFS files); run `git lfs pull` in the repository (or "
            "download the file itself) and read it again")


def refuse_lfs_pointer(file: Path, start: bytes) -> None:
    """Raise :class:`InputError` saying what to do when ``start`` (the file's first bytes) is a
    Git LFS pointer."""
    message = lfs_message(file, start)
    if message is not None:
        raise InputError(message)


#: Folder listings kept (by path and stamp): more than the folders of a sweep of thousands of
#: runs, which every format walks in turn; fewer would list each folder again for each format
#: once a sweep has more folders than are kept.
LISTINGS = 1 << 14


def files_in(folder: Path) -> list[Path]:
    """The regular files in ``folder`` (or links to one), in name order; [] when it is no
    folder or cannot be listed."""
    stamp = folder_stamp(folder)
    return [] if stamp is None else list(_files(folder, *stamp))


def folders_in(folder: Path) -> list[Path]:
    """The folders in ``folder`` (or links to one), in natural name order (:func:`natural`:
    the runs of a sweep as people count them)."""
    stamp = folder_stamp(folder)
    return [] if stamp is None else list(_folders(folder, *stamp))


@lru_cache(maxsize=LISTINGS)
def _files(folder: Path, mtime: int, inode: int) -> tuple[Path, ...]:
    """:func:`files_in`, made once for the folder's mtime (as :func:`_folders`)."""
    return tuple(folder / name for name, kind in _entries(str(folder), mtime, inode)
                 if kind == "file")


@lru_cache(maxsize=LISTINGS)
def _folders(folder: Path, mtime: int, inode: int) -> tuple[Path, ...]:
    """:func:`folders_in`, sorted and made once for the folder's mtime (a sweep's folder is
    walked by every format that looks for runs under it: its paths are not made again)."""
    names = sorted((name for name, kind in _entries(str(folder), mtime, inode)
                    if kind == "folder"), key=natural)
    return tuple(folder / name for name in names)


#: While :func:`one_look` is open: what one stat said of each path looked at (or its error).
_LOOKED: ContextVar[dict[str, os.stat_result | OSError] | None] = ContextVar(
    "runcompare_looked", default=None)
#: While :func:`one_look` is open: each path resolved in it, by the path as spelled.
_RESOLVED: ContextVar[dict[str, Path] | None] = ContextVar("runcompare_resolved", default=None)


@contextmanager
def one_look() -> Iterator[None]:
    """Within it, each path is stat'ed once: a folder's stamp (:func:`folder_stamp`) and what a
    path is (:func:`is_file`, :func:`is_dir`) are those of the first look, however many
    formats ask again (reading a run of a sweep, 18 formats ask about its folder and the files
    they know by name: 186 stats without this, 38 with it), and each path is resolved once
    (:func:`resolved`). What a detection and the read after it see is then one moment of the
    tree, as a look at it would be. Nested uses share the outer one's looks."""
    if _LOOKED.get() is not None:
        yield
        return
    token, resolving = _LOOKED.set({}), _RESOLVED.set({})
    try:
        yield
    finally:
        _LOOKED.reset(token)
        _RESOLVED.reset(resolving)


def resolved(path: Path) -> Path:
    """``path.resolve()``, once per path inside :func:`one_look` (each component's link read
    once: a run's files, its folder and its cache key ask it of the same paths)."""
    memo = _RESOLVED.get()
    if memo is None:
        return path.resolve()
    key = str(path)
    found = memo.get(key)
    if found is None:
        found = memo[key] = path.resolve()
    return found


def _stat(path: Path) -> os.stat_result | OSError:
    """``os.stat(path)``, or the error it raised; once per path inside :func:`one_look`."""
    looked = _LOOKED.get()
    key = str(path)
    if looked is not None and key in looked:
        return looked[key]
    try:
        found: os.stat_result | OSError = os.stat(key)
    except OSError as exc:
        found = exc
    if looked is not None:
        looked[key] = found
    return found


def folder_stamp(folder: Path) -> tuple[int, int] | None:
    """The mtime (ns) and inode of ``folder`` (what the kept listings of a folder are checked
    against: an entry added, removed or renamed changes the mtime), None when it cannot be
    looked at; one stat per folder inside :func:`one_look`."""
    found = _stat(folder)
    return None if isinstance(found, OSError) else (found.st_mtime_ns, found.st_ino)


def is_file(path: Path) -> bool:
    """``path.is_file()`` (a regular file, or a link to one), one stat per path inside
    :func:`one_look`; raises the OSError ``Path.is_file`` raises (no permission to look)."""
    mode = _mode(path)
    return mode is not None and S_ISREG(mode)


def exists(path: Path) -> bool:
    """``path.exists()``, one stat per path inside :func:`one_look` (as :func:`is_file`)."""
    return _mode(path) is not None


def is_dir(path: Path) -> bool:
    """``path.is_dir()``, one stat per path inside :func:`one_look` (as :func:`is_file`)."""
    mode = _mode(path)
    return mode is not None and S_ISDIR(mode)


def _mode(path: Path) -> int | None:
    """The mode of what is at ``path``, None when nothing is there as pathlib says it (a
    missing path, a link to nothing or in a loop); raises the OSErrors pathlib raises."""
    found = _stat(path)
    if isinstance(found, OSError):
        if found.errno in _NOTHING_THERE:
            return None
        raise found
    return found.st_mode


#: The errors by which pathlib's ``is_file``/``is_dir`` say "nothing there" (pathlib's
#: ``_IGNORED_ERRNOS``); any other (no permission) is raised.
_NOTHING_THERE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def files_below(folder: Path, name: str, depth: int) -> list[Path]:
    """The files called ``name`` in the folders ``depth`` levels under ``folder`` (what
    ``folder.glob("*/" * depth + name)`` finds of them, hidden folders too), from the folders'
    listings (:func:`files_in`), in the order they come."""
    level = [folder]
    for _ in range(depth):
        level = [child for parent in level for child in folders_in(parent)]
    return [file for below in level for file in files_in(below) if file.name == name]


#: Folders :func:`roots_under` never enters: a tool's own, not a run's (hidden ones neither).
_NOT_RUNS = frozenset({"__pycache__", "node_modules", "site-packages", "wandb"})


def roots_under(folder: Path, is_root: Callable[[Path], bool], *, depth: int = 6,
                limit: int = 20_000) -> list[Path]:
    """The shallowest folders under ``folder`` (not itself) that ``is_root`` accepts, at most
    ``depth`` levels down, level by level in name order, a found root not entered again;
    hidden folders and :data:`_NOT_RUNS` are not entered, and no more than ``limit`` folders
    are looked at (a home folder given by mistake ends quickly)."""
    found: list[Path] = []
    level, seen = [folder], 0
    for _ in range(depth):
        below: list[Path] = []
        for parent in level:
            for child in folders_in(parent):
                if child.name.startswith(".") or child.name in _NOT_RUNS:
                    continue
                seen += 1
                try:
                    (found if is_root(child) else below).append(child)
                except OSError:  # under a folder this user may no longer read: passed over
                    pass
                if seen >= limit:
                    return found
        level = below
    return found


def natural(name: str) -> tuple[tuple[object, ...], str]:
    """A sort key putting names in the order people count them: runs of digits as numbers
    (``b4`` before ``b16``, ``version_9`` before ``version_10``), the rest as text; names
    that this makes equal (``s01``, ``s1``) stay in name order.

    >>> sorted(["b16", "b4", "b64", "b8"], key=natural)
    ['b4', 'b8', 'b16', 'b64']
    >>> sorted(["s1", "s10", "s01", "s1b2", "s1b"], key=natural)
    ['s01', 's1', 's1b', 's1b2', 's10']
    """
    parts = re.split(r"(\d+)", name)  # text, digits, text, ...: like parts compare alike
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), name


@lru_cache(maxsize=LISTINGS)
def _entries(folder: str, _mtime: int, _inode: int) -> tuple[tuple[str, str], ...]:
    """(name, ``file`` / ``folder`` / ``other``) of each entry of ``folder`` in name order; kept
    for the folder's mtime, which an entry added, removed or renamed changes, so the formats
    that look at one folder in turn (a sweep's folder of 5,000 logs) list it once."""
    try:
        with os.scandir(folder) as listing:
            entries = [(entry.name, _kind(entry)) for entry in listing]
    except OSError:
        return ()
    return tuple(sorted(entries))


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        return "file" if entry.is_file() else "folder" if entry.is_dir() else "other"
    except OSError:  # a link in a loop
        return "other"


def passed_over(root: Path, *, depth: int = 8, limit: int = 20_000,
                left: Callable[[Path, str], bool] | None = None) -> list[str]:
    """What under the folder ``root`` no reader can read, as ``relative/path (why)``: FIFOs,
    sockets and devices, symbolic links that lead nowhere or in a loop, and files and folders
    this user may not read. Hidden folders are not entered, nor linked ones (no loop is
    followed); ``depth`` folders down and ``limit`` entries at most. ``left(link, target)``
    says which links to nothing their writer leaves so by design (a tool's link to a file on
    the machine the run was made on): those are not named."""
    found: list[str] = []
    folders, seen = [(root, 0)], 0
    while folders and seen < limit:
        folder, level = folders.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except PermissionError:
            found.append(f"{_relative(folder, root)}/ (permission denied)")
            continue
        except OSError:
            continue
        for entry in entries:
            seen += 1
            why = _unreadable(entry, left)
            if why:
                slash = "/" if entry.is_dir(follow_symlinks=False) else ""
                found.append(f"{_relative(Path(entry.path), root)}{slash} ({why})")
            elif entry.is_dir(follow_symlinks=False) and level < depth \
                    and not entry.name.startswith("."):
                folders.append((Path(entry.path), level + 1))
    return sorted(found)


def _unreadable(entry: os.DirEntry[str],
                left: Callable[[Path, str], bool] | None = None) -> str | None:
    """Why no reader can read ``entry`` (None when one can, or it is a folder to enter, or a
    link to nothing that ``left`` expects)."""
    try:
        if entry.is_symlink():
            os.stat(entry.path)  # where it leads
            if entry.is_dir():
                return None  # a linked folder: not entered
        if entry.is_dir(follow_symlinks=False):
            return None if _may(entry.path, os.R_OK | os.X_OK) else "permission denied"
        if not entry.is_file():
            return "a FIFO, socket or device, not a regular file"
    except FileNotFoundError:
        return None if _left_so(entry, left) else "a symbolic link to nothing"
    except OSError as exc:
        return "a symbolic link in a loop" if exc.errno == errno.ELOOP else exc.strerror
    return None if _may(entry.path, os.R_OK) else "permission denied"


def _left_so(entry: os.DirEntry[str], left: Callable[[Path, str], bool] | None) -> bool:
    """Whether ``entry``, a link to nothing, is one that ``left`` expects."""
    if left is None or not entry.is_symlink():
        return False
    try:
        target = os.readlink(entry.path)
    except OSError:  # gone meanwhile
        return False
    return left(Path(entry.path), target)


def may_read(path: Path) -> bool:
    """Whether this process may read the file ``path`` (by the ids it opens files with)."""
    return _may(str(path), os.R_OK)


def _may(path: str, mode: int) -> bool:
    """Whether this process may ``mode`` ``path``, by the ids it opens files with."""
    return os.access(path, mode, effective_ids=os.access in os.supports_effective_ids)


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path != root else "."


def read_file(file: Path, *, in_place: bool = True) -> Buffer:
    """The file's bytes. With ``in_place``, in a writable buffer that a decoder may rearrange
    in place (no copy of a large file): an anonymous ``mmap`` (:func:`writable`), else a
    ``bytearray``; else ``bytes`` (no zeroed buffer first: 30 ms less for 50 MB). Raises
    ``OSError``, and :class:`InputError` for a Git LFS pointer."""
    with file.open("rb") as handle:
        refuse_lfs_pointer(file, handle.read(len(LFS_POINTER)))
        handle.seek(0)
        if not in_place:
            return handle.read()
        size = os.fstat(handle.fileno()).st_size
        if not size:
            return bytearray(handle.read())
        data = writable(size)
        got = handle.readinto(data)
        if got < size:  # shrank meanwhile
            return bytearray(data[:got])
        more = handle.read()  # grew meanwhile
    return bytearray(data[:]) + more if more else data


#: Files smaller than this are read into a bytearray. A map fills faster, but the whole read
#: of a file is slower from it (a 54 MB event file: 0.39 s against 0.26 s in a fresh
#: process; a 550 KB one: 4x the bytearray's fill time), and a huge page can stall on the
#: kernel's compaction for milliseconds when memory is fragmented.
MAP_FROM = 256 << 20


def writable(size: int) -> Buffer:
    """``size`` writable bytes (contents undefined until written): for a large file an
    anonymous map in huge pages where the kernel gives them (filled 2.5× faster than small
    pages, and the random reads of the decoders miss the TLB less), else with its small pages
    mapped at once; a bytearray for a small one."""
    if size >= MAP_FROM and hasattr(mmap, "MAP_POPULATE"):
        huge = _huge_pages()
        try:
            data = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                             | (0 if huge else mmap.MAP_POPULATE))
        except (OSError, ValueError):
            return bytearray(size)
        if huge:
            with suppress(OSError):
                data.madvise(mmap.MADV_HUGEPAGE)
        return data
    return bytearray(size)


@lru_cache(maxsize=1)
def _huge_pages() -> bool:
    """Whether a mapping that asks for transparent huge pages gets them."""
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    return hasattr(mmap, "MADV_HUGEPAGE") and "[never]" not in setting
