//! `rara artifact get RUN STEP NAME [-o FILE]`: downloads an artifact from the artifact store
//! (`RARA_ARTIFACTS_URI`), with a progress bar on a terminal, and verifies its sha256 against
//! the digest the executor reported. The bytes go to `FILE.partial` first and are renamed only
//! once verified: a mismatch leaves nothing at `FILE`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rara_artifacts::digest::Running;
use rara_store::read::ArtifactView;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::Failure;
use crate::exit::ExitCode;

/// Artifacts in the artifact store.
#[derive(Debug, Args)]
pub struct Artifact {
    #[command(subcommand)]
    command: ArtifactCommand,
}

#[derive(Debug, Subcommand)]
enum ArtifactCommand {
    /// Download an artifact of a step's latest attempt and verify its digest.
    Get(Get),
}

#[derive(Debug, Args)]
struct Get {
    /// The run id printed by `rara submit`.
    run_id: Uuid,
    /// The step's name.
    step: String,
    /// The artifact's name.
    name: String,
    /// Where to write it (default: the artifact's name, in the current directory).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub async fn run(args: Artifact, json: bool) -> Result<(), Failure> {
    let ArtifactCommand::Get(get) = args.command;
    let store = super::connect(&super::config()?).await?;
    let run = store.run(get.run_id).await?;
    let step = run.steps.iter().find(|s| s.name == get.step).ok_or_else(|| {
        Failure::new(ExitCode::NotFound, format!("run {} has no step named {:?}", get.run_id, get.step))
    })?;
    let artifact = latest(&step.artifacts, &get.name).ok_or_else(|| {
        Failure::new(ExitCode::NotFound, format!("step {:?} has no artifact named {:?}", get.step, get.name))
    })?;
    let artifacts = rara_platform::aws::artifact_store_from_env()
        .await?
        .ok_or_else(|| Failure::new(ExitCode::Usage, "RARA_ARTIFACTS_URI is not set: which artifact store to read?"))?;
    let key = artifacts.location().key_of(&artifact.uri).map_err(|_| {
        Failure::new(
            ExitCode::Failure,
            format!(
                "{} is not in the artifact store {}: rara reads only its own store",
                artifact.uri,
                uri_of(&*artifacts)
            ),
        )
    })?;
    let path = get.output.clone().unwrap_or_else(|| PathBuf::from(&artifact.name));
    let reader = artifacts.get(&key).await.context("cannot read the artifact from the store")?;
    let (size, digest) = download(reader, &path, artifact.size_bytes, json).await?;
    if let Some(expected) = &artifact.digest
        && *expected != digest
    {
        let _ = tokio::fs::remove_file(partial(&path)).await;
        return Err(
            anyhow!("the download's digest is {digest}, not the recorded {expected}: nothing was written").into()
        );
    }
    tokio::fs::rename(partial(&path), &path).await.with_context(|| format!("cannot write {}", path.display()))?;
    let verified = artifact.digest.is_some();
    if json {
        println!("{}", serde_json::json!({"path": path, "size_bytes": size, "digest": digest, "verified": verified}));
    } else {
        let check = if verified { "verified" } else { "no digest recorded: not verified" };
        println!("{}  {size} bytes  {digest} ({check})", path.display());
    }
    Ok(())
}

/// The artifact `name` of the step's latest attempt (the last recorded of that name).
fn latest<'a>(artifacts: &'a [ArtifactView], name: &str) -> Option<&'a ArtifactView> {
    artifacts.iter().filter(|a| a.name == name).max_by_key(|a| (a.attempt, a.id))
}

fn uri_of(store: &dyn rara_artifacts::ArtifactStore) -> String {
    store.location().uri(&rara_artifacts::Key::run(Uuid::nil())).replace(&format!("runs/{}/", Uuid::nil()), "")
}

fn partial(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Streams `reader` to `path.partial`, hashing as it goes; returns size and digest.
async fn download(
    mut reader: rara_artifacts::Reader,
    path: &Path,
    size: Option<i64>,
    json: bool,
) -> Result<(u64, String), Failure> {
    let target = partial(path);
    let mut file =
        tokio::fs::File::create(&target).await.with_context(|| format!("cannot create {}", target.display()))?;
    let bar = match (json || !std::io::stderr().is_terminal(), size) {
        (true, _) => ProgressBar::hidden(),
        (false, Some(size)) => ProgressBar::new(u64::try_from(size).unwrap_or(0)),
        (false, None) => ProgressBar::no_length(),
    };
    bar.set_style(
        ProgressStyle::with_template("{bytes:>10} / {total_bytes} [{bar:30.cyan/blue}] {bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut running = Running::default();
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let n = reader.read(&mut buffer).await.context("the download broke off")?;
        if n == 0 {
            break;
        }
        running.update(&buffer[..n]);
        file.write_all(&buffer[..n]).await.with_context(|| format!("cannot write {}", target.display()))?;
        bar.inc(n as u64);
    }
    file.sync_all().await.with_context(|| format!("cannot write {}", target.display()))?;
    bar.finish_and_clear();
    Ok(running.finish())
}
