"""The artifact store (``RARA_ARTIFACTS_URI``), the same one rara uses: ``s3://bucket/prefix``
or ``file:///dir``. Objects are written by streaming, with their sha256 computed as they are
read from the source, and read back verified against their digest.

| what | key (as rara's ``shared/artifacts/src/location.rs``) |
| --- | --- |
| an artifact of an attempt | ``runs/{run}/{step}/{attempt}/{name}`` |

Memory stays bounded whatever the size: a directory store copies 1 MiB at a time; S3 uploads a
multipart upload of 5 MiB parts (S3's least; 10,000 make 48 GiB), two in flight (``boto3``'s transfer manager on a source that
cannot seek, so parts are read, and hashed, in order).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Protocol

from . import call_log

#: The part size of an S3 multipart upload, and how many are in flight.
PART_BYTES = 5 * 1024 * 1024
PARTS_IN_FLIGHT = 2
CHUNK = 1024 * 1024

_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,255}$")


class DigestMismatch(Exception):
    """An object's sha256 is not the digest it was reported with."""


class Hashing:
    """A readable that hashes (sha256) and counts what is read through it, in order. It has
    no ``seek``: a reader must take it as a stream."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self._hash = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        chunk = self._source.read(n)
        self._hash.update(chunk)
        self.size += len(chunk)
        return chunk

    @property
    def digest(self) -> str:
        return "sha256:" + self._hash.hexdigest()


def artifact_key(run_id: str, step_id: str, attempt: int, name: str) -> str:
    """The key of an artifact; the name is 1 to 256 of ``A-Z a-z 0-9 . _ -``, not ``.``-first."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"artifact name {name!r} must be 1 to 256 of A-Z, a-z, 0-9, '.', '_', '-', not starting with '.'"
        )
    return f"runs/{run_id}/{step_id}/{attempt}/{name}"


class Store(Protocol):
    """What the context needs of a store."""

    def put(self, key: str, source: IO[bytes], media_type: str) -> tuple[str, int, str]:
        """Streams ``source`` to ``key``; returns (uri, size, digest)."""
        ...

    def open(self, uri: str) -> IO[bytes]:
        """The object at ``uri`` (inside the store), streamed."""
        ...


def _safe_key(key: str) -> bool:
    parts = key.split("/")
    return bool(key) and all(p not in ("", ".", "..") for p in parts) and "\\" not in key and "\0" not in key


class FileStore:
    """A directory: a temporary file beside the key, renamed into place when complete."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def put(self, key: str, source: IO[bytes], media_type: str) -> tuple[str, int, str]:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.partial-{uuid.uuid4().hex}")
        reader = Hashing(source)
        try:
            with partial.open("wb") as out:
                shutil.copyfileobj(reader, out, CHUNK)
            partial.replace(path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return path.as_uri(), reader.size, reader.digest

    def open(self, uri: str) -> IO[bytes]:
        prefix = self.root.as_uri() + "/"
        if not uri.startswith(prefix) or not _safe_key(uri[len(prefix):]):
            raise ValueError(f"{uri} is not inside the artifact store {self.root.as_uri()}")
        return (self.root / uri[len(prefix):]).open("rb")


class S3Store:
    """An S3 bucket (``boto3``; ``AWS_ENDPOINT_URL`` for LocalStack, path-style there)."""

    def __init__(self, bucket: str, prefix: str, client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        if client is None:
            import boto3
            from botocore.config import Config

            style = "path" if os.environ.get("AWS_ENDPOINT_URL") else "auto"
            config = Config(s3={"addressing_style": style}, request_checksum_calculation="when_required")
            client = boto3.client("s3", config=config)
            call_log.install(client, self.prefix)
        self._client = client

    def _object(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, source: IO[bytes], media_type: str) -> tuple[str, int, str]:
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES,
            max_concurrency=PARTS_IN_FLIGHT, max_io_queue=PARTS_IN_FLIGHT,
        )
        # Parts read ahead of a stream that cannot seek are held in memory (ten by default):
        # as many as are in flight bounds memory by the parts, whatever the size.
        config.max_in_memory_upload_chunks = PARTS_IN_FLIGHT
        reader = Hashing(source)
        obj = self._object(key)
        self._client.upload_fileobj(
            reader, self.bucket, obj, ExtraArgs={"ContentType": media_type}, Config=config
        )
        return f"s3://{self.bucket}/{obj}", reader.size, reader.digest

    def open(self, uri: str) -> IO[bytes]:
        base = f"s3://{self.bucket}/" + (f"{self.prefix}/" if self.prefix else "")
        if not uri.startswith(base) or not _safe_key(uri[len(base):]):
            raise ValueError(f"{uri} is not inside the artifact store {base}")
        body = self._client.get_object(Bucket=self.bucket, Key=uri[len(f"s3://{self.bucket}/"):])["Body"]
        return body  # type: ignore[no-any-return]


def open_store(uri: str) -> Store:
    """The store ``uri`` names (``RARA_ARTIFACTS_URI``)."""
    if uri.startswith("file://"):
        path = uri[len("file://"):]
        if not path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"RARA_ARTIFACTS_URI {uri!r}: a file:// store needs an absolute directory")
        return FileStore(Path(path))
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        if not re.fullmatch(r"[a-z0-9.-]{3,63}", bucket):
            raise ValueError(f"RARA_ARTIFACTS_URI {uri!r}: the bucket must be 3 to 63 of a-z, 0-9, '.', '-'")
        return S3Store(bucket, prefix)
    raise ValueError(f"RARA_ARTIFACTS_URI {uri!r}: expected s3://bucket/prefix or file:///dir")


@contextmanager
def source_of(data: bytes | str | os.PathLike[str] | IO[bytes]) -> Iterator[IO[bytes]]:
    """A readable of ``data``: bytes or text, a path (opened, read as it goes), or a stream."""
    import io

    if isinstance(data, (bytes, bytearray, memoryview)):
        yield io.BytesIO(bytes(data))
    elif isinstance(data, str):
        yield io.BytesIO(data.encode())
    elif isinstance(data, os.PathLike):
        with open(data, "rb") as f:
            yield f
    elif hasattr(data, "read"):
        yield data
    else:
        raise TypeError(f"write_artifact takes bytes, str, a path or a binary stream, not {type(data).__name__}")


def copy_verified(source: IO[bytes], out: IO[bytes], digest: str | None) -> tuple[int, str]:
    """Copies ``source`` to ``out`` hashing it; raises DigestMismatch unless it is ``digest``."""
    reader = Hashing(source)
    shutil.copyfileobj(reader, out, CHUNK)
    if digest and reader.digest != digest:
        raise DigestMismatch(f"the object's digest is {reader.digest}, not the reported {digest}")
    return reader.size, reader.digest
