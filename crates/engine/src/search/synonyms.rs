//! Query synonyms in the Solr/Elasticsearch synonyms-file convention, per tenant:
//! `RETR_SYNONYMS_DIR/_all.txt` applies to every tenant, `RETR_SYNONYMS_DIR/<tenant_id>.txt` to one.
//!
//! - `a, b, c` — equivalent words: a query with any of them also searches for the others;
//! - `a, b => c` — explicit mapping: a query with `a` or `b` also searches for `c`;
//! - `#` starts a comment; blank lines are ignored. Entries may be phrases of several words.
//!
//! Matching is on stems (the lexical index's terms), so inflections match («айфоне» → «айфон»).
//! The expansion adds the synonyms' terms to the BM25 query (the embedded query is unchanged:
//! adding them there lowered quality). This is how colloquial Cyrillic product names (адгард,
//! айфон, винда, апк) meet the Latin names the docs use.

use crate::text::terms;
use std::collections::HashMap;
use std::path::Path;

/// One rule: when every term of one `from` phrase occurs in the query, add the terms of each
/// `to` phrase (stemmed once, when the file is read).
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    from: Vec<Vec<String>>,
    to: Vec<Vec<String>>,
}

/// The synonym rules of every tenant (`_all` rules are merged into each lookup).
#[derive(Debug, Clone, Default)]
pub(crate) struct Synonyms {
    common: Vec<Rule>,
    by_tenant: HashMap<String, Vec<Rule>>,
}

/// Parses one synonyms file; malformed lines come back as `(line number, reason)`.
fn parse(text: &str) -> (Vec<Rule>, Vec<(usize, String)>) {
    let mut rules = Vec::new();
    let mut problems = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let split = |side: &str| -> Vec<String> {
            side.split(',').map(str::trim).filter(|w| !w.is_empty()).map(str::to_string).collect()
        };
        let (from, to) = match line.split_once("=>") {
            Some((left, right)) => (split(left), split(right)),
            None => {
                let all = split(line);
                (all.clone(), all)
            }
        };
        if from.is_empty() || to.is_empty() || (!line.contains("=>") && from.len() < 2) {
            problems.push((number + 1, format!("expected `a, b` or `a => b`, got {raw:?}")));
            continue;
        }
        let from_terms: Vec<Vec<String>> = from.iter().map(|w| terms(w)).filter(|t| !t.is_empty()).collect();
        if from_terms.is_empty() {
            problems.push((number + 1, "no searchable word on the left".to_string()));
            continue;
        }
        rules.push(Rule { from: from_terms, to: to.iter().map(|w| terms(w)).filter(|t| !t.is_empty()).collect() });
    }
    (rules, problems)
}

/// The `.txt` files of `dir`, in name order (what `load_dir` reads and `problems_in_dir` checks).
fn txt_files(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)?
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "txt"))
        .collect();
    paths.sort();
    Ok(paths)
}

impl Synonyms {
    /// Loads `_all.txt` and every `<tenant>.txt` of `dir`. A missing directory means no synonyms;
    /// unreadable files and malformed lines are logged and skipped (a search never fails on them).
    pub(crate) fn load_dir(dir: &Path) -> Self {
        let mut synonyms = Self::default();
        for path in txt_files(dir).unwrap_or_default() {
            let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "synonyms file unreadable; ignored");
                    continue;
                }
            };
            let (rules, problems) = parse(&text);
            for (line, reason) in problems {
                tracing::warn!(path = %path.display(), line, %reason, "synonyms line ignored");
            }
            if name == "_all" {
                synonyms.common.extend(rules);
            } else {
                synonyms.by_tenant.entry(name).or_default().extend(rules);
            }
        }
        synonyms
    }

    /// What is wrong with the `.txt` files of `dir`: the directory or a file unreadable, a line
    /// malformed (`file: line N: reason`). `load_dir` skips all of these; start-up and a reload
    /// refuse them instead, so a typo cannot silently drop a rule.
    pub(crate) fn problems_in_dir(dir: &Path) -> Vec<String> {
        let paths = match txt_files(dir) {
            Ok(paths) => paths,
            Err(error) => return vec![format!("cannot read the directory: {error}")],
        };
        let mut problems = Vec::new();
        for path in paths {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            match std::fs::read_to_string(&path) {
                Ok(text) => problems
                    .extend(parse(&text).1.into_iter().map(|(line, reason)| format!("{name}: line {line}: {reason}"))),
                Err(error) => problems.push(format!("cannot read {name}: {error}")),
            }
        }
        problems
    }

    /// Rules from text (tests, and callers without files): `tenant` `None` = every tenant.
    #[cfg(test)]
    pub(crate) fn from_text(tenant: Option<&str>, text: &str) -> Self {
        let (rules, _) = parse(text);
        let mut synonyms = Self::default();
        match tenant {
            Some(tenant) => {
                synonyms.by_tenant.insert(tenant.to_string(), rules);
            }
            None => synonyms.common = rules,
        }
        synonyms
    }

    /// The terms the query gains from `tenant`'s rules (those not already in it).
    pub(crate) fn expand(&self, tenant: &str, query_terms: &[String]) -> Vec<String> {
        let mut added: Vec<String> = Vec::new();
        let tenant_rules = self.by_tenant.get(tenant).map(Vec::as_slice).unwrap_or_default();
        for rule in self.common.iter().chain(tenant_rules) {
            if !rule.from.iter().any(|phrase| phrase.iter().all(|term| query_terms.contains(term))) {
                continue;
            }
            for term in rule.to.iter().flatten() {
                if !query_terms.contains(term) && !added.contains(term) {
                    added.push(term.clone());
                }
            }
        }
        added
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equivalents_expand_both_ways_and_match_inflections() {
        let synonyms = Synonyms::from_text(None, "айфон, iphone\n# comment\nвинда, виндовс, windows\n");
        assert_eq!(synonyms.expand("t", &terms("адгард на айфоне")), terms("iphone"));
        assert_eq!(synonyms.expand("t", &terms("iPhone settings")), terms("айфон"));
        assert!(synonyms.expand("t", &terms("android")).is_empty());
    }

    #[test]
    fn explicit_mapping_is_one_way_and_per_tenant() {
        let synonyms = Synonyms::from_text(Some("a"), "адгард => AdGuard\n");
        assert_eq!(synonyms.expand("a", &terms("адгард блокирует")), terms("AdGuard"));
        assert!(synonyms.expand("a", &terms("AdGuard")).is_empty());
        assert!(synonyms.expand("b", &terms("адгард")).is_empty(), "another tenant's rules never apply");
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let (rules, problems) = parse("одно\n => x\nок, ok\n");
        assert_eq!(rules.len(), 1);
        assert_eq!(problems.iter().map(|(line, _)| *line).collect::<Vec<_>>(), vec![1, 2]);
    }
}
