//! What every page loader (a tree, a crawl, JSONL, the demo corpus) shares: its options, the
//! summary bound, and a page's URL from its path.

use super::mapping::MappingRules;
use super::split::ChunkingConfig;

/// Summaries taken from the first paragraph are cut to this many characters.
pub(crate) const SUMMARY_MAX_CHARS: usize = 300;

/// Everything a loader needs besides the input itself.
#[derive(Debug, Clone)]
pub struct LoadOptions<'a> {
    /// Prefix of tree doc ids (`{source_name}/{relative path}`) and the owner of their records.
    pub source_name: &'a str,
    /// Prepended to page paths (or slugs) to make `url`; empty gives site-relative `/path` urls.
    pub base_url: &'a str,
    /// Override the mapping's product / set the version of every doc when non-empty.
    pub product: &'a str,
    pub version: &'a str,
    /// Added to every doc's tags.
    pub tags: &'a [String],
    pub mapping: &'a MappingRules,
    pub chunking: ChunkingConfig,
}

/// `base_url` + the page's route: an absolute slug as is, a relative slug under the page's
/// folder, else the path without extension, with `index`/`README`/`<folder>/<folder>` pages
/// standing for their folder (Docusaurus conventions).
pub(crate) fn page_url(base_url: &str, relative_path: &str, slug: &str) -> String {
    let (folder, file_name) = relative_path.rsplit_once('/').unwrap_or(("", relative_path));
    let stem = file_name.rsplit_once('.').map(|(stem, _)| stem).unwrap_or(file_name);
    let route = if let Some(absolute) = slug.strip_prefix('/') {
        absolute.to_string()
    } else if !slug.is_empty() {
        join_route(folder, slug)
    } else if stem.eq_ignore_ascii_case("index")
        || stem.eq_ignore_ascii_case("readme")
        || folder.rsplit('/').next() == Some(stem)
    {
        folder.to_string()
    } else {
        join_route(folder, stem)
    };
    format!("{}/{}", base_url.trim_end_matches('/'), route.trim_matches('/'))
}

fn join_route(folder: &str, name: &str) -> String {
    if folder.is_empty() {
        name.to_string()
    } else {
        format!("{folder}/{name}")
    }
}
