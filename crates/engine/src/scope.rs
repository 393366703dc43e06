//! `RETR_TENANTS`: which tenants one instance loads and serves, so that a deployment larger than
//! one machine shards its tenants across instances (each in front of the same Chroma).
//!
//! - empty: every tenant;
//! - `acme, demo`: exactly these tenants;
//! - `shard:2/8`: the tenants whose id hashes (FNV-1a, 64 bit) to 2 modulo 8. The hash depends on
//!   the id alone, so every instance (and a router in front of them) agrees on the owner.

use crate::model::Snapshot;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TenantScope {
    #[default]
    All,
    Only(BTreeSet<String>),
    Shard {
        index: u64,
        count: u64,
    },
}

/// FNV-1a (64 bit) of a tenant id: stable across processes, machines and versions.
pub(crate) fn tenant_hash(tenant_id: &str) -> u64 {
    tenant_id.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

impl TenantScope {
    pub fn parse(spec: &str) -> Result<Self, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Ok(Self::All);
        }
        if let Some(shard) = spec.strip_prefix("shard:") {
            let parsed = shard.split_once('/').and_then(|(index, count)| {
                Some((index.trim().parse::<u64>().ok()?, count.trim().parse::<u64>().ok()?))
            });
            return match parsed {
                Some((index, count)) if count >= 1 && index < count => Ok(Self::Shard { index, count }),
                _ => Err(format!("a shard is `shard:<index>/<count>` with index < count, got {spec:?}")),
            };
        }
        let mut tenants = BTreeSet::new();
        for tenant in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            crate::model::validate_tenant_id(tenant).map_err(|error| format!("{tenant:?}: tenant_id: {error}"))?;
            tenants.insert(tenant.to_string());
        }
        if tenants.is_empty() {
            return Err("list tenant ids separated by commas, or `shard:<index>/<count>`".into());
        }
        Ok(Self::Only(tenants))
    }

    pub fn serves(&self, tenant_id: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(tenants) => tenants.contains(tenant_id),
            Self::Shard { index, count } => tenant_hash(tenant_id) % count == *index,
        }
    }

    /// Drops the records of every tenant this instance does not serve.
    pub fn retain(&self, snapshot: &mut Snapshot) {
        if *self == Self::All {
            return;
        }
        for records in [&mut snapshot.docs, &mut snapshot.sections, &mut snapshot.chunks] {
            records.retain(|record| self.serves(&record.meta.tenant_id));
        }
    }
}

impl std::fmt::Display for TenantScope {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => formatter.write_str("every tenant"),
            Self::Only(tenants) => write!(formatter, "{}", tenants.iter().cloned().collect::<Vec<_>>().join(", ")),
            Self::Shard { index, count } => write!(formatter, "shard:{index}/{count}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_decide() {
        assert_eq!(TenantScope::parse("").unwrap(), TenantScope::All);
        let only = TenantScope::parse(" acme, demo ").unwrap();
        assert!(only.serves("acme") && only.serves("demo") && !only.serves("other"));
        for bad in ["shard:3/3", "shard:1", "shard:a/b", "shard:0/0", "bad tenant!", ","] {
            assert!(TenantScope::parse(bad).is_err(), "{bad}");
        }
        // Every tenant lands in exactly one of the shards.
        let shards: Vec<TenantScope> = (0..4).map(|i| TenantScope::parse(&format!("shard:{i}/4")).unwrap()).collect();
        for tenant in ["acme", "demo", "t1", "t2", "adguard", "x"] {
            assert_eq!(shards.iter().filter(|shard| shard.serves(tenant)).count(), 1, "{tenant}");
        }
        assert_eq!(tenant_hash("a"), 0xaf63_dc4c_8601_ec8c, "FNV-1a is the published function");
    }
}
