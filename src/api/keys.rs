//! The key store of `RETR_API_KEYS` (`ApiKeys`) and what a key grants (`Grant`): loaded at
//! start-up into `AppState`, read by the extractors of `auth`.

use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// Shortest accepted API key (in characters) written in clear in the keys file.
pub(crate) const MIN_API_KEY_CHARS: usize = 16;

/// The tenants one API key may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grant {
    /// `*` in the keys file: every tenant (an operator's key).
    AllTenants,
    Tenants(BTreeSet<String>),
}

impl Grant {
    pub(crate) fn allows(&self, tenant_id: &str) -> bool {
        match self {
            Grant::AllTenants => true,
            Grant::Tenants(tenants) => tenants.contains(tenant_id),
        }
    }
}

/// The key store of `RETR_API_KEYS`. Keys are held as SHA-256 digests only, so a lookup neither
/// keeps the keys in memory in clear nor compares them byte by byte.
///
/// File format, one key a line (`#` starts a comment):
/// ```text
/// <key>: <tenant>[, <tenant>…]          # the key in clear, at least 16 characters, no ':' or spaces
/// sha256:<64 hex digits>: <tenant>…     # the key's SHA-256 digest, so the file need not hold it
/// <key>: *                              # every tenant
/// ```
#[derive(Debug, Clone, Default)]
pub(crate) struct ApiKeys {
    grants: Option<HashMap<[u8; 32], Arc<Grant>>>,
}

impl ApiKeys {
    /// No key store: data endpoints are open (mock mode, single-tenant deployments).
    pub(crate) fn disabled() -> Self {
        Self { grants: None }
    }

    /// A key store that accepts no key: where a configured key file cannot be used, refuse.
    pub(crate) fn deny_all() -> Self {
        Self { grants: Some(HashMap::new()) }
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.grants.is_some()
    }

    /// Reads the keys file; an empty path means no key store.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        if path.as_os_str().is_empty() {
            return Ok(Self::disabled());
        }
        let text = std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        Self::parse(&text).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Parses the keys file; the first malformed line is the error (with its number). A UTF-8
    /// byte order mark (which some editors write) is not part of the first key.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut grants: HashMap<[u8; 32], Arc<Grant>> = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let number = index + 1;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (digest, rest) = match line.strip_prefix("sha256:") {
                Some(hashed) => {
                    let (hex, rest) = hashed
                        .split_once(':')
                        .ok_or_else(|| format!("line {number}: expected `sha256:<hex>: <tenants>`"))?;
                    (parse_digest(hex.trim()).ok_or_else(|| format!("line {number}: a digest is 64 hex digits"))?, rest)
                }
                None => {
                    let (key, rest) =
                        line.split_once(':').ok_or_else(|| format!("line {number}: expected `<key>: <tenants>`"))?;
                    let key = key.trim();
                    if key.chars().count() < MIN_API_KEY_CHARS
                        || key.chars().any(|c| c.is_whitespace() || c.is_control())
                    {
                        return Err(format!(
                            "line {number}: a key is at least {MIN_API_KEY_CHARS} characters without spaces"
                        ));
                    }
                    (Sha256::digest(key.as_bytes()).into(), rest)
                }
            };
            let tenants: Vec<&str> = rest.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
            let grant = if tenants == ["*"] {
                Grant::AllTenants
            } else if tenants.is_empty() || tenants.contains(&"*") {
                return Err(format!("line {number}: list the key's tenants, or `*` alone for every tenant"));
            } else {
                for tenant in &tenants {
                    retrieval_engine::validate_tenant(tenant).map_err(|error| format!("line {number}: {error}"))?;
                }
                Grant::Tenants(tenants.iter().map(|t| t.to_string()).collect())
            };
            if grants.insert(digest, Arc::new(grant)).is_some() {
                return Err(format!("line {number}: the same key is listed twice"));
            }
        }
        if grants.is_empty() {
            return Err("no key in the file (an empty key store would refuse every request)".into());
        }
        Ok(Self { grants: Some(grants) })
    }

    /// The grant of a presented key (`None` when it is not a known key).
    pub(crate) fn grant(&self, key: &str) -> Option<&Arc<Grant>> {
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        self.grants.as_ref()?.get(&digest)
    }
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(digest)
}
