"""Logs on object storage (`s3://bucket/prefix`, `gs://…`): listed and streamed through pyarrow's file
systems, so `ingest` and `fleet ingest` read them as they read local files (gzip included), without a
local copy. S3 takes the usual AWS variables (AWS_ENDPOINT_URL for an S3-compatible server)."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from ..errors import InputError


def is_uri(name: str) -> bool:
    return "://" in name


def absolute_source(name: str) -> str:
    """A log source as another process (a server, a Ray worker) can open it: a URI or `-` as it is, a
    local path made absolute."""
    return name if name == "-" or is_uri(name) else str(Path(name).resolve())


def expand_uri(uri: str, suffixes: tuple[str, ...]) -> list[str]:
    """The object itself, or the log objects under a prefix (sorted), as URIs."""
    from pyarrow import fs

    from ..store.archive import file_system

    filesystem, path = file_system(uri)
    scheme = uri.split("://", 1)[0]
    try:
        info = filesystem.get_file_info(path)
        if info.type == fs.FileType.File:
            return [uri]
        if info.type == fs.FileType.NotFound:
            raise InputError(f"no such object or prefix: {uri}", hint="check the bucket and the key")
        listed = filesystem.get_file_info(fs.FileSelector(path, recursive=True))
    except OSError as exc:
        raise InputError(f"cannot list {uri}: {exc}", hint="check the credentials and AWS_ENDPOINT_URL") from None
    found = sorted(f.path for f in listed if f.type == fs.FileType.File and f.path.endswith(suffixes))
    if not found:
        raise InputError(f"no log files under {uri}", hint=f"expected objects ending in {', '.join(suffixes)}")
    return [f"{scheme}://{p}" for p in found]


def open_uri(uri: str) -> IO[bytes]:
    """A seekable binary stream of one object (pyarrow's NativeFile is a Python file object)."""
    from ..store.archive import file_system

    filesystem, path = file_system(uri)
    try:
        return filesystem.open_input_file(path)
    except OSError as exc:
        raise InputError(f"cannot read {uri}: {exc}", hint="check the key and the credentials") from None
