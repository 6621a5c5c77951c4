//! Artifacts by id: what `GET /api/artifacts/{id}` serves (the artifact store holds the bytes;
//! a row holds the URI, size and digest an executor reported).

use serde::Serialize;
use uuid::Uuid;

use crate::{Error, Store};

/// An artifact row with its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactRow {
    pub id: i64,
    pub run_id: Uuid,
    pub name: String,
    pub uri: String,
    pub media_type: Option<String>,
    pub size_bytes: Option<i64>,
    pub digest: Option<String>,
}

impl Store {
    /// The artifact `id`, if there is one.
    pub async fn artifact_by_id(&self, id: i64) -> Result<Option<ArtifactRow>, Error> {
        let row = sqlx::query_file!("sql/artifact_by_id.sql", id).fetch_optional(&self.pool).await?;
        Ok(row.map(|a| ArtifactRow {
            id: a.id,
            run_id: a.run_id,
            name: a.name,
            uri: a.uri,
            media_type: a.media_type,
            size_bytes: a.size_bytes,
            digest: a.digest,
        }))
    }
}
