//! BM25 over stemmed terms (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
//! BM25 and Beyond", 2009), one index per tenant and level so that statistics never mix tenants.

use rustc_hash::FxHashMap as HashMap;

/// Term-frequency saturation and length normalisation: the customary defaults, which are also
/// the reference BM25 of ../shared/eval (k1 = 1.2, b = 0.75).
#[derive(Debug, Clone, Copy)]
pub struct Bm25Params {
    pub(crate) k1: f32,
    pub(crate) b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

/// An inverted index over a fixed list of documents numbered 0..n.
#[derive(Debug, Default)]
pub struct Bm25Index {
    postings: HashMap<String, Vec<Posting>>,
    /// The weights of each term held by at least `DENSE_SHARE` of the documents, by document
    /// number (0 where absent): `score_all_into` adds these whole arrays, which the CPU does many
    /// floats at a time, instead of following a posting entry by entry. Derived from `postings`
    /// the first time `score_all_into` runs, so a level never ranked whole (chunks) never holds
    /// them, and a load or refresh does not make them; at that share an array costs at most the
    /// memory of the posting it mirrors.
    dense: std::sync::OnceLock<HashMap<String, Vec<f32>>>,
    lengths: Vec<u32>,
    average_length: f32,
    params: Bm25Params,
}

/// A term held by this share of a level's documents (or more) also gets a dense weight array.
const DENSE_SHARE: f32 = 1.0 / 3.0;

/// One document holding a term: its number, how often it holds the term, and the term's BM25
/// weight in it. The weight is a function of the build alone (the term's document frequency, the
/// document's length, the average length), so `finish` computes it once for every search.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(test, derive(PartialEq))]
struct Posting {
    number: u32,
    count: u32,
    weight: f32,
}

impl Bm25Index {
    /// Writes the index as it is (postings with their weights, by term in byte order) for the
    /// local copy of a replica (`memory::local_copy`).
    pub(super) fn write_to<W: std::io::Write>(&self, out: &mut super::codec::Writer<W>) -> std::io::Result<()> {
        out.f32(self.params.k1)?;
        out.f32(self.params.b)?;
        out.f32(self.average_length)?;
        out.len(self.lengths.len())?;
        out.words(self.lengths.iter().map(|length| length.to_le_bytes()))?;
        let mut terms: Vec<(&String, &Vec<Posting>)> = self.postings.iter().collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.len(terms.len())?;
        for (term, postings) in terms {
            out.str(term)?;
            out.len(postings.len())?;
            out.words(
                postings.iter().flat_map(|p| [p.number.to_le_bytes(), p.count.to_le_bytes(), p.weight.to_le_bytes()]),
            )?;
        }
        Ok(())
    }

    /// Reads what `write_to` wrote, for `documents` documents: any posting out of range is damage.
    pub(super) fn read_from<R: std::io::Read>(
        input: &mut super::codec::Reader<R>,
        documents: usize,
    ) -> std::io::Result<Self> {
        let params = Bm25Params { k1: input.f32()?, b: input.f32()? };
        let average_length = input.f32()?;
        let count = input.len()?;
        if count != documents {
            return Err(super::codec::damaged(format!(
                "lexical index of {count} documents, the level has {documents}"
            )));
        }
        let mut lengths = Vec::new();
        input.words_into(count, &mut lengths, u32::from_le_bytes)?;
        let terms = input.len()?;
        let mut postings = HashMap::default();
        postings.reserve(terms.min(1 << 20));
        let mut words: Vec<[u8; 4]> = Vec::new();
        for _ in 0..terms {
            let term = input.string()?;
            let len = input.len()?;
            input.words_into(len.saturating_mul(3), &mut words, |word| word)?;
            let list: Vec<Posting> = words
                .chunks_exact(3)
                .map(|p| Posting {
                    number: u32::from_le_bytes(p[0]),
                    count: u32::from_le_bytes(p[1]),
                    weight: f32::from_le_bytes(p[2]),
                })
                .collect();
            if list.iter().any(|posting| posting.number as usize >= documents) {
                return Err(super::codec::damaged("a posting names no document of the level"));
            }
            postings.insert(term, list);
        }
        Ok(Self { postings, dense: std::sync::OnceLock::new(), lengths, average_length, params })
    }

    /// The dense weight arrays (`dense`), made from the postings when first asked for.
    fn dense(&self) -> &HashMap<String, Vec<f32>> {
        self.dense.get_or_init(|| self.dense_weights())
    }

    fn dense_weights(&self) -> HashMap<String, Vec<f32>> {
        let documents = self.lengths.len();
        self.postings
            .iter()
            .filter(|(_, posting)| documents > 0 && posting.len() as f32 >= DENSE_SHARE * documents as f32)
            .map(|(term, posting)| {
                let mut weights = vec![0.0f32; documents];
                for entry in posting {
                    weights[entry.number as usize] = entry.weight;
                }
                (term.clone(), weights)
            })
            .collect()
    }
}

impl Bm25Index {
    /// Builds the index from each document's terms (already tokenized and stemmed).
    pub fn build(documents: impl IntoIterator<Item = Vec<String>>, params: Bm25Params) -> Self {
        let mut index = Self { params, ..Self::default() };
        let mut counts = HashMap::default();
        for (number, terms) in documents.into_iter().enumerate() {
            index.lengths.push(0);
            index.add(number as u32, terms, &mut counts);
        }
        index.finish()
    }

    /// `build` over the records' `lexical_terms` (the terms `LexicalTermsOf` gives), tokenized
    /// a batch at a time on the machine's cores, without a `String` for each term of each
    /// record: each thread's memo numbers the terms it meets, each of its numbers is looked up
    /// by name once, and a record's terms are counted by sorting their numbers.
    pub(crate) fn build_from_records<R: AsRef<crate::model::Record> + Sync>(records: &[R], params: Bm25Params) -> Self {
        let mut memos: Vec<(usize, crate::text::TermMemo)> =
            (0..super::in_parts::build_workers()).map(|id| (id, crate::text::TermMemo::default())).collect();
        // Per memo: its term number → the term's place in `terms` and `postings` (MAX: not met yet).
        let mut places: Vec<Vec<u32>> = vec![Vec::new(); memos.len()];
        let (mut place_of, mut terms, mut postings) = (HashMap::<String, u32>::default(), Vec::new(), Vec::new());
        let mut lengths = Vec::with_capacity(records.len());
        let mut record_places = Vec::new();
        for (batch_number, batch) in records.chunks(TOKENIZE_BATCH).enumerate() {
            let workers = if batch.len() < TOKENIZE_PARALLEL_FROM { 1 } else { memos.len() };
            let numbered = super::in_parts::map_in_parts(batch, &mut memos[..workers], |(id, memo), record| {
                let mut numbers = Vec::new();
                lexical_term_numbers(memo, record.as_ref(), &mut numbers);
                (*id, numbers)
            });
            for (offset, (memo, numbers)) in numbered.into_iter().enumerate() {
                let number = (batch_number * TOKENIZE_BATCH + offset) as u32;
                lengths.push(numbers.len() as u32);
                record_places.clear();
                let table = &mut places[memo];
                for term in numbers {
                    if term as usize >= table.len() {
                        table.resize(term as usize + 1, u32::MAX);
                    }
                    if table[term as usize] == u32::MAX {
                        let name = memos[memo].1.name(term);
                        table[term as usize] = match place_of.get(name) {
                            Some(&place) => place,
                            None => {
                                let place = terms.len() as u32;
                                place_of.insert(name.to_string(), place);
                                terms.push(name.to_string());
                                postings.push(Vec::new());
                                place
                            }
                        };
                    }
                    record_places.push(table[term as usize]);
                }
                record_places.sort_unstable();
                for run in record_places.chunk_by(|a, b| a == b) {
                    postings[run[0] as usize].push(Posting { number, count: run.len() as u32, weight: 0.0 });
                }
            }
            for ((_, memo), table) in memos.iter_mut().zip(&mut places) {
                if memo.full() {
                    *memo = crate::text::TermMemo::default();
                    table.clear();
                }
            }
        }
        let postings = terms.into_iter().zip(postings).collect();
        Self { params, postings, lengths, ..Self::default() }.finish()
    }

    /// This index over a new numbering of its documents plus some new ones, without tokenizing
    /// the kept ones again: `kept[old]` is the new number of document `old` (`None`: dropped),
    /// `added` the new documents' numbers and terms, `len` the documents in all. Scores are those
    /// of a `build` over the same documents in the new order.
    pub(crate) fn renumbered(
        &self,
        kept: &[Option<u32>],
        added: impl IntoIterator<Item = (u32, Vec<String>)>,
        len: usize,
    ) -> Self {
        let mut index = Self { params: self.params, lengths: vec![0; len], ..Self::default() };
        for (old, new) in kept.iter().enumerate() {
            if let Some(new) = new {
                index.lengths[*new as usize] = self.lengths[old];
            }
        }
        for (term, posting) in &self.postings {
            let moved: Vec<Posting> = posting
                .iter()
                .filter_map(|entry| kept[entry.number as usize].map(|number| Posting { number, ..*entry }))
                .collect();
            if !moved.is_empty() {
                index.postings.insert(term.clone(), moved);
            }
        }
        let mut counts = HashMap::default();
        for (number, terms) in added {
            index.add(number, terms, &mut counts);
        }
        index.finish()
    }

    /// Counts the terms of document `number` (whose slot in `lengths` exists) into the postings;
    /// `counts` is an empty map the caller lends from one document to the next (a map made for
    /// each document cost a tenth of a level's build when levels were built from strings).
    fn add(&mut self, number: u32, terms: Vec<String>, counts: &mut HashMap<String, u32>) {
        self.lengths[number as usize] = terms.len() as u32;
        for term in terms {
            *counts.entry(term).or_default() += 1;
        }
        for (term, count) in counts.drain() {
            self.postings.entry(term).or_default().push(Posting { number, count, weight: 0.0 });
        }
    }

    fn finish(mut self) -> Self {
        let total: u64 = self.lengths.iter().map(|&l| l as u64).sum();
        self.average_length = if self.lengths.is_empty() { 0.0 } else { total as f32 / self.lengths.len() as f32 };
        let total_documents = self.lengths.len() as f32;
        let mut postings = std::mem::take(&mut self.postings);
        for posting in postings.values_mut() {
            // Postings in ascending document number: `score_among` looks documents up in them.
            posting.sort_unstable_by_key(|entry| entry.number);
            let idf = idf(posting.len(), total_documents);
            for entry in posting.iter_mut() {
                entry.weight = self.weight(idf, entry.number as usize, entry.count);
            }
        }
        self.postings = postings;
        self
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Scores every document that contains at least one query term and passes `accept`;
    /// returns (document number, score) pairs with score > 0, unsorted.
    pub fn score(&self, query_terms: &[String], accept: impl Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let unique_terms = distinct(query_terms);
        // Dense per-document arrays: postings of common words are long, and a hash map per
        // posting was the hot spot of a search.
        let mut scores: Vec<f32> = Vec::new();
        let mut verdicts: Vec<u8> = Vec::new();
        const UNKNOWN: u8 = 0;
        const ACCEPTED: u8 = 1;
        const REJECTED: u8 = 2;
        for term in unique_terms {
            let Some(posting) = self.postings.get(term.as_str()) else { continue };
            if scores.is_empty() {
                scores = vec![0.0; self.lengths.len()];
                verdicts = vec![UNKNOWN; self.lengths.len()];
            }
            for entry in posting {
                let number = entry.number as usize;
                if verdicts[number] == UNKNOWN {
                    verdicts[number] = if accept(number) { ACCEPTED } else { REJECTED };
                }
                if verdicts[number] == REJECTED {
                    continue;
                }
                scores[number] += entry.weight;
            }
        }
        scores.into_iter().enumerate().filter(|(_, score)| *score > 0.0).collect()
    }

    /// `score` of every document, by number (0 for one that holds no query term), written over
    /// `scores` (a buffer to reuse): no filter to ask, so no verdicts and no pairs.
    pub(crate) fn score_all_into(&self, query_terms: &[String], scores: &mut Vec<f32>) {
        scores.clear();
        scores.resize(self.lengths.len(), 0.0);
        for term in distinct(query_terms) {
            // Adding 0.0 where a document lacks the term leaves its sum as it was: the same
            // scores as following the posting.
            if let Some(weights) = self.dense().get(term.as_str()) {
                scores.iter_mut().zip(weights).for_each(|(score, &weight)| *score += weight);
                continue;
            }
            let Some(posting) = self.postings.get(term.as_str()) else { continue };
            for entry in posting {
                scores[entry.number as usize] += entry.weight;
            }
        }
    }

    /// `score` over the documents `numbers` (ascending) only: each is looked up in the postings
    /// instead of walking them, which wins when the documents are few and the postings long (a
    /// query restricted to a few pages). Same scores, same order.
    pub(crate) fn score_among(
        &self,
        query_terms: &[String],
        numbers: &[usize],
        accept: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let unique_terms = distinct(query_terms);
        let numbers: Vec<usize> = numbers.iter().copied().filter(|&number| accept(number)).collect();
        let mut scores = vec![0.0f32; numbers.len()];
        for term in unique_terms {
            let Some(posting) = self.postings.get(term.as_str()) else { continue };
            // Both lists ascend. Few documents: each is searched for in the rest of the posting;
            // else the two lists are walked side by side.
            let bits = (usize::BITS - posting.len().leading_zeros()) as usize;
            let search = numbers.len() * bits < posting.len();
            let mut rest: &[Posting] = posting;
            for (score, &number) in scores.iter_mut().zip(&numbers) {
                let at = if search {
                    rest.partition_point(|entry| (entry.number as usize) < number)
                } else {
                    rest.iter().position(|entry| entry.number as usize >= number).unwrap_or(rest.len())
                };
                rest = &rest[at..];
                if let Some(entry) = rest.first().filter(|entry| entry.number as usize == number) {
                    *score += entry.weight;
                }
            }
        }
        numbers.into_iter().zip(scores).filter(|(_, score)| *score > 0.0).collect()
    }

    /// One term's BM25 weight in document `number`, which holds it `frequency` times.
    fn weight(&self, idf: f32, number: usize, frequency: u32) -> f32 {
        let length = self.lengths[number] as f32;
        let norm = if self.average_length > 0.0 { length / self.average_length } else { 1.0 };
        let tf = frequency as f32;
        idf * tf * (self.params.k1 + 1.0) / (tf + self.params.k1 * (1.0 - self.params.b + self.params.b * norm))
    }
}

/// The "plus one" IDF of Lucene, which keeps weights positive for very common terms: of a term
/// that `document_frequency` of `total_documents` documents hold.
fn idf(document_frequency: usize, total_documents: f32) -> f32 {
    let document_frequency = document_frequency as f32;
    (1.0 + (total_documents - document_frequency + 0.5) / (document_frequency + 0.5)).ln()
}

/// The distinct query terms, sorted: each term counts once, and its weights are added to a
/// document's score in this order (so both scoring paths sum alike).
fn distinct(query_terms: &[String]) -> Vec<&String> {
    let mut terms: Vec<&String> = query_terms.iter().collect();
    terms.sort();
    terms.dedup();
    terms
}

/// The terms BM25 indexes, by their definition (what `LexicalTermsOf` and a level's build must
/// give, one record at a time): those of the title and the text, the title left out when the
/// text holds it.
#[cfg(test)]
pub(crate) fn lexical_terms(record: &crate::model::Record) -> Vec<String> {
    if record.text.contains(record.meta.title.as_str()) {
        crate::text::terms(&record.text)
    } else {
        crate::text::terms(&format!("{}\n{}", record.meta.title, record.text))
    }
}

/// The terms BM25 indexes: those of the record's text plus its title, so a page title always
/// counts.
fn lexical_terms_with(memo: &mut crate::text::TermMemo, record: &crate::model::Record) -> Vec<String> {
    let mut numbers = Vec::new();
    lexical_term_numbers(memo, record, &mut numbers);
    numbers.into_iter().map(|number| memo.name(number).to_string()).collect()
}

/// `lexical_terms_with` as the memo's term numbers, appended to `out` (the title's, when the text
/// does not hold it, then the text's: no token spans the two).
fn lexical_term_numbers(memo: &mut crate::text::TermMemo, record: &crate::model::Record, out: &mut Vec<u32>) {
    if !record.text.contains(record.meta.title.as_str()) {
        memo.term_numbers(&record.meta.title, out);
    }
    memo.term_numbers(&record.text, out);
}

/// Every record's `lexical_terms`, in order, for a build: tokenized a batch at a time on the
/// machine's cores (up to four), each thread with its own `TermMemo`. A batch at a time, so the
/// terms of a whole level are never held at once.
pub(crate) struct LexicalTermsOf<'a, R> {
    records: &'a [R],
    /// The first record not tokenized yet.
    next: usize,
    ready: std::vec::IntoIter<Vec<String>>,
    memos: Vec<crate::text::TermMemo>,
}

/// Records tokenized per batch: enough to keep the threads' start-up cost small.
const TOKENIZE_BATCH: usize = 8192;
/// Below this many records a batch is tokenized on the calling thread alone.
const TOKENIZE_PARALLEL_FROM: usize = 512;

impl<'a, R: AsRef<crate::model::Record> + Sync> LexicalTermsOf<'a, R> {
    pub(crate) fn new(records: &'a [R]) -> Self {
        let memos = (0..super::in_parts::build_workers()).map(|_| crate::text::TermMemo::default()).collect();
        Self { records, next: 0, ready: Vec::new().into_iter(), memos }
    }

    fn tokenize_batch(&mut self) -> Vec<Vec<String>> {
        let end = (self.next + TOKENIZE_BATCH).min(self.records.len());
        let batch = &self.records[self.next..end];
        self.next = end;
        let workers = if batch.len() < TOKENIZE_PARALLEL_FROM { 1 } else { self.memos.len() };
        let terms = super::in_parts::map_in_parts(batch, &mut self.memos[..workers], |memo, record| {
            lexical_terms_with(memo, record.as_ref())
        });
        for memo in self.memos.iter_mut().filter(|memo| memo.full()) {
            *memo = crate::text::TermMemo::default();
        }
        terms
    }
}

impl<R: AsRef<crate::model::Record> + Sync> Iterator for LexicalTermsOf<'_, R> {
    type Item = Vec<String>;

    fn next(&mut self) -> Option<Vec<String>> {
        if let Some(terms) = self.ready.next() {
            return Some(terms);
        }
        if self.next >= self.records.len() {
            return None;
        }
        self.ready = self.tokenize_batch().into_iter();
        self.ready.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::terms;

    fn index(texts: &[&str]) -> Bm25Index {
        Bm25Index::build(texts.iter().map(|t| terms(t)), Bm25Params::default())
    }

    #[test]
    fn a_build_tokenizes_every_record_in_order_across_batches_and_threads() {
        // More records than a batch, titles in and out of the text: the parallel, remembered
        // tokenizing gives each record the terms `lexical_terms` gives it, in the records' order.
        let records = fixture_chunks(9000, |n, record| {
            record.text = format!("{} шаг {n} Настройка-{} v{}", record.text, n % 97, n % 13).into();
            if n % 3 == 0 {
                record.meta.title = format!("Страница {n}").into();
            }
        });
        let built: Vec<Vec<String>> = LexicalTermsOf::new(&records).collect();
        let expected: Vec<Vec<String>> = records.iter().map(|record| lexical_terms(record)).collect();
        assert_eq!(built.len(), records.len());
        assert!(built == expected, "terms differ from lexical_terms");
        // The index a level's build makes from the term numbers is the one built from those terms.
        assert_numbered_build_is_the_build_from_terms(&records);
    }

    /// `count` records: the fixture's chunks in turn, each changed by `edit` (given its place).
    fn fixture_chunks(
        count: usize,
        edit: impl Fn(usize, &mut crate::model::Record),
    ) -> Vec<std::sync::Arc<crate::model::Record>> {
        let base = crate::fixtures::snapshot().chunks;
        (0..count)
            .map(|n| {
                let mut record = base[n % base.len()].clone();
                edit(n, &mut record);
                std::sync::Arc::new(record)
            })
            .collect()
    }

    /// A level's build of `records` (from the term numbers) against `build` over the terms of
    /// their definition: every posting, the lengths, the average length.
    fn assert_numbered_build_is_the_build_from_terms(records: &[std::sync::Arc<crate::model::Record>]) {
        let numbered = Bm25Index::build_from_records(records, Bm25Params::default());
        let from_terms = Bm25Index::build(records.iter().map(|record| lexical_terms(record)), Bm25Params::default());
        assert_eq!(numbered.lengths, from_terms.lengths);
        assert_eq!(numbered.average_length.to_bits(), from_terms.average_length.to_bits());
        assert_eq!(numbered.postings.len(), from_terms.postings.len());
        for (term, posting) in &from_terms.postings {
            assert_eq!(numbered.postings.get(term), Some(posting), "{term}");
        }
    }

    #[test]
    fn a_build_past_the_memos_capacity_starts_them_over_and_indexes_the_same() {
        // 9,000 records of 70 words each that no other record has (630,000 distinct terms): each
        // memo fills up in the first batch and is replaced before the second; the postings are
        // still those of a build from the plain terms.
        let records = fixture_chunks(9000, |n, record| {
            record.text = (0..70).map(|k| format!("w{n}q{k}")).collect::<Vec<_>>().join(" ").into();
            record.meta.title = "общий".into();
        });
        assert_numbered_build_is_the_build_from_terms(&records);
        assert!(Bm25Index::build_from_records(&records, Bm25Params::default()).postings.len() > 630_000);
    }

    #[test]
    fn matching_document_outranks_others_and_morphology_counts() {
        let idx = index(&["установка сертификата на андроиде", "отчёты супервизора", "сертификат iOS"]);
        let mut scores = idx.score(&terms("сертификат андроид"), |_| true);
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_eq!(scores[0].0, 0);
        assert_eq!(scores.len(), 2);
    }

    #[test]
    fn scoring_every_document_gives_the_scores_of_score() {
        let idx = index(&["alpha beta beta", "gamma", "alpha gamma delta", "beta", "epsilon"]);
        // Terms of 2 of 5 documents have dense weights, "delta" (1 of 5) only its posting: a
        // query mixing both adds them in its own order either way.
        assert!(idx.dense().contains_key(&terms("alpha")[0]) && !idx.dense().contains_key(&terms("delta")[0]));
        let mut scores = vec![9.0; 7];
        for query in ["alpha beta", "beta alpha beta", "gamma", "zeta", "", "delta alpha", "alpha delta epsilon"] {
            idx.score_all_into(&terms(query), &mut scores);
            let mut expected = vec![0.0f32; 5];
            for (number, score) in idx.score(&terms(query), |_| true) {
                expected[number] = score;
            }
            let bits = |list: &[f32]| list.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&scores), bits(&expected), "{query}");
        }
    }

    #[test]
    fn accept_excludes_documents() {
        let idx = index(&["alpha beta", "alpha"]);
        let scores = idx.score(&terms("alpha"), |n| n == 1);
        assert_eq!(scores.len(), 1);
        assert_eq!(scores[0].0, 1);
    }

    #[test]
    fn a_renumbered_index_scores_like_a_fresh_build() {
        let before = index(&["alpha beta", "beta gamma", "gamma delta", "alpha alpha"]);
        // Document 1 is dropped, "beta epsilon" is new and sorts first; the others move up by one.
        let kept = [Some(1), None, Some(2), Some(3)];
        let renumbered = before.renumbered(&kept, [(0, terms("beta epsilon"))], 4);
        let fresh = index(&["beta epsilon", "alpha beta", "gamma delta", "alpha alpha"]);
        for query in ["alpha", "beta", "gamma epsilon", "delta alpha"] {
            let mut got = renumbered.score(&terms(query), |_| true);
            let mut want = fresh.score(&terms(query), |_| true);
            got.sort_by_key(|&(number, _)| number);
            want.sort_by_key(|&(number, _)| number);
            assert_eq!(got, want, "{query}");
        }
        assert_eq!(renumbered.len(), 4);
    }

    #[test]
    fn scoring_among_given_documents_equals_scoring_with_accept() {
        let texts: Vec<String> = (0..300)
            .map(|n| {
                let mut words = vec!["общий"];
                if n % 3 == 0 {
                    words.push("фильтр");
                }
                if n % 7 == 0 {
                    words.extend(["фильтр", "dns"]);
                }
                if n == 150 {
                    words.push("редкий");
                }
                words.join(" ")
            })
            .collect();
        let index = index(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        let terms = terms("фильтр dns редкий общий нет");
        let subsets: Vec<Vec<usize>> =
            vec![(0..300).collect(), vec![0, 7, 150, 299], (100..160).collect(), vec![5], Vec::new()];
        for numbers in subsets {
            for odd_only in [false, true] {
                let accept = |number: usize| !odd_only || number % 2 == 1;
                let expected = index.score(&terms, |number| numbers.contains(&number) && accept(number));
                let got = index.score_among(&terms, &numbers, accept);
                let bits = |list: &[(usize, f32)]| list.iter().map(|&(n, s)| (n, s.to_bits())).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&expected), "{numbers:?} {odd_only}");
            }
        }
    }

    #[test]
    fn scores_are_the_bm25_formula_over_the_current_documents() {
        // The textbook sum, written out: the weights kept in the postings must be those of the
        // documents as they are now, also after a renumbering changed the lengths and the counts.
        let texts = ["alpha beta beta", "beta gamma", "alpha", "gamma gamma gamma delta"];
        let documents: Vec<Vec<String>> = texts.iter().map(|text| terms(text)).collect();
        let expected = |documents: &[Vec<String>], query: &[String]| -> Vec<(usize, u32)> {
            let (k1, b) = (1.2f32, 0.75f32);
            let total = documents.len() as f32;
            let average = documents.iter().map(Vec::len).sum::<usize>() as f32 / total;
            let mut query: Vec<&String> = query.iter().collect();
            query.sort();
            query.dedup();
            let mut scores = Vec::new();
            for (number, document) in documents.iter().enumerate() {
                let mut score = 0.0f32;
                for term in &query {
                    let holders = documents.iter().filter(|d| d.contains(term)).count() as f32;
                    let count = document.iter().filter(|t| t == term).count() as f32;
                    if count > 0.0 {
                        let idf = (1.0 + (total - holders + 0.5) / (holders + 0.5)).ln();
                        let norm = document.len() as f32 / average;
                        score += idf * count * (k1 + 1.0) / (count + k1 * (1.0 - b + b * norm));
                    }
                }
                if score > 0.0 {
                    scores.push((number, score.to_bits()));
                }
            }
            scores
        };
        let got = |index: &Bm25Index, query: &[String]| -> Vec<(usize, u32)> {
            let mut scores: Vec<(usize, u32)> =
                index.score(query, |_| true).into_iter().map(|(n, s)| (n, s.to_bits())).collect();
            scores.sort();
            scores
        };
        let built = Bm25Index::build(documents.clone(), Bm25Params::default());
        let renumbered = built.renumbered(&[Some(0), None, Some(1), Some(2)], [(3, terms("beta beta alpha"))], 4);
        let now: Vec<Vec<String>> =
            vec![documents[0].clone(), documents[2].clone(), documents[3].clone(), terms("beta beta alpha")];
        for query in ["alpha", "beta gamma", "delta alpha beta", "gamma"] {
            let query = terms(query);
            assert_eq!(got(&built, &query), expected(&documents, &query), "{query:?}");
            assert_eq!(got(&renumbered, &query), expected(&now, &query), "renumbered {query:?}");
        }
    }

    #[test]
    fn no_terms_no_scores() {
        assert!(index(&["alpha"]).score(&[], |_| true).is_empty());
        assert!(Bm25Index::default().score(&terms("alpha"), |_| true).is_empty());
    }
}
