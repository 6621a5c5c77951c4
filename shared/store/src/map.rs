//! Fan-out (DESIGN.md "Data flow"): a map step's first claim expands it into one child step
//! per element of its list, in one fenced statement for the whole batch (`sql/expand.sql` +
//! [`fence`](crate::fence)). Its second claim, once every child succeeded, gathers their
//! outputs like any references ([`child_name`] names the children it reads).

use uuid::Uuid;

use crate::fence::{columns, per_holder};
use crate::{DUE_CHANNEL, Error, Holder, Store, sql};

/// One map step to expand: its holder and its children's inputs, in element order (the map's
/// input substituted whole, `$item` by its element).
#[derive(Debug, Clone, PartialEq)]
pub struct Expansion {
    pub holder: Holder,
    /// The map step's name (its children's are [`child_name`]s).
    pub name: String,
    pub children: Vec<serde_json::Value>,
}

/// The name of the map step `map`'s child `index`: `map[index]`. Step names cannot hold
/// brackets, so it is never a defined step's.
pub fn child_name(map: &str, index: u32) -> String {
    format!("{map}[{index}]")
}

impl Store {
    /// Expands map steps in one fenced statement: their children are created (due at once, or
    /// behind the child `max_concurrency` places earlier), and each map step waits on them.
    /// Listening schedulers are woken. One result per item, in order; a holder that lost its
    /// lease gets [`Error::LeaseLost`] and nothing of it is written.
    pub async fn expand(&self, items: &[Expansion]) -> Result<Vec<Result<(), Error>>, Error> {
        let holders: Vec<&Holder> = items.iter().map(|e| &e.holder).collect();
        let held = columns(&holders);
        let sizes: Vec<i32> = items.iter().map(|e| e.children.len().min(i32::MAX as usize) as i32).collect();
        let count = items.iter().map(|e| e.children.len()).sum();
        let mut parents = Vec::with_capacity(count);
        let mut ids = Vec::with_capacity(count);
        let mut indices = Vec::with_capacity(count);
        let mut names = Vec::with_capacity(count);
        let mut inputs = Vec::with_capacity(count);
        for item in items {
            for (i, input) in item.children.iter().enumerate() {
                parents.push(item.holder.step_id);
                ids.push(Uuid::now_v7());
                indices.push(i as i32);
                names.push(child_name(&item.name, i as u32));
                inputs.push(input);
            }
        }
        let landed: Vec<Uuid> = sqlx::query_scalar(sql::EXPAND.as_str())
            .bind(&held.step_ids)
            .bind(&held.workers)
            .bind(&held.fences)
            .bind(&sizes)
            .bind(&parents)
            .bind(&ids)
            .bind(&indices)
            .bind(&names)
            .bind(&inputs)
            .bind(DUE_CHANNEL)
            .fetch_all(&self.pool)
            .await?;
        Ok(per_holder(&holders, &landed))
    }
}
