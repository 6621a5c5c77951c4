//! The built-in registry: what routing runs in-process, and what submit checks a step of a
//! built-in operation against (that it fits one invocation).

use rara_domain::registry::Registry;

use crate::{BuiltinsConfig, Error, register_builtins};

/// A registry of the built-in executors (`noop`, `sleep`, `fail`, `http.request`) alone, with
/// the default [`BuiltinsConfig`].
pub fn registry() -> Result<Registry, Error> {
    registry_with(&BuiltinsConfig::default())
}

/// A registry of the built-in executors alone, with `config` (the executor's: its egress
/// policy from the settings).
pub fn registry_with(config: &BuiltinsConfig) -> Result<Registry, Error> {
    let mut registry = Registry::new();
    register_builtins(&mut registry, config)?;
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_registry_holds_the_four_builtins() {
        let registry = registry().unwrap();
        assert_eq!(registry.names().collect::<Vec<_>>(), ["fail", "http.request", "noop", "sleep"]);
    }
}
