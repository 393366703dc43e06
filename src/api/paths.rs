//! Where the API lives: every endpoint but `/health` and `/metrics` is under `PREFIX`.

pub(crate) const PREFIX: &str = "/internal/retrieval";
