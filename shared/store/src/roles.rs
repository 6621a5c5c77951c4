//! rara's three database roles (migration `…000021_roles.sql`; docs: operating/deploy.md
//! "Database roles"): NOLOGIN group roles whose members are the deployer's login users.

use sqlx::postgres::PgConnectOptions;

use crate::{Error, Store};

/// Owns the schema; only `rara migrate` acts as it.
pub const OWNER: &str = "rara_owner";
/// The scheduler's and the executor's role.
pub const RUNTIME: &str = "rara_runtime";
/// The API's and the console's role (and the operator's CLI for what the console does).
pub const CONSOLE: &str = "rara_console";
/// All three, in that order.
pub const ALL: [&str; 3] = [OWNER, RUNTIME, CONSOLE];

/// `options` that act as `role` from the first statement on (`-c role=…` at connect): a
/// login that is a member of several roles, or a superuser in tests, then has only the
/// privileges of that one.
pub fn acting_as(options: PgConnectOptions, role: &str) -> PgConnectOptions {
    options.options([("role", role)])
}

/// One of rara's roles and the roles that are members of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Members {
    pub role: String,
    /// Whether the role exists (it does once the migrations ran).
    pub exists: bool,
    pub members: Vec<String>,
}

impl Store {
    /// Each of [`ALL`] with its members, by name.
    pub async fn role_members(&self) -> Result<Vec<Members>, Error> {
        let rows: Vec<(String, bool, Vec<String>)> =
            sqlx::query_as(crate::sql::ROLE_MEMBERS).bind(&ALL[..]).fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(|(role, exists, members)| Members { role, exists, members }).collect())
    }
}
