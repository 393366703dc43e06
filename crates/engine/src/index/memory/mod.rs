//! The in-memory index: exact cosine and BM25 rankings over a `LoadedIndex` (`engine`), how one is
//! built from records (`build`), the snapshot file format (`snapshot`) and each level's memo of
//! its searches' scores (`memo`). The file source that serves a snapshot file is `index::file_index`.

mod allocator;
mod block_source;
mod build;
mod engine;
mod load;
pub(crate) mod local_copy;
mod memo;
mod numbers;
#[cfg(target_arch = "x86_64")]
mod numbers_x86;
mod snapshot;
#[cfg(test)]
mod tests;

pub(crate) use allocator::release_freed_memory;
pub use build::rebuild_tenant;
pub(crate) use build::IndexBuilder;
pub use engine::LoadedIndex;
pub(crate) use load::load_snapshot_file;
pub use snapshot::{read_snapshot_file, write_snapshot_file};
