"""Runs in object storage or behind HTTP: any path fsspec understands (``s3://``, ``gs://``,
``az://``, ``https://``, ...; the optional ``remote`` extra, ``pip install
'runcompare[remote]'``).

A remote run is mirrored into the cache folder (``<cache>/remote/<hash of the host>/<host>/
<the URL's path>``, so the run is named as on disk, after its folder) and read there by the
same readers as a local one. The mirror keeps, for every object, its ETag (else its size and
modification time) and downloads only the objects whose key changed, and removes those that
are gone; an object with neither is downloaded every time. So the parse cache, which checks
the mirrored files, is used while the objects are unchanged. An object whose key would leave
the mirror (``../``) is refused. A ``runcompare.toml`` beside the run (in the folder above
it) is mirrored beside the mirror, where the reader looks for it as for a local run. Writing (``export -o s3://...``) writes a local copy and
uploads it.

Credentials and endpoints come from where fsspec's filesystems look (the environment, such as
``AWS_PROFILE`` or ``FSSPEC_S3_ENDPOINT_URL``, and their config files), never from the command
line. ``Path("s3://bucket/x")`` reads as ``s3:/bucket/x``; :func:`remote_url` gives the URL back
for a path that does not exist here and starts with a known protocol.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from .cache import cache_dir
from .errors import InputError, RuncompareError, UsageError

__all__ = ["localize", "move", "origin", "publish", "put_bytes", "remote_url", "tails", "upload"]

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_FLATTENED = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):/(?!/)")
#: Protocols recognised in a flattened path (``s3:/bucket``) even without fsspec installed.
_COMMON = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "http", "https",
                     "hf", "ftp", "sftp", "ssh", "hdfs", "webhdfs", "oci", "oss", "memory"})
#: The manifest's entry for the runcompare.toml beside the run (no object key has it).
_BESIDE = "../runcompare.toml"
_HINT = "install the remote extra: pip install 'runcompare[remote]'"


def remote_url(path: str | Path) -> str | None:
    """The URL ``path`` names, or None for a local path.

    >>> remote_url("s3://bucket/runs/a"), remote_url(Path("s3://bucket/runs/a"))
    ('s3://bucket/runs/a', 's3://bucket/runs/a')
    >>> remote_url("runs/a"), remote_url("file:///tmp/a"), remote_url(Path("/tmp/a"))
    (None, None, None)
    """
    text = path.as_posix() if isinstance(path, Path) else str(path)
    match = _URL.match(text)
    if match is not None:
        return None if match.group(1).lower() == "file" else text
    flat = _FLATTENED.match(text)
    if flat is not None and flat.group(1).lower() in _protocols() and not Path(text).exists():
        return _FLATTENED.sub(lambda m: f"{m.group(1)}://", text, count=1)
    return None


def _protocols() -> frozenset[str]:
    try:
        from fsspec.registry import known_implementations
    except ImportError:
        return _COMMON
    return _COMMON | frozenset(known_implementations)


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError as exc:
        raise InputError(f"{url}: reading remote paths needs fsspec; {_HINT}") from exc
    try:
        found: tuple[Any, str] = fsspec.core.url_to_fs(url)
        return found
    except (ImportError, ValueError) as exc:  # the protocol's package is missing
        raise InputError(f"{url}: {exc}; {_HINT} (and the package for this protocol)") from exc


@contextlib.contextmanager
def _translated(url: str, *, writing: bool = False) -> Iterator[None]:
    """Third-party errors of a remote call as :class:`InputError`, naming the URL. Around a
    write (nothing of runcompare's inside), any error the filesystem raises is one: an HTTP
    server that refuses the upload raises its client library's own error."""
    try:
        yield
    except RuncompareError:
        raise
    except FileNotFoundError as exc:
        raise InputError(f"{url}: no such file or directory") from exc
    except PermissionError as exc:
        raise InputError(f"{url}: permission denied ({exc}); check the credentials in the "
                         "environment or the filesystem's config") from exc
    except OSError as exc:
        raise InputError(f"{url}: cannot be {'written' if writing else 'read'} ({exc})") from exc
    except Exception as exc:
        if not writing:
            raise
        raise InputError(f"{url}: cannot be written ({type(exc).__name__}: {exc}); write to "
                         "a local path or a store fsspec can write to (s3://, gs://, az://)"
                         ) from exc


def localize(url: str) -> Path:
    """The local mirror of the file or folder at ``url``, brought up to date."""
    fs, root = _filesystem(url)
    with _translated(url):
        objects = _objects(fs, root, url)
        local, manifest_file = _mirror(url)
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        kept, fetch = {}, []
        for rel, (remote, key) in sorted(objects.items()):
            target = local / rel if rel else local
            if key is None or manifest.get(rel) != key or not target.is_file():
                fetch.append((remote, target))
            kept[rel] = key
        _download(fs, fetch)
        _prune(local, set(objects), single=("" in objects))
        kept[_BESIDE] = _sidecar(fs, root, local.parent, manifest.get(_BESIDE))
        manifest_file.parent.mkdir(parents=True, exist_ok=True)
        manifest_file.write_text(json.dumps(kept, sort_keys=True), encoding="utf-8")
    return local


def _mirror(url: str) -> tuple[Path, Path]:
    """Where ``url`` is mirrored and its manifest kept: the URL's path under a folder of its
    scheme and host (so runs in ``.../a/x`` and ``.../b/x`` are told apart by their parent
    folders, as on disk).

    >>> local, manifest = _mirror("s3://bucket/sweeps/runs/a")
    >>> local.parts[-4:]
    ('bucket', 'sweeps', 'runs', 'a')
    """
    parts = urlsplit(url)
    steps = [step for step in parts.path.split("/") if step]
    if any(step in (".", "..") for step in steps):
        raise InputError(f"{url}: a path with . or .. parts is not read; give the path as is")
    host = f"{parts.scheme}://{parts.netloc}"
    base = cache_dir() / "remote" / hashlib.sha256(host.encode()).hexdigest()[:12]
    local = base.joinpath(_safe(parts.netloc) or "host", *steps) if steps else base / "root"
    manifest = base / ".manifests" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.json"
    return local, manifest


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _sidecar(fs: Any, root: str, mirror: Path, known: Any) -> Any:
    """The ``runcompare.toml`` beside the run (in its parent), which a local run's reader
    looks for too, mirrored into the mirror's parent ``mirror`` when its key is not ``known``
    (removed when it is gone); returns its key."""
    from .resolve import SIDECAR

    parent = root.rstrip("/").rsplit("/", 1)[0]
    beside, target = f"{parent}/{SIDECAR}", mirror / SIDECAR
    if parent == root.rstrip("/") or not fs.isfile(beside):
        target.unlink(missing_ok=True)
        return None
    key = _key(fs.info(beside))
    if key is None or key != known or not target.is_file():
        _download(fs, [(beside, target)])
    return key


def _objects(fs: Any, root: str, url: str) -> dict[str, tuple[str, Any]]:
    """Relative path ("" for a single file) -> (remote path, key) of every object at ``root``."""
    if not fs.isdir(root):
        info = fs.info(root)
        return {"": (root, _key(info))}
    found = fs.find(root, detail=True)
    base = root.rstrip("/")
    out = {}
    for remote, info in found.items():
        if info.get("type") == "directory":
            continue
        rel = remote[len(base):].lstrip("/") if remote.startswith(base) else PurePosixPath(
            remote).name
        parts = PurePosixPath(rel).parts
        if not rel or ".." in parts or rel.startswith("/"):
            raise InputError(f"{url}: holds an object {remote!r} that would be written outside "
                             "the mirror; refusing to read it")
        out[rel] = (remote, _key(info))
    if not out:
        raise InputError(f"{url}: no such file or directory (the prefix holds no object)")
    return out


def _key(info: dict[str, Any]) -> Any:
    """The ETag, else the size and modification time, else None (download every time)."""
    for field in ("ETag", "etag", "md5", "Content-MD5"):
        if info.get(field):
            return f"{field}:{info[field]}"
    mtime = next((info[k] for k in ("mtime", "LastModified", "last_modified", "updated",
                                     "Last-Modified") if info.get(k)), None)
    if mtime is None or info.get("size") is None:
        return None
    return f"size:{info['size']} mtime:{mtime}"


def _download(fs: Any, pairs: list[tuple[str, Path]]) -> None:
    """Fetch each (remote path, local target): all in one call, which an asynchronous
    filesystem (S3, GCS, Azure, HTTP) runs as many requests in flight, so a sweep of
    hundreds of objects costs a few round trips, not one each. Each target is written
    through a temporary file in its folder and renamed into place."""
    if not pairs:
        return
    temporary: list[str] = []
    try:
        for _, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(dir=target.parent, prefix=target.name,
                                            suffix=".part")
            os.close(handle)
            temporary.append(name)
        fs.get([remote for remote, _ in pairs], temporary)
        for name, (_, target) in zip(temporary, pairs):
            os.replace(name, target)
    except BaseException:
        for name in temporary:
            Path(name).unlink(missing_ok=True)
        raise


def _prune(local: Path, kept: set[str], *, single: bool) -> None:
    """Remove mirrored files whose object is gone."""
    if single or not local.is_dir():
        return
    for file in sorted(local.rglob("*"), reverse=True):
        rel = file.relative_to(local).as_posix()
        if file.is_file() and rel not in kept:
            file.unlink()
        elif file.is_dir() and not any(file.iterdir()):
            file.rmdir()


def origin(path: Path, mirrors: dict[Path, str]) -> str | None:
    """The URL of a path inside one of the ``mirrors`` (local mirror -> URL), else None.

    >>> origin(Path("/c/r/ab/runs/a"), {Path("/c/r/ab/runs"): "s3://b/runs"})
    's3://b/runs/a'
    """
    for local, url in mirrors.items():
        if path == local:
            return url
        if local in path.parents:
            return f"{url.rstrip('/')}/{path.relative_to(local).as_posix()}"
    return None


def upload(url: str, write: Callable[[Path], Any], *, force: bool) -> Any:
    """``write(local)`` into a temporary folder, then what it wrote uploaded to ``url``
    (replacing what is there only with ``force``); returns what ``write`` returned."""
    fs, root = _filesystem(url)
    with _translated(url, writing=True):
        if fs.exists(root) and not force:
            raise UsageError(f"{url} exists; pass --force to replace it")
    staging = Path(tempfile.mkdtemp(prefix="runcompare-upload-"))
    try:
        local = staging / (PurePosixPath(root.rstrip("/")).name or "export")
        result = write(local)
        with _translated(url, writing=True):
            if fs.exists(root):
                fs.rm(root, recursive=True)
            if local.is_dir():
                fs.put(f"{local}/", root.rstrip("/") + "/", recursive=True)
            else:
                fs.put_file(str(local), root)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def put_bytes(url: str, data: bytes) -> None:
    """``data`` as the object at ``url`` (a worker's partition, written where it was read)."""
    fs, root = _filesystem(url)
    with _translated(url, writing=True):
        fs.pipe_file(root, data)


def move(pairs: list[tuple[str, str]]) -> None:
    """Each object at the first URL moved to the second, in the same store: copied in one
    call (an asynchronous filesystem keeps the copies in flight), then the sources removed."""
    if not pairs:
        return
    fs, _ = _filesystem(pairs[0][0])
    sources = [_filesystem(source)[1] for source, _ in pairs]
    with _translated(pairs[0][0], writing=True):
        fs.copy(sources, [_filesystem(target)[1] for _, target in pairs])
        fs.rm(sources)


def publish(url: str, write: Callable[[str], list[tuple[str, str]]], *,
            force: bool) -> list[str]:
    """``write(staging)`` fills a fresh prefix beside ``url`` (its URL) and returns (object
    URL, name under ``url``) pairs; then what is at ``url`` is removed (only with ``force``:
    without, an existing ``url`` is refused before ``write`` runs), the objects are moved to
    their names (:func:`move`) and the staging prefix removed, also on failure. Returns the
    names."""
    fs, root = _filesystem(url)
    base = root.rstrip("/")
    parent, _, name = base.rpartition("/")
    staging = f"{parent}/.{name or 'export'}.{secrets.token_hex(6)}.tmp"
    with _translated(url, writing=True):
        if fs.exists(base) and not force:
            raise UsageError(f"{url} exists; pass --force to replace it")
    try:
        pairs = write(fs.unstrip_protocol(staging))
        with _translated(url, writing=True):
            if fs.exists(base):
                fs.rm(base, recursive=True)
        move([(source, f"{url.rstrip('/')}/{target}") for source, target in pairs])
        return [target for _, target in pairs]
    finally:
        with _translated(url, writing=True):
            if fs.exists(staging):
                fs.rm(staging, recursive=True)


def tails(url: str, names: list[str], size: int) -> list[bytes]:
    """The last ``size`` bytes (or all) of each object ``url``/name, fetched in one call (an
    asynchronous filesystem keeps the requests in flight)."""
    fs, root = _filesystem(url)
    base = root.rstrip("/")
    paths = [f"{base}/{name}" for name in names]
    with _translated(url):
        found = fs.find(base, detail=True) if paths else {}
        sizes = [found[path]["size"] for path in paths]
        tails: list[bytes] = fs.cat_ranges(paths, [max(0, total - size) for total in sizes],
                                           sizes)
        return tails
