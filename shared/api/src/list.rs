//! The runs list (`GET /api/runs`): the search's filters, a page at a time behind the store's
//! cursor. The console's runs list reads the same pages (`ListQuery::page`).

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use rara_domain::state::RunStatus;
use rara_store::browse::{Cursor, RunFilter};
use rara_store::read::RunSummary;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::filters::{self, Extra, Searched};
use crate::{Api, Error, ErrorBody, Reader};

/// Runs per page unless `limit` says otherwise, and the most a page holds.
pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 500;

/// Which runs to list, newest first.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only runs in this status (`running`, `succeeded`, `failed`, `cancelled`).
    #[param(value_type = Option<String>)]
    pub status: Option<RunStatus>,
    /// Only runs of this workflow name.
    pub name: Option<String>,
    /// Only runs created at or after (RFC 3339).
    pub created_after: Option<DateTime<Utc>>,
    /// Only runs created before (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// Only runs with a step that failed or was cancelled with this error code: 1 to
    /// 128 bytes of letters, digits and `_ . : / -`.
    pub error: Option<String>,
    /// Only runs of this workflow: `NAME` (any version) or `NAME@VERSION` (the registered
    /// version the run was made from). Not with `name`.
    pub workflow: Option<String>,
    /// The `where` conditions (`inputs.PATH=VALUE`), taken from the query apart
    /// ([`crate::filters::Searched`]): the parameter repeats.
    #[serde(skip)]
    #[param(ignore)]
    pub wheres: Vec<String>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Runs per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// One page of runs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunPage {
    /// Each run as `rara list --json` prints it: id, name, status, steps_total, steps_finished,
    /// created_at, finished_at.
    #[schema(value_type = Vec<Object>)]
    pub runs: Vec<RunSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

impl ListQuery {
    /// The search, each filter checked.
    pub(crate) fn filter(&self) -> Result<RunFilter, Error> {
        let filter = RunFilter {
            status: self.status,
            name: self.name.clone(),
            created_after: self.created_after,
            created_before: self.created_before,
            ..RunFilter::default()
        };
        let extra = Extra { error: self.error.as_deref(), workflow: self.workflow.as_deref(), wheres: &self.wheres };
        filters::narrow(filter, extra)
    }

    /// The page this query asks for: its cursor decoded and its limit checked.
    pub(crate) async fn page(&self, api: &Api) -> Result<RunPage, Error> {
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::bad_request(format!("limit must be 1 to {MAX_LIMIT}")).with_field("limit"));
        }
        let after = match &self.cursor {
            Some(text) => {
                Some(Cursor::decode(text).map_err(|e| Error::bad_request(e.to_string()).with_field("cursor"))?)
            }
            None => None,
        };
        let page = api.store().browse_runs(&self.filter()?, after, limit).await?;
        Ok(RunPage { runs: page.runs, next_cursor: page.next.map(|c| c.encode()) })
    }
}

/// List runs, newest first, matching every filter given.
#[utoipa::path(get, path = "/api/runs", tag = "runs", security((), ("token" = [])),
    params(ListQuery, ("where" = Option<Vec<String>>, Query, explode, style = Form,
        description = "Only runs whose inputs hold VALUE at PATH: `inputs.PATH=VALUE` (`inputs.tenant=acme`), \
            repeatable up to 4 times (all must hold). PATH is 1 to 8 keys joined by `.`, each 1 to 64 bytes of \
            letters, digits, `_` and `-`; VALUE, at most 256 bytes, is read as JSON when it is a JSON number, \
            `true`, `false`, `null` or a quoted string, and as a string otherwise. Inputs stored by reference \
            (`$stored`) match nothing inside them.")),
    responses((status = 200, body = RunPage), (status = "4XX", body = ErrorBody)))]
pub async fn list(
    State(api): State<Api>,
    _: Reader,
    query: Result<Searched<ListQuery>, Error>,
) -> Result<Json<RunPage>, Error> {
    let Searched { mut query, wheres } = query?;
    query.wheres = wheres;
    Ok(Json(query.page(&api).await?))
}
