"""``python -m rara_worker``: serve the built-in example capabilities."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import tempfile
from pathlib import Path

from rara_worker import conformance
from rara_worker.attempts import DEFAULT_RETENTION_SECONDS, DetachConfig
from rara_worker.auth import TOKENS_ENV, TlsFiles, Tokens
from rara_worker.examples import build_registry
from rara_worker.log import DEFAULT_MAX_KEPT_EVENTS
from rara_worker.server import DEFAULT_GRACE_SECONDS, serve
from rara_worker.store import open_store
from rara_worker.telemetry import configure as configure_telemetry

log = logging.getLogger("rara_worker")


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="rara_worker", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=50051, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--artifacts-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "rara-artifacts",
        help="where artifact files are written without an artifact store (default: $TMPDIR/rara-artifacts)",
    )
    parser.add_argument(
        "--artifacts-uri",
        default=os.environ.get("RARA_ARTIFACTS_URI") or None,
        help="the artifact store, the same as rara's: s3://bucket/prefix or file:///dir "
        "(default: $RARA_ARTIFACTS_URI; unset: --artifacts-dir)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ.get("RARA_WORKER_DATA_DIR") or Path(tempfile.gettempdir()) / "rara-data"),
        help="the only directory the examples read 'path' inputs from "
        "(default: $RARA_WORKER_DATA_DIR, else $TMPDIR/rara-data, created empty)",
    )
    parser.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE_SECONDS,
        help="seconds running work gets to finish on shutdown",
    )
    parser.add_argument(
        "--retention", type=float, default=DEFAULT_RETENTION_SECONDS, metavar="SECONDS",
        help="seconds a finished detachable attempt stays attachable, so a late Attach "
        f"still gets its outcome (default {DEFAULT_RETENTION_SECONDS:.0f})",
    )
    parser.add_argument(
        "--max-kept-events", type=int, default=DEFAULT_MAX_KEPT_EVENTS, metavar="N",
        help="events a detached attempt keeps until an Attach acknowledges them; at the "
        f"bound its progress events stop (default {DEFAULT_MAX_KEPT_EVENTS})",
    )
    parser.add_argument(
        "--conformance", action="store_true",
        default=os.environ.get("RARA_WORKER_CONFORMANCE", "") in ("1", "true"),
        help="also serve the conformance capabilities rara's conformance suite drives "
        "(conformance.echo, .sleep, .fail, .chatty; default: $RARA_WORKER_CONFORMANCE=1)",
    )
    _auth_arguments(parser)
    args = parser.parse_args(argv)
    try:
        detach = DetachConfig(args.retention, args.max_kept_events)
        tokens = None if args.no_auth else Tokens.load(file=args.tokens_file)
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    if tokens is not None and len(tokens) == 0:
        parser.error(
            f"no token: set {TOKENS_ENV} (comma-separated, two during a rotation) or "
            "--tokens-file; --no-auth serves without (never outside a test)"
        )
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        parser.error("--tls-client-ca needs --tls-cert and --tls-key")
    tls = TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    registry = build_registry(args.data_dir)
    if args.conformance:
        conformance.register(registry)
    log.info("example capabilities read path inputs only below %s", args.data_dir.resolve())
    provider = configure_telemetry()  # None (no cost) unless OTEL_EXPORTER_OTLP_ENDPOINT is set
    try:
        asyncio.run(
            serve(registry, host=args.host, port=args.port,
                  artifacts_dir=open_store(args.artifacts_uri) if args.artifacts_uri else args.artifacts_dir,
                  grace=args.grace, detach=detach, tokens=tokens, tls=tls)
        )
    finally:
        if provider is not None:
            provider.shutdown()  # exports what is still batched


def _auth_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``auth.py``: tokens, TLS, and the explicit way to go without."""
    parser.add_argument(
        "--tokens-file", type=Path, default=None, metavar="PATH",
        help=f"accepted bearer tokens, one per line, in addition to ${TOKENS_ENV} "
        "(comma-separated); calls without one get UNAUTHENTICATED",
    )
    parser.add_argument(
        "--no-auth", action="store_true",
        help="accept calls without a token (tests only; the log says so)",
    )
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="PEM",
                        help="serve TLS with this certificate chain (with --tls-key)")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="PEM",
                        help="the private key of --tls-cert")
    parser.add_argument("--tls-client-ca", type=Path, default=None, metavar="PEM",
                        help="require client certificates signed by this CA (mTLS)")


if __name__ == "__main__":
    main()
