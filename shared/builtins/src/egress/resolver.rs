//! [`Resolver`]: DNS for `http.request`'s client, filtered by the [`Policy`].

use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::{Denied, Policy};

/// Resolves a name with the system resolver and keeps only the addresses the policy opens
/// (all of them for a host of `RARA_HTTP_ALLOW_HOSTS`). When it keeps none of the addresses
/// found, the lookup fails with [`Denied`] (the first refused address's rule), which
/// `http.request` finds in the error's chain. The connector connects to what this returns
/// and looks nothing up again.
#[derive(Debug, Clone)]
pub struct Resolver {
    policy: Arc<Policy>,
}

impl Resolver {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self { policy }
    }

    /// The addresses of `host` (found by a lookup) that the policy opens.
    pub fn filter(&self, host: &str, found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, Denied> {
        if self.policy.opens_host(host) {
            return Ok(found);
        }
        let mut first_rule = None;
        let kept: Vec<SocketAddr> = found
            .into_iter()
            .filter(|addr| match self.policy.check_ip(addr.ip()) {
                Ok(()) => true,
                Err(rule) => {
                    first_rule.get_or_insert(rule);
                    false
                }
            })
            .collect();
        match first_rule {
            Some(rule) if kept.is_empty() => Err(Denied { host: host.to_owned(), rule }),
            _ => Ok(kept),
        }
    }
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept = resolver.filter(&host, found)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}
