"""Execute: event order, outputs, artifacts and structured errors."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from support import collect, kinds, request, sha256_file

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc

TEXT = "the cat sat\non the mat\nthe end\n"


def path_of(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme == "file"
    return Path(unquote(parsed.path))


async def test_text_stats_streams_progress_then_artifact_then_succeeds(
    stub: pb_grpc.ExecutorServiceStub, tmp_path: Path
) -> None:
    req = request("text.stats", json.dumps({"text": TEXT, "top": 2}))
    events = await collect(stub, req)
    names = kinds(events)
    assert "progress" in names
    assert names[-2:] == ["artifact", "succeeded"]
    progress = [e.progress.fraction for e in events if e.HasField("progress")]
    assert progress == sorted(progress) and progress[-1] == 1.0

    output = json.loads(events[-1].succeeded.output_json)
    assert output["lines"] == 3 and output["words"] == 8 and output["chars"] == len(TEXT)
    assert output["top_words"] == [{"word": "the", "count": 3}, {"word": "cat", "count": 1}]

    artifact = events[-2].artifact
    assert list(events[-1].succeeded.artifacts) == [artifact]
    assert artifact.name == "stats.json" and artifact.media_type == "application/json"
    path = path_of(artifact.uri)
    assert path.is_relative_to(tmp_path / "artifacts" / "runs" / req.run_id / req.step_id)
    assert artifact.size_bytes == path.stat().st_size
    assert artifact.digest == sha256_file(path)
    assert json.loads(path.read_text()) == output


async def test_text_stats_reads_a_file_below_the_data_dir(
    stub: pb_grpc.ExecutorServiceStub, data_dir: Path
) -> None:
    (data_dir / "texts").mkdir()
    source = data_dir / "texts" / "in.txt"
    source.write_text("one two two\n")
    for path in ("texts/in.txt", str(source), "texts/../texts/in.txt"):
        events = await collect(stub, request("text.stats", json.dumps({"path": path})))
        assert json.loads(events[-1].succeeded.output_json)["words"] == 3, path


async def test_dataset_split_is_deterministic_and_complete(
    stub: pb_grpc.ExecutorServiceStub, data_dir: Path
) -> None:
    csv_path = data_dir / "rows.csv"
    csv_path.write_text("id,label\n" + "".join(f"{i},l{i % 3}\n" for i in range(10)))
    body = json.dumps({"path": "rows.csv", "ratios": {"train": 0.8, "test": 0.2}, "seed": 7})
    first = await collect(stub, request("dataset.split", body))
    second = await collect(stub, request("dataset.split", body))

    assert json.loads(first[-1].succeeded.output_json)["counts"] == {"train": 8, "test": 2}
    digests = [[a.digest for a in run[-1].succeeded.artifacts] for run in (first, second)]
    assert digests[0] == digests[1]
    ids = []
    for artifact in first[-1].succeeded.artifacts:
        path = path_of(artifact.uri)
        assert artifact.digest == sha256_file(path)
        ids += [json.loads(line)["id"] for line in path.read_text().splitlines()]
    assert sorted(ids, key=int) == [str(i) for i in range(10)]


async def test_sync_handler_runs_in_a_thread_and_reports(stub: pb_grpc.ExecutorServiceStub) -> None:
    events = await collect(stub, request("sync.echo", '{"a": 1}'))
    assert kinds(events) == ["accepted", "running", "progress", "artifact", "succeeded"]
    output = json.loads(events[-1].succeeded.output_json)
    assert output["echo"] == {"a": 1} and output["fence"] == 42
    assert events[1].running.capability_version == "1.0.0", "running says which version runs"


async def test_the_context_has_the_run_id_and_a_map_childs_index(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    child = request("sync.echo", map_index=3)
    output = json.loads((await collect(stub, child))[-1].succeeded.output_json)
    assert (output["run_id"], output["map_index"]) == (child.run_id, 3)
    plain = json.loads((await collect(stub, request("sync.echo")))[-1].succeeded.output_json)
    assert plain["map_index"] is None, "a step that is not a map child has no index"


async def test_text_split_gives_the_parts_a_map_runs_over(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    text = "first para\nstill first\n\n  \nsecond\n\n\nthird\n"
    events = await collect(stub, request("text.split", json.dumps({"text": text})))
    assert kinds(events)[-1] == "succeeded"
    output = json.loads(events[-1].succeeded.output_json)
    assert output == {
        "count": 3,
        "parts": [
            {"index": 0, "text": "first para\nstill first"},
            {"index": 1, "text": "second"},
            {"index": 2, "text": "third"},
        ],
    }
    lines = await collect(stub, request("text.split", json.dumps({"text": text, "by": "line"})))
    assert json.loads(lines[-1].succeeded.output_json)["count"] == 4
    bad = await collect(stub, request("text.split", json.dumps({"text": "x", "by": "word"})))
    assert kinds(bad)[-1] == "failed" and bad[-1].failed.error.code == "INVALID_INPUT"


@pytest.mark.parametrize(
    ("operation", "code", "retryable"),
    [
        ("fail.retryable", "UPSTREAM_DOWN", True),
        ("fail.permanent", "NOT_FOUND", False),
        ("fail.value", "INTERNAL", False),
        ("fail.timeout", "TIMEOUT", True),
        ("bad.output", "INVALID_OUTPUT", False),
    ],
)
async def test_handler_failures_become_structured_errors(
    stub: pb_grpc.ExecutorServiceStub, operation: str, code: str, retryable: bool
) -> None:
    events = await collect(stub, request(operation))
    assert kinds(events) == ["accepted", "running", "failed"]
    error = events[-1].failed.error
    assert (error.code, error.retryable) == (code, retryable)
    assert error.message


async def test_retryable_error_keeps_its_details(stub: pb_grpc.ExecutorServiceStub) -> None:
    events = await collect(stub, request("fail.retryable"))
    assert dict(events[-1].failed.error.details) == {"upstream": "db"}


@pytest.mark.parametrize(
    ("operation", "version"),
    [("no.such.op", ""), ("text.stats", "9.9.9")],
)
async def test_unknown_operation_or_version_fails_without_retry(
    stub: pb_grpc.ExecutorServiceStub, operation: str, version: str
) -> None:
    events = await collect(stub, request(operation, version=version))
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("UNKNOWN_OPERATION", False)


async def test_unpinned_version_runs_the_newest_and_pinned_runs_that_one(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    newest = await collect(stub, request("versioned"))
    pinned = await collect(stub, request("versioned", version="1.2.0"))
    assert json.loads(newest[-1].succeeded.output_json) == {"version": "1.10.0"}
    assert json.loads(pinned[-1].succeeded.output_json) == {"version": "1.2.0"}


@pytest.mark.parametrize("input_json", ["{not json", "[1, 2]"])
async def test_bad_input_json_is_invalid_input(
    stub: pb_grpc.ExecutorServiceStub, input_json: str
) -> None:
    events = await collect(stub, request("text.stats", input_json))
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("INVALID_INPUT", False)


async def test_handler_input_validation_is_invalid_input(stub: pb_grpc.ExecutorServiceStub) -> None:
    events = await collect(stub, request("dataset.split", '{"rows": [], "ratios": {"a": 0.5}}'))
    assert events[-1].failed.error.code == "INVALID_INPUT"


async def test_malformed_ids_are_rejected(stub: pb_grpc.ExecutorServiceStub) -> None:
    req = request("sleep", '{"seconds": 0}', step_id="../../etc")
    events = await collect(stub, req)
    assert events[-1].failed.error.code == "INVALID_REQUEST"


async def test_sleep_reports_progress_when_it_starts_then_each_second_then_at_the_end(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    events = await collect(stub, request("sleep", '{"seconds": 2.2}'))
    progress = [e for e in events if e.HasField("progress")]
    fractions = [e.progress.fraction for e in progress]
    assert len(fractions) == 4, fractions  # at 0 s, 1 s, 2 s, and at the end
    assert fractions[0] < 0.05 and fractions[-1] == 1.0
    assert fractions[1] == pytest.approx(1 / 2.2, abs=0.05)
    assert fractions[2] == pytest.approx(2 / 2.2, abs=0.05)
    stamps = [e.timestamp.ToDatetime() for e in progress]
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(stamps, stamps[1:])]
    assert all(0.9 < gap < 1.2 for gap in gaps[:2]), gaps
    assert json.loads(events[-1].succeeded.output_json)["slept_seconds"] == pytest.approx(2.2, abs=0.1)


async def test_stats_merge_sums_the_parts_and_ranks_words_over_all(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    parts = [
        {"lines": 2, "words": 5, "chars": 20, "top_words": [{"word": "the", "count": 2}, {"word": "cat", "count": 1}]},
        {"lines": 1, "words": 3, "chars": 9, "top_words": [{"word": "cat", "count": 2}, {"word": "the", "count": 1}]},
    ]
    events = await collect(stub, request("stats.merge", json.dumps({"stats": parts, "top": 1})))
    assert kinds(events)[-1] == "succeeded"
    assert json.loads(events[-1].succeeded.output_json) == {
        "parts": 2, "lines": 3, "words": 8, "chars": 29, "top_words": [{"word": "cat", "count": 3}],
    }
    bad = await collect(stub, request("stats.merge", json.dumps({"stats": [1, 2]})))
    assert kinds(bad)[-1] == "failed" and bad[-1].failed.error.code == "INVALID_INPUT"
