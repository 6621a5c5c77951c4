//! Generates the `rara.v1` client and server from `proto/rara/v1/executor.proto` into
//! `OUT_DIR` (never committed, never edited by hand). `protoc` is the vendored binary, handed
//! to prost-build directly so no environment variable has to be set.

use std::io;

const PROTO: &str = "../../proto/rara/v1/executor.proto";
const INCLUDE: &str = "../../proto";

fn main() -> io::Result<()> {
    println!("cargo:rerun-if-changed={PROTO}");
    let protoc = protoc_bin_vendored::protoc_bin_path().map_err(io::Error::other)?;
    let well_known = protoc_bin_vendored::include_path().map_err(io::Error::other)?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .compile_with_config(config, &[PROTO.into()], &[INCLUDE.into(), well_known])
}
