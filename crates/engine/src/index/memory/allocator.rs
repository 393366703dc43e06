//! Handing the heap a load freed back to the operating system.

/// Returns the heap a full load freed (the fetched pages, the records' embeddings once moved into
/// the scan matrices) to the operating system. glibc keeps freed memory in its arenas, so without
/// this the service's RSS after a load stays at the load's peak.
pub(crate) fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
