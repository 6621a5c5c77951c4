//! Registered workflow definitions (`rara workflow register`): a definition stored under its
//! name with a version, the same content being the same version. The caller validates the
//! definition first, as submit does; the store keeps what it is given.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{Error, Store};

/// What a registration made or found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registered {
    pub name: String,
    pub version: i32,
    /// `false`: the same content was already this version.
    pub created: bool,
    pub created_at: DateTime<Utc>,
}

/// One version of a registered definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Definition {
    pub name: String,
    pub version: i32,
    /// The definition as submit reads it.
    pub definition: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// A registered workflow: its newest version and how many it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registration {
    pub name: String,
    pub version: i32,
    pub versions: i64,
    /// When its newest version was registered.
    pub created_at: DateTime<Utc>,
}

/// One version of a registered workflow, without its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Version {
    pub version: i32,
    pub created_at: DateTime<Utc>,
}

/// How often a registration tries again when concurrent registrations of the same name took
/// the next version first.
const REGISTER_TRIES: usize = 5;

impl Store {
    /// Registers `definition` (already validated) under `name`: the version that holds the same
    /// content, or the next one.
    pub async fn register_definition(&self, name: &str, definition: &serde_json::Value) -> Result<Registered, Error> {
        for _ in 0..REGISTER_TRIES {
            let row =
                sqlx::query_file!("sql/register_definition.sql", name, definition).fetch_optional(&self.pool).await?;
            if let Some(row) = row {
                return Ok(Registered {
                    name: name.to_owned(),
                    version: row.version,
                    created: row.created,
                    created_at: row.created_at,
                });
            }
        }
        Err(Error::RegisterContended { name: name.to_owned() })
    }

    /// The registered definition `name` at `version`, or its newest version;
    /// [`Error::DefinitionNotFound`] when there is none.
    pub async fn definition(&self, name: &str, version: Option<i32>) -> Result<Definition, Error> {
        let row = sqlx::query_file!("sql/definition.sql", name, version)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| Error::DefinitionNotFound { name: name.to_owned(), version })?;
        Ok(Definition { name: row.name, version: row.version, definition: row.definition, created_at: row.created_at })
    }

    /// The registered workflows by name, at most `limit`.
    pub async fn definitions(&self, limit: u32) -> Result<Vec<Registration>, Error> {
        let rows = sqlx::query_file!("sql/definitions_list.sql", i64::from(limit)).fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| Registration { name: r.name, version: r.version, versions: r.versions, created_at: r.created_at })
            .collect())
    }

    /// The versions of the registered workflow `name`, newest first, at most `limit`; empty when
    /// it is not registered.
    pub async fn definition_versions(&self, name: &str, limit: u32) -> Result<Vec<Version>, Error> {
        let rows =
            sqlx::query_file!("sql/definition_versions.sql", name, i64::from(limit)).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|r| Version { version: r.version, created_at: r.created_at }).collect())
    }
}
