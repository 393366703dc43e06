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
//!
//! The rules are indexed by the first term of each left-hand phrase: a query looks up its own
//! terms and checks only the rules found there, so the cost of an expansion follows the query's
//! length, not the number of rules.

use crate::text::terms;
use std::collections::{HashMap, HashSet};

/// One rule: when every term of one `from` phrase occurs in the query, add the terms of each
/// `to` phrase (stemmed once, when the file is read).
#[derive(Debug, Clone, PartialEq)]
struct Rule {
    from: Vec<Vec<String>>,
    to: Vec<Vec<String>>,
}

/// One file's rules (or several files' together), indexed by the first term of each `from`
/// phrase: a query looks up its own terms, so an expansion costs per query term, not per rule.
#[derive(Debug, Clone, Default)]
struct RuleSet {
    /// In file order: the order in which their terms are added.
    rules: Vec<Rule>,
    /// First term of a `from` phrase → the rules with such a phrase, ascending, once each.
    by_first_term: HashMap<String, Vec<usize>>,
}

impl RuleSet {
    fn extend(&mut self, rules: Vec<Rule>) {
        for rule in rules {
            let position = self.rules.len();
            for phrase in &rule.from {
                if let Some(first) = phrase.first() {
                    let positions = self.by_first_term.entry(first.clone()).or_default();
                    if positions.last() != Some(&position) {
                        positions.push(position);
                    }
                }
            }
            self.rules.push(rule);
        }
    }

    /// The rules one of whose `from` phrases is all in `query`, in file order.
    fn matching<'a>(&'a self, query: &HashSet<&str>) -> impl Iterator<Item = &'a Rule> + 'a {
        let mut positions: Vec<usize> = query
            .iter()
            .filter_map(|term| self.by_first_term.get(*term))
            .flatten()
            .copied()
            .filter(|&position| {
                self.rules[position].from.iter().any(|phrase| phrase.iter().all(|term| query.contains(term.as_str())))
            })
            .collect();
        positions.sort_unstable();
        positions.dedup();
        positions.into_iter().map(|position| &self.rules[position])
    }
}

/// The synonym rules of every tenant (`_all` rules are merged into each lookup).
#[derive(Debug, Clone, Default)]
pub(crate) struct Synonyms {
    common: RuleSet,
    by_tenant: HashMap<String, RuleSet>,
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

impl Synonyms {
    /// The rules of the `.txt` files of a synonyms directory, given as (file name, text) in name
    /// order: `_all.txt` for every tenant, `<tenant>.txt` for one. Malformed lines come back as
    /// problems (`file: line N: reason`) and are left out.
    pub(crate) fn from_files<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> (Self, Vec<String>) {
        let mut synonyms = Self::default();
        let mut problems = Vec::new();
        for (name, text) in files {
            let (rules, malformed) = parse(text);
            problems.extend(malformed.into_iter().map(|(line, reason)| format!("{name}: line {line}: {reason}")));
            match name.strip_suffix(".txt").unwrap_or(name) {
                "_all" => synonyms.common.extend(rules),
                tenant => synonyms.by_tenant.entry(tenant.to_string()).or_default().extend(rules),
            }
        }
        (synonyms, problems)
    }

    /// Rules from text (tests, and callers without files): `tenant` `None` = every tenant.
    #[cfg(test)]
    pub(crate) fn from_text(tenant: Option<&str>, text: &str) -> Self {
        let name = format!("{}.txt", tenant.unwrap_or("_all"));
        Self::from_files([(name.as_str(), text)]).0
    }

    /// The terms the query gains from `tenant`'s rules (those not already in it), in the order of
    /// the rules (`_all.txt`'s first) and of their terms.
    pub(crate) fn expand(&self, tenant: &str, query_terms: &[String]) -> Vec<String> {
        let query: HashSet<&str> = query_terms.iter().map(String::as_str).collect();
        let mut added: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let tenant_rules = self.by_tenant.get(tenant);
        for rule in self.common.matching(&query).chain(tenant_rules.into_iter().flat_map(|set| set.matching(&query))) {
            for term in rule.to.iter().flatten() {
                if !query.contains(term.as_str()) && seen.insert(term.as_str()) {
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

    /// The expansion as it was before the rules were indexed: every rule checked in turn.
    fn expand_linearly(synonyms: &Synonyms, tenant: &str, query_terms: &[String]) -> Vec<String> {
        let mut added: Vec<String> = Vec::new();
        let tenant_rules = synonyms.by_tenant.get(tenant).map(|set| set.rules.as_slice()).unwrap_or_default();
        for rule in synonyms.common.rules.iter().chain(tenant_rules) {
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

    /// Random rule files (equivalents, one-way mappings, phrases, repeated words, rules sharing a
    /// first word) over a small vocabulary, so queries match many rules: the indexed expansion
    /// adds the same terms in the same order as checking every rule.
    #[test]
    fn the_indexed_expansion_is_the_linear_one() {
        let words = [
            "айфон",
            "iphone",
            "винда",
            "windows",
            "адгард",
            "adguard",
            "апк",
            "apk",
            "мак",
            "macos",
            "блок",
            "реклама",
            "фильтр",
            "dns",
            "vpn",
            "прокси",
            "android",
            "ios",
            "браузер",
            "расширение",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = |n: usize| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
        };
        for _ in 0..200 {
            let phrase = |next: &mut dyn FnMut(usize) -> usize| {
                (0..1 + next(2)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" ")
            };
            let file = |next: &mut dyn FnMut(usize) -> usize| {
                let mut text = String::new();
                for _ in 0..next(30) {
                    let left: Vec<String> = (0..1 + next(3)).map(|_| phrase(next)).collect();
                    let right: Vec<String> = (0..1 + next(3)).map(|_| phrase(next)).collect();
                    if next(2) == 0 {
                        text.push_str(&format!("{}, {}\n", left.join(", "), right.join(", ")));
                    } else {
                        text.push_str(&format!("{} => {}\n", left.join(", "), right.join(", ")));
                    }
                }
                text
            };
            let (all, tenant) = (file(&mut next), file(&mut next));
            let (synonyms, problems) = Synonyms::from_files([("_all.txt", all.as_str()), ("t.txt", tenant.as_str())]);
            assert!(problems.is_empty(), "{problems:?}");
            for _ in 0..20 {
                let query: Vec<String> = (0..next(8)).flat_map(|_| terms(words[next(words.len())])).collect();
                for tenant in ["t", "other"] {
                    assert_eq!(
                        synonyms.expand(tenant, &query),
                        expand_linearly(&synonyms, tenant, &query),
                        "{query:?} over\n{all}\n{tenant}"
                    );
                }
            }
        }
    }

    #[test]
    fn malformed_lines_are_reported_not_fatal() {
        let (rules, problems) = parse("одно\n => x\nок, ok\n");
        assert_eq!(rules.len(), 1);
        assert_eq!(problems.iter().map(|(line, _)| *line).collect::<Vec<_>>(), vec![1, 2]);
    }
}
