"""The artifact store (RARA_ARTIFACTS_URI) from the Python side: ``ctx.write_artifact`` streams
bytes, text, a path or a stream with its sha256; ``ctx.read_artifact`` / ``download_artifact``
verify the digest; ``ctx.load_output`` reads an offloaded output back; on LocalStack's S3 a
200 MiB artifact is written with the process's peak RSS under 100 MiB."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from support import localstack_s3
from rara_worker.context import Context
from rara_worker.events import EventStream
from rara_worker.store import DigestMismatch, open_store

ENDPOINT = os.environ.get("AWS_ENDPOINT_URL", "http://localhost:4566")


def _context(store_root: Path) -> Context:
    return Context(
        run_id=str(uuid.uuid4()), step_id=str(uuid.uuid4()), attempt=2, fence=7, deadline=None,
        trace_context={}, artifacts_root=open_store(f"file://{store_root}"), events=EventStream(),
    )


async def test_write_artifact_streams_each_kind_of_data_with_its_digest_and_reads_it_verified(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path / "store")
    source = tmp_path / "source.bin"
    source.write_bytes(b"from a file" * 1000)
    cases = {
        "bytes.bin": (b"raw bytes", b"raw bytes"),
        "text.txt": ("some text", b"some text"),
        "path.bin": (source, source.read_bytes()),
        "stream.bin": (io.BytesIO(b"a stream"), b"a stream"),
    }
    for name, (data, raw) in cases.items():
        artifact = await ctx.write_artifact(name, data, "application/octet-stream")
        assert artifact.size_bytes == len(raw)
        assert artifact.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
        assert artifact.uri.endswith(f"/runs/{ctx.run_id}/{ctx.step_id}/2/{name}"), artifact.uri
        assert await ctx.read_artifact(artifact) == raw
        descriptor = {"uri": artifact.uri, "digest": artifact.digest, "size_bytes": artifact.size_bytes}
        target = await ctx.download_artifact(descriptor, tmp_path / f"copy-{name}")
        assert target.read_bytes() == raw

    # A digest that does not match is refused, and a download leaves nothing behind.
    wrong = {"uri": artifact.uri, "digest": "sha256:" + "0" * 64}
    with pytest.raises(DigestMismatch):
        await ctx.read_artifact(wrong)
    with pytest.raises(DigestMismatch):
        await ctx.download_artifact(wrong, tmp_path / "wrong.bin")
    assert not (tmp_path / "wrong.bin").exists() and not (tmp_path / "wrong.bin.partial").exists()
    # Nothing outside the store is read; names are plain.
    with pytest.raises(ValueError):
        await ctx.read_artifact({"uri": "file:///etc/passwd"})
    with pytest.raises(ValueError):
        await ctx.write_artifact("../escape", b"x")


async def test_load_output_reads_an_offloaded_output_back_and_leaves_other_values(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "store")
    output = {"rows": list(range(1000)), "meta": {"count": 1000}}
    written = await ctx.write_artifact("out.json", json.dumps(output), "application/json")
    reference = {"$stored": {"uri": written.uri, "size_bytes": written.size_bytes, "digest": written.digest}}
    assert await ctx.load_output(reference) == output
    assert await ctx.load_output({"plain": 1}) == {"plain": 1}


# Run in a fresh interpreter, so that its peak RSS is the write's alone.
WRITER = textwrap.dedent(
    """
    import json, random, resource, sys, boto3
    from botocore.config import Config
    from rara_worker.store import open_store

    class Generated:
        def __init__(self, size):
            self.left, self.rng = size, random.Random(47)
        def read(self, n=-1):
            n = self.left if n is None or n < 0 else min(n, self.left)
            self.left -= n
            return self.rng.randbytes(n)

    bucket, size = sys.argv[1], int(sys.argv[2])
    boto3.client("s3", config=Config(s3={"addressing_style": "path"})).create_bucket(Bucket=bucket)
    store = open_store(f"s3://{bucket}/rara")
    uri, written, digest = store.put("runs/r/s/1/big.bin", Generated(size), "application/octet-stream")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"uri": uri, "size": written, "digest": digest, "peak_rss_kib": peak}))
    """
)


@pytest.mark.skipif(not localstack_s3(ENDPOINT), reason="LocalStack's S3 is not reachable (scripts/localstack.sh start)")
def test_a_200_mib_artifact_streams_to_s3_with_peak_rss_under_100_mib() -> None:
    size = 200 * 1024 * 1024
    bucket = f"rara-py-{uuid.uuid4().hex[:12]}"
    env = {**os.environ, "AWS_ENDPOINT_URL": ENDPOINT, "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run([sys.executable, "-c", WRITER, bucket, str(size)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    print(f"200 MiB to S3: peak RSS {report['peak_rss_kib'] / 1024:.1f} MiB")
    assert report["size"] == size
    assert report["peak_rss_kib"] < 100 * 1024, report
    # The same bytes, generated again, have the reported digest; so does the object in S3.
    rng, expected = random.Random(47), hashlib.sha256()
    for _ in range(size // (8 * 1024 * 1024)):
        expected.update(rng.randbytes(8 * 1024 * 1024))
    assert report["digest"] == "sha256:" + expected.hexdigest()
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    store = open_store(f"s3://{bucket}/rara")
    actual = hashlib.sha256()
    body = store.open(report["uri"])
    while chunk := body.read(8 * 1024 * 1024):
        actual.update(chunk)
    assert "sha256:" + actual.hexdigest() == report["digest"]
