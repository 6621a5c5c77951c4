//! `rara migrate`: create the database if missing and apply pending migrations; `--roles`
//! also shows rara's database roles, their members, and the statements that give each
//! function a login of its own (docs: operating/deploy.md "Database roles").

use anyhow::Context;
use clap::Args;
use rara_domain::config::Config;
use rara_store::roles::{self, Members};
use sqlx::migrate::MigrateDatabase;

use crate::Failure;

/// Create the database if missing and apply pending migrations (idempotent).
#[derive(Debug, Args)]
pub struct Migrate {
    /// Also list rara's database roles (owner, runtime, console) with their members, and print
    /// the SQL that creates one login per function as a member of its role.
    #[arg(long)]
    pub roles: bool,
}

/// The login each function uses, and the role it is a member of: one secret per function in
/// the template (`SchedulerDatabaseSecretArn`, …), each naming its own login.
pub const LOGINS: [(&str, &str); 3] =
    [("rara_scheduler", roles::RUNTIME), ("rara_executor", roles::RUNTIME), ("rara_api", roles::CONSOLE)];

pub async fn run(args: Migrate, json: bool) -> Result<(), Failure> {
    let config = super::config()?;
    let created = migrate_quietly(&config).await?;
    let members = if args.roles { Some(super::connect(&config).await?.role_members().await?) } else { None };
    if json {
        let mut out = serde_json::json!({ "migrated": true, "database_created": created });
        if let Some(members) = &members {
            out["roles"] = members
                .iter()
                .map(|m| serde_json::json!({ "role": m.role, "exists": m.exists, "members": m.members }))
                .collect();
            out["logins"] = logins_sql().into_iter().collect();
        }
        println!("{out}");
    } else {
        println!("{}database is up to date", if created { "created the database; " } else { "" });
        if let Some(members) = &members {
            print!("{}", roles_text(members));
        }
    }
    Ok(())
}

/// What each role is for, as `--roles` prints it.
fn purpose(role: &str) -> &'static str {
    match role {
        roles::OWNER => "owns the schema; `rara migrate` only",
        roles::RUNTIME => "the scheduler and the executor",
        _ => "the API, the console, the operator's CLI",
    }
}

/// The statements that create one login per function (run them as the migrating user, each
/// password the one of that function's secret), then make the login a member of its role.
pub fn logins_sql() -> Vec<String> {
    LOGINS
        .iter()
        .map(|(login, role)| format!("CREATE ROLE {login} LOGIN PASSWORD '<from its secret>' IN ROLE {role};"))
        .collect()
}

fn roles_text(members: &[Members]) -> String {
    let mut out = String::from("\ndatabase roles (NOLOGIN group roles; a login inherits its role's privileges):\n");
    for m in members {
        let who = if !m.exists {
            "(missing: run `rara migrate`)".to_owned()
        } else if m.members.is_empty() {
            "no members".to_owned()
        } else {
            format!("members: {}", m.members.join(", "))
        };
        out.push_str(&format!("  {:<13} {:<40} {who}\n", m.role, purpose(&m.role)));
    }
    out.push_str("\none login per function (as the migrating user; an existing login: GRANT <role> TO <login>;):\n");
    for sql in logins_sql() {
        out.push_str(&format!("  {sql}\n"));
    }
    out
}

/// Creates the database if missing and migrates; returns whether it was created.
pub async fn migrate_quietly(config: &Config) -> Result<bool, Failure> {
    let created = if sqlx::Postgres::database_exists(&config.database_url).await.context("cannot reach Postgres")? {
        false
    } else {
        sqlx::Postgres::create_database(&config.database_url).await.context("cannot create the database")?;
        true
    };
    super::connect(config).await?.migrate().await?;
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logins_are_members_of_the_roles_their_functions_need() {
        let sql = logins_sql();
        assert_eq!(sql[0], "CREATE ROLE rara_scheduler LOGIN PASSWORD '<from its secret>' IN ROLE rara_runtime;");
        assert!(sql[2].ends_with("IN ROLE rara_console;"), "{}", sql[2]);
    }
}
