//! BM25 over stemmed terms (Robertson & Zaragoza, "The Probabilistic Relevance Framework:
//! BM25 and Beyond", 2009), one index per tenant and level so that statistics never mix tenants.

use super::in_parts::map_in_parts;
use crate::model::Record;
use rustc_hash::FxHashMap as HashMap;

/// Term-frequency saturation and length normalisation: the customary defaults, which are also
/// the reference BM25 (Robertson–Zaragoza; k1 = 1.2, b = 0.75).
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
    postings: HashMap<String, PostingList>,
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

/// One term's postings, in ascending document number: each document's number and the term's
/// weight in it side by side (what a search reads), and apart from them how often it holds the
/// term (what only `finish`, a renumbering and the local copy read): 9 bytes an entry, not 12.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(PartialEq))]
struct PostingList {
    entries: Vec<Posting>,
    counts: Counts,
}

/// One document holding a term: its number and the term's BM25 weight in it. The weight is a
/// function of the build alone (the term's document frequency, the document's length, the
/// average length, the count), so `finish` computes it once for every search.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(test, derive(PartialEq))]
struct Posting {
    number: u32,
    weight: f32,
}

/// How often each entry's document holds the term, a byte each; a count of `COUNT_ESCAPE` or
/// more is `COUNT_ESCAPE` there and kept whole in `large` (entry, count), by ascending entry: a
/// term that many times in one record is rare.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(PartialEq))]
struct Counts {
    small: Vec<u8>,
    large: Vec<(u32, u32)>,
}

const COUNT_ESCAPE: u8 = u8::MAX;

impl Counts {
    /// The next entry's count.
    fn push(&mut self, count: u32) {
        match u8::try_from(count) {
            Ok(small) if small < COUNT_ESCAPE => self.small.push(small),
            _ => {
                self.large.push((self.small.len() as u32, count));
                self.small.push(COUNT_ESCAPE);
            }
        }
    }

    /// Entry `entry`'s count.
    fn get(&self, entry: usize) -> u32 {
        match self.small[entry] {
            COUNT_ESCAPE => {
                let at = self.large.binary_search_by_key(&(entry as u32), |&(entry, _)| entry);
                at.map_or(u32::from(COUNT_ESCAPE), |at| self.large[at].1)
            }
            small => u32::from(small),
        }
    }
}

impl PostingList {
    /// Appends document `number`, which holds the term `count` times (its weight is set by
    /// `Bm25Index::finish`).
    fn push(&mut self, number: u32, count: u32) {
        self.entries.push(Posting { number, weight: 0.0 });
        self.counts.push(count);
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// An empty list with room for `len` entries.
    fn with_capacity(len: usize) -> Self {
        PostingList {
            entries: Vec::with_capacity(len),
            counts: Counts { small: Vec::with_capacity(len), large: Vec::new() },
        }
    }

    /// The entries (with their counts) in ascending document number, when they are not already
    /// (a renumbering appends the new documents' entries after the kept ones). The (number,
    /// count) pairs are sorted side by side: sorting positions by a key looked up in the entries
    /// would read the entries at random, which makes a big tenant's one-page edit several times slower.
    fn sort(&mut self) {
        if self.entries.is_sorted_by_key(|entry| entry.number) {
            return;
        }
        let mut pairs: Vec<(u32, u32)> =
            self.entries.iter().enumerate().map(|(entry, posting)| (posting.number, self.counts.get(entry))).collect();
        pairs.sort_unstable_by_key(|&(number, _)| number);
        let mut sorted = PostingList::with_capacity(pairs.len());
        for (number, count) in pairs {
            sorted.push(number, count);
        }
        *self = sorted;
    }
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
        let mut terms: Vec<(&String, &PostingList)> = self.postings.iter().collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out.len(terms.len())?;
        for (term, list) in terms {
            out.str(term)?;
            out.len(list.len())?;
            out.words(list.entries.iter().enumerate().flat_map(|(entry, p)| {
                [p.number.to_le_bytes(), list.counts.get(entry).to_le_bytes(), p.weight.to_le_bytes()]
            }))?;
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
            let mut list = PostingList::with_capacity(len);
            for p in words.chunks_exact(3) {
                list.entries.push(Posting { number: u32::from_le_bytes(p[0]), weight: f32::from_le_bytes(p[2]) });
                list.counts.push(u32::from_le_bytes(p[1]));
            }
            if list.entries.iter().any(|posting| posting.number as usize >= documents) {
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
                for entry in &posting.entries {
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
    /// record: each thread's memo numbers the terms it meets and counts a record's terms by
    /// sorting their numbers. A batch's terms are added to the postings on a thread of their own
    /// while the next batch is tokenized (`Gathering`).
    pub(crate) fn build_from_records<R: AsRef<Record> + Sync>(records: &[R], params: Bm25Params) -> Self {
        let mut memos = Memos::new();
        let [index] = gather_beside(&mut memos, params, |memos, send| memos.send_tokenized(send, 0, records));
        index
    }

    /// The lexical indexes of a tenant's sections and of its chunks (each level's records in
    /// number order), the same as `build_from_records` of each, with each text tokenized once:
    /// a chunk whose text is a passage of its section's (a share of the same text, as a load links
    /// them, cut between tokens) with the section's title takes its terms from the section's
    /// tokens. The sections are tokenized as the chunks that need them come (chunks are numbered
    /// by id, and a chunk's id follows its section's), so only a window of their tokens is held;
    /// any other chunk is tokenized on its own.
    pub(crate) fn build_sections_and_chunks<R: AsRef<Record> + Sync>(
        sections: &[R],
        chunks: &[R],
        params: Bm25Params,
    ) -> (Self, Self) {
        const SECTIONS: usize = 0;
        const CHUNKS: usize = 1;
        let mut memos = Memos::new();
        let [section_index, chunk_index] = gather_beside(&mut memos, params, |memos, send| {
            // The sections tokenized and not yet passed by the chunks: `window_start..next_section`.
            let mut window: Vec<SectionTokens> = Vec::new();
            let (mut window_start, mut next_section) = (0, 0);
            for batch in chunks.chunks(TOKENIZE_BATCH) {
                // Each chunk's section (by number) and where its text is in the section's, when its
                // section is tokenized with this batch or still in the window.
                let limit = next_section + TOKENIZE_BATCH;
                let links =
                    map_in_parts(batch, &mut vec![next_section; memos.workers_for(batch.len())], |hint, chunk| {
                        Passage::of(chunk.as_ref(), sections, hint)
                            .filter(|p| (window_start..limit).contains(&p.section))
                    });
                if let Some(last) = links.iter().flatten().map(|passage| passage.section).max() {
                    if last >= next_section {
                        let new = &sections[next_section..=last];
                        let (counted, tokens): (Vec<Counted>, Vec<SectionTokens>) =
                            map_in_parts(new, memos.for_batch(new.len()), |(id, memo), section| {
                                SectionTokens::new(*id, memo, section.as_ref())
                            })
                            .into_iter()
                            .unzip();
                        memos.send_batch(send, SECTIONS, counted);
                        window.extend(tokens);
                        next_section = last + 1;
                    }
                }
                let items: Vec<(&R, Option<Passage>)> = batch.iter().zip(links).collect();
                let (tokenized, first) = (&window, window_start);
                let counted = map_in_parts(&items, memos.for_batch(items.len()), |(id, memo), (chunk, link)| {
                    let chunk = chunk.as_ref();
                    let derived = link.and_then(|link| tokenized[link.section - first].chunk_terms(chunk, link));
                    derived.unwrap_or_else(|| Counted::of(*id, memo, chunk))
                });
                // Keep the last section tokenized: the next batch's first chunks may be its.
                let keep_from = next_section.saturating_sub(1).max(window_start);
                memos.send_batch(send, CHUNKS, counted);
                if memos.start_over_full(send) {
                    // The window's tokens are numbered by a memo that started over.
                    window.clear();
                    window_start = next_section;
                } else {
                    window.drain(..keep_from - window_start);
                    window_start = keep_from;
                }
            }
            memos.send_tokenized(send, SECTIONS, &sections[next_section..]);
        });
        (section_index, chunk_index)
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
        for (term, list) in &self.postings {
            let mut moved = PostingList::with_capacity(list.len());
            for (entry, posting) in list.entries.iter().enumerate() {
                if let Some(number) = kept[posting.number as usize] {
                    moved.push(number, list.counts.get(entry));
                }
            }
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
            self.postings.entry(term).or_default().push(number, count);
        }
    }

    fn finish(mut self) -> Self {
        let total: u64 = self.lengths.iter().map(|&l| l as u64).sum();
        self.average_length = if self.lengths.is_empty() { 0.0 } else { total as f32 / self.lengths.len() as f32 };
        let total_documents = self.lengths.len() as f32;
        let mut postings = std::mem::take(&mut self.postings);
        for list in postings.values_mut() {
            // Postings in ascending document number: `score_among` looks documents up in them.
            list.sort();
            let idf = idf(list.len(), total_documents);
            for (entry, posting) in list.entries.iter_mut().enumerate() {
                posting.weight = self.weight(idf, posting.number as usize, list.counts.get(entry));
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
            for entry in &posting.entries {
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
            for entry in &posting.entries {
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
            let mut rest: &[Posting] = &posting.entries;
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

/// `LEVELS` lexical indexes built from the batches `tokenize` sends (`Memos::send_batch`, each
/// for one of them), added to their postings on a thread of its own as they come.
fn gather_beside<const LEVELS: usize>(
    memos: &mut Memos,
    params: Bm25Params,
    tokenize: impl FnOnce(&mut Memos, &std::sync::mpsc::SyncSender<Gathered>),
) -> [Bm25Index; LEVELS] {
    let workers = memos.memos.len();
    // Room for a few batches: a section batch's terms can take the adding thread longer than
    // the next batch's tokenizing.
    let (send, received) = std::sync::mpsc::sync_channel(GATHERED_AHEAD);
    let gatherings = std::thread::scope(|scope| {
        let gathering = scope.spawn(move || {
            let mut gatherings: [Gathering; LEVELS] = std::array::from_fn(|_| Gathering::new(workers));
            // Per memo: its terms by number, as sent.
            let mut names: Vec<Vec<String>> = vec![Vec::new(); workers];
            for message in received {
                match message {
                    Gathered::Names(memo, new) => names[memo].extend(new),
                    Gathered::StartOver(memo) => {
                        names[memo].clear();
                        gatherings.iter_mut().for_each(|gathering| gathering.places[memo].clear());
                    }
                    Gathered::Batch(level, counted) => gatherings[level].add_batch(&names, counted),
                }
            }
            gatherings
        });
        tokenize(memos, &send);
        drop(send);
        gathering.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    gatherings.map(|gathering| gathering.finish(params))
}

/// What the tokenizing threads of a build send the thread that adds to the postings, in order.
enum Gathered {
    /// A memo's terms numbered since its last message, by number.
    Names(usize, Vec<String>),
    /// A memo started over: its numbers name nothing any more.
    StartOver(usize),
    /// The next records of one level.
    Batch(usize, Vec<Counted>),
}

/// A build's term memos, one per worker.
struct Memos {
    /// Each memo with its worker's number.
    memos: Vec<(usize, crate::text::TermMemo)>,
    /// How many of each memo's terms were sent to the thread that adds them.
    sent: Vec<usize>,
}

impl Memos {
    fn new() -> Self {
        let workers = super::in_parts::build_workers();
        Self { memos: (0..workers).map(|id| (id, crate::text::TermMemo::default())).collect(), sent: vec![0; workers] }
    }

    /// Tokenizes `records` (each on its own) a batch at a time and sends them as `level`'s next
    /// records.
    fn send_tokenized<R: AsRef<Record> + Sync>(
        &mut self,
        send: &std::sync::mpsc::SyncSender<Gathered>,
        level: usize,
        records: &[R],
    ) {
        for batch in records.chunks(TOKENIZE_BATCH) {
            let counted = map_in_parts(batch, self.for_batch(batch.len()), |(id, memo), record| {
                Counted::of(*id, memo, record.as_ref())
            });
            self.send_batch(send, level, counted);
            self.start_over_full(send);
        }
    }

    /// How many workers a batch of `len` records is tokenized on: one alone for a small batch.
    fn workers_for(&self, len: usize) -> usize {
        if len < TOKENIZE_PARALLEL_FROM {
            1
        } else {
            self.memos.len()
        }
    }

    /// The memos a batch of `len` records is tokenized with.
    fn for_batch(&mut self, len: usize) -> &mut [(usize, crate::text::TermMemo)] {
        let workers = self.workers_for(len);
        &mut self.memos[..workers]
    }

    /// Sends a batch of `level` and the terms it names that were not sent yet.
    fn send_batch(&mut self, send: &std::sync::mpsc::SyncSender<Gathered>, level: usize, counted: Vec<Counted>) {
        // A send fails only when the adding thread has panicked: its join says so.
        for ((id, memo), sent) in self.memos.iter().zip(&mut self.sent) {
            let new = memo.names_from(*sent);
            if !new.is_empty() {
                *sent += new.len();
                let _ = send.send(Gathered::Names(*id, new.to_vec()));
            }
        }
        let _ = send.send(Gathered::Batch(level, counted));
    }

    /// Starts every `full` memo over (between batches, when no numbers of theirs are held any
    /// more); whether any did.
    fn start_over_full(&mut self, send: &std::sync::mpsc::SyncSender<Gathered>) -> bool {
        let mut any = false;
        for ((id, memo), sent) in self.memos.iter_mut().zip(&mut self.sent).filter(|((_, memo), _)| memo.full()) {
            *memo = crate::text::TermMemo::default();
            *sent = 0;
            let _ = send.send(Gathered::StartOver(*id));
            any = true;
        }
        any
    }
}

/// One record's terms as a worker counted them: its length (terms in all) and its distinct terms
/// (the numbers of memo `memo`, ascending) with how often it holds each.
struct Counted {
    memo: usize,
    length: u32,
    runs: Vec<(u32, u32)>,
}

impl Counted {
    /// `record`'s terms (`lexical_term_numbers`), tokenized with `memo`, worker `id`'s.
    fn of(id: usize, memo: &mut crate::text::TermMemo, record: &Record) -> Self {
        let mut numbers = Vec::new();
        lexical_term_numbers(memo, record, &mut numbers);
        Self::new(id, numbers)
    }

    fn new(memo: usize, mut numbers: Vec<u32>) -> Self {
        numbers.sort_unstable();
        let runs = numbers.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u32)).collect();
        Self { memo, length: numbers.len() as u32, runs }
    }
}

/// A section's terms, as the chunks whose texts are passages of its text take theirs from them.
struct SectionTokens {
    /// The memo that numbered them.
    memo: usize,
    /// Its text's terms, each with the byte where its token starts.
    text: Vec<(u32, u32)>,
    /// Its title, and the title's terms.
    title_text: crate::shared_str::SharedStr,
    title: Vec<u32>,
}

impl SectionTokens {
    /// The section's own terms, and its tokens.
    fn new(id: usize, memo: &mut crate::text::TermMemo, section: &Record) -> (Counted, Self) {
        let mut text = Vec::new();
        memo.term_numbers_at(&section.text, &mut text);
        let mut title = Vec::new();
        memo.term_numbers(&section.meta.title, &mut title);
        // As `lexical_term_numbers`: the title's terms, when the text does not hold it, then the text's.
        let mut numbers = if section.text.contains(section.meta.title.as_str()) { Vec::new() } else { title.clone() };
        numbers.extend(text.iter().map(|&(number, _)| number));
        (Counted::new(id, numbers), Self { memo: id, text, title_text: section.meta.title.clone(), title })
    }

    /// The terms of `chunk`, whose text is `passage` of this section's, as `lexical_term_numbers`
    /// gives them; `None` when they need the chunk's title and it is not the section's.
    fn chunk_terms(&self, chunk: &Record, passage: Passage) -> Option<Counted> {
        let mut numbers = Vec::new();
        if !chunk.text.contains(chunk.meta.title.as_str()) {
            if chunk.meta.title.as_str() != self.title_text.as_str() {
                return None;
            }
            numbers.extend_from_slice(&self.title);
        }
        let from = self.text.partition_point(|&(_, at)| at < passage.start);
        let to = self.text.partition_point(|&(_, at)| at < passage.end);
        numbers.extend(self.text[from..to].iter().map(|&(number, _)| number));
        Some(Counted::new(self.memo, numbers))
    }
}

/// Where a chunk's text is in its section's: the section's number and the passage's bounds in
/// its text, both between tokens.
#[derive(Clone, Copy)]
struct Passage {
    section: usize,
    start: u32,
    end: u32,
}

impl Passage {
    /// `chunk`'s passage of its section (found by id among `sections`, which are in id order,
    /// first at `hint` and after it, where the chunk before's was), when its text is a share of
    /// the section's cut between tokens.
    fn of<R: AsRef<Record>>(chunk: &Record, sections: &[R], hint: &mut usize) -> Option<Self> {
        let section_id = chunk.meta.section_id.as_deref()?;
        let is_it = |number: &usize| sections.get(*number).is_some_and(|s| s.as_ref().id == section_id);
        let section =
            [*hint, *hint + 1].into_iter().find(is_it).or_else(|| super::number_by_id(sections, section_id))?;
        *hint = section;
        let outer = &sections[section].as_ref().text;
        let (start, end) = chunk.text.bounds_in(outer)?;
        let text = outer.as_str();
        (crate::text::between_tokens(text, start as usize) && crate::text::between_tokens(text, end as usize))
            .then_some(Self { section, start, end })
    }
}

/// One level's postings as a build gathers them, record by record in number order: each memo
/// number's place (the term's, in `terms` and `postings`), met once by name. A batch's postings
/// are grouped by term before they are appended (a record's go to as many lists as it has
/// distinct terms, scattered over the level's lists): a counting sort, in a buffer reused from
/// batch to batch, which keeps each term's postings in record order.
struct Gathering {
    /// Per memo: its term number → the term's place (MAX: not met yet).
    places: Vec<Vec<u32>>,
    place_of: HashMap<String, u32>,
    terms: Vec<String>,
    postings: Vec<PostingList>,
    lengths: Vec<u32>,
    /// The batch's (place, record number, count), in record order.
    entries: Vec<(u32, u32, u32)>,
    /// Per place: where its group starts in `grouped`, then (after the scatter) ends.
    ends: Vec<u32>,
    /// The batch's (record number, count), grouped by place.
    grouped: Vec<(u32, u32)>,
}

impl Gathering {
    fn new(memos: usize) -> Self {
        Self {
            places: vec![Vec::new(); memos],
            place_of: HashMap::default(),
            terms: Vec::new(),
            postings: Vec::new(),
            lengths: Vec::new(),
            entries: Vec::new(),
            ends: Vec::new(),
            grouped: Vec::new(),
        }
    }

    /// Adds the next records (numbered on from those added before) and appends their postings;
    /// `names[memo]` are the terms of a memo's numbers.
    fn add_batch(&mut self, names: &[Vec<String>], batch: Vec<Counted>) {
        for Counted { memo, length, runs } in batch {
            let number = self.lengths.len() as u32;
            self.lengths.push(length);
            let table = &mut self.places[memo];
            for (term, count) in runs {
                if term as usize >= table.len() {
                    table.resize(term as usize + 1, u32::MAX);
                }
                if table[term as usize] == u32::MAX {
                    let name = names[memo][term as usize].as_str();
                    table[term as usize] = match self.place_of.get(name) {
                        Some(&place) => place,
                        None => {
                            let place = self.terms.len() as u32;
                            self.place_of.insert(name.to_string(), place);
                            self.terms.push(name.to_string());
                            self.postings.push(PostingList::default());
                            place
                        }
                    };
                }
                self.entries.push((table[term as usize], number, count));
            }
        }
        self.append_batch();
    }

    fn append_batch(&mut self) {
        self.ends.clear();
        self.ends.resize(self.postings.len() + 1, 0);
        for &(place, _, _) in &self.entries {
            self.ends[place as usize + 1] += 1;
        }
        for place in 1..self.ends.len() {
            self.ends[place] += self.ends[place - 1];
        }
        self.grouped.clear();
        self.grouped.resize(self.entries.len(), (0, 0));
        for &(place, number, count) in &self.entries {
            let at = &mut self.ends[place as usize];
            self.grouped[*at as usize] = (number, count);
            *at += 1;
        }
        let mut start = 0;
        for (list, &end) in self.postings.iter_mut().zip(&self.ends) {
            let end = end as usize;
            if end > start {
                let group = &self.grouped[start..end];
                list.entries.extend(group.iter().map(|&(number, _)| Posting { number, weight: 0.0 }));
                group.iter().for_each(|&(_, count)| list.counts.push(count));
            }
            start = end;
        }
        self.entries.clear();
    }

    fn finish(self, params: Bm25Params) -> Bm25Index {
        let postings = self.terms.into_iter().zip(self.postings).collect();
        Bm25Index { params, postings, lengths: self.lengths, ..Bm25Index::default() }.finish()
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

/// Batches tokenized and not yet added to the postings, at most.
const GATHERED_AHEAD: usize = 8;

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
    use crate::shared_str::SharedText;
    use crate::text::terms;
    use std::sync::Arc;

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
        assert_is_the_build_from_terms(&Bm25Index::build_from_records(records, Bm25Params::default()), records);
    }

    fn assert_is_the_build_from_terms(numbered: &Bm25Index, records: &[std::sync::Arc<crate::model::Record>]) {
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

    /// `sections` of `passages(s)` passages each, in id order, and their chunks (id order):
    /// each chunk a share of its section's text, with its title, then as `edit` makes it
    /// (`edit(section, chunk, record, from, to)`, with the section and where the passage is).
    fn sections_with_chunks(
        sections: usize,
        passages: impl Fn(usize) -> Vec<String>,
        edit: impl Fn(usize, usize, &mut crate::model::Record, &crate::model::Record, usize, usize),
    ) -> (Vec<Arc<crate::model::Record>>, Vec<Arc<crate::model::Record>>) {
        let base = crate::fixtures::snapshot().chunks[0].clone();
        let (mut section_records, mut chunk_records) = (Vec::new(), Vec::new());
        for s in 0..sections {
            let id = format!("s{s:06}");
            let title = format!("Раздел {s} о фильтрах");
            let passages = passages(s);
            let mut section = base.clone();
            (section.id, section.meta.section_id) = (id.clone(), Some(id.clone()));
            section.meta.title = title.as_str().into();
            section.text = format!("{title}\n{}", passages.join(" ")).into();
            let mut from = title.len() + 1;
            for (c, passage) in passages.iter().enumerate() {
                let mut chunk = base.clone();
                (chunk.id, chunk.meta.section_id) = (format!("{id}-c{c:02}"), Some(id.clone()));
                chunk.meta.title = section.meta.title.clone();
                let to = from + passage.len();
                chunk.text = SharedText::passage(&section.text, from, to).expect("a passage");
                edit(s, c, &mut chunk, &section, from, to);
                chunk_records.push(Arc::new(chunk));
                from = to + 1;
            }
            section_records.push(Arc::new(section));
        }
        chunk_records.sort_by(|a, b| a.id.cmp(&b.id));
        (section_records, chunk_records)
    }

    #[test]
    fn sections_and_chunks_built_together_index_as_each_level_alone() {
        // 3,000 sections of 3 to 7 passages (over 8,192 chunks: several batches, and sections whose
        // chunks a batch's end cuts). Most chunks are passages of their section's text with its
        // title; the others start or end inside a word, have a title of their own (in their text
        // or not), are a copy of their text, name another section or none, or come in id order
        // long after their section (outside the window of tokenized sections).
        const WORDS: [&str; 10] =
            ["установка", "Сертификата", "на", "андроиде", "отчёты", "супервизора", "iOS", "v2", "ёлка", "фильтрах"];
        let passages = |s: usize| -> Vec<String> {
            (0..3 + s % 5)
                .map(|c| (0..4 + (s + c) % 9).map(|w| WORDS[(s * 7 + c * 3 + w) % 10]).collect::<Vec<_>>().join(" "))
                .collect()
        };
        let (sections, chunks) =
            sections_with_chunks(3000, passages, |s, c, chunk, section, from, to| match (s * 5 + c) % 19 {
                // Cyrillic letters are two bytes, ASCII one: two bytes in is inside a word or at its end.
                0 => chunk.text = SharedText::passage(&section.text, from + 2, to).expect("a passage"),
                1 => chunk.text = SharedText::passage(&section.text, from, to - 2).expect("a passage"),
                2 => chunk.meta.title = "Свой заголовок".into(),
                3 => chunk.meta.title = "на".into(),
                4 => chunk.text = chunk.text.as_str().to_string().into(),
                5 => chunk.meta.section_id = Some(format!("s{:06}", (s + 1500) % 3000)),
                6 => chunk.meta.section_id = None,
                7 => chunk.id = format!("z{}", chunk.id),
                _ => {}
            });
        let (section_index, chunk_index) =
            Bm25Index::build_sections_and_chunks(&sections, &chunks, Bm25Params::default());
        assert_is_the_build_from_terms(&section_index, &sections);
        assert_is_the_build_from_terms(&chunk_index, &chunks);
        // With no chunks, and with no sections.
        let (section_index, none) = Bm25Index::build_sections_and_chunks(&sections, &[], Bm25Params::default());
        assert_is_the_build_from_terms(&section_index, &sections);
        assert!(none.postings.is_empty());
        let (none, chunk_index) = Bm25Index::build_sections_and_chunks(&[], &chunks, Bm25Params::default());
        assert_is_the_build_from_terms(&chunk_index, &chunks);
        assert!(none.postings.is_empty());
    }

    #[test]
    fn sections_and_chunks_built_together_past_the_memos_capacity_index_as_each_level_alone() {
        // 3,000 sections of 3 passages of 70 words no other section has (630,000 distinct
        // terms): the memos fill up in the first batch of chunks, which ends inside a section,
        // and start over while that section is still in the window.
        let passages = |s: usize| -> Vec<String> {
            (0..3).map(|c| (0..70).map(|w| format!("w{s}q{c}r{w}")).collect::<Vec<_>>().join(" ")).collect()
        };
        let (sections, chunks) = sections_with_chunks(3000, passages, |_, _, _, _, _, _| {});
        let (section_index, chunk_index) =
            Bm25Index::build_sections_and_chunks(&sections, &chunks, Bm25Params::default());
        assert_is_the_build_from_terms(&section_index, &sections);
        assert_is_the_build_from_terms(&chunk_index, &chunks);
        assert!(chunk_index.postings.len() > 630_000);
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
        // documents as they are now, also after a renumbering changed the lengths and the counts,
        // and as the local copy reads them back; a term held 300 times by one document (more
        // than a count's byte holds) counts 300 times in each.
        let many = "delta ".repeat(300);
        let texts = ["alpha beta beta", "beta gamma", "alpha", "gamma gamma gamma delta", many.as_str()];
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
        let renumbered =
            built.renumbered(&[Some(0), None, Some(1), Some(2), Some(4)], [(3, terms("beta beta alpha delta"))], 5);
        let now: Vec<Vec<String>> = vec![
            documents[0].clone(),
            documents[2].clone(),
            documents[3].clone(),
            terms("beta beta alpha delta"),
            documents[4].clone(),
        ];
        let mut bytes = Vec::new();
        renumbered.write_to(&mut crate::index::codec::Writer(&mut bytes)).unwrap();
        let read_back = Bm25Index::read_from(&mut crate::index::codec::Reader(bytes.as_slice()), 5).unwrap();
        for query in ["alpha", "beta gamma", "delta alpha beta", "gamma", "delta"] {
            let query = terms(query);
            assert_eq!(got(&built, &query), expected(&documents, &query), "{query:?}");
            assert_eq!(got(&renumbered, &query), expected(&now, &query), "renumbered {query:?}");
            assert_eq!(got(&read_back, &query), expected(&now, &query), "read back {query:?}");
        }
    }

    #[test]
    fn a_postings_counts_stay_with_their_documents_whatever_their_size() {
        let counts = [1, 254, 255, 256, 300, 7, u32::MAX, 0];
        let mut list = PostingList::default();
        // Pushed in descending document number: sorting moves each count with its document.
        for (number, &count) in counts.iter().enumerate().rev() {
            list.push(number as u32, count);
        }
        list.sort();
        let numbers: Vec<u32> = list.entries.iter().map(|entry| entry.number).collect();
        assert_eq!(numbers, (0..counts.len() as u32).collect::<Vec<_>>());
        let read: Vec<u32> = (0..list.len()).map(|entry| list.counts.get(entry)).collect();
        assert_eq!(read, counts);
    }

    #[test]
    fn no_terms_no_scores() {
        assert!(index(&["alpha"]).score(&[], |_| true).is_empty());
        assert!(Bm25Index::default().score(&terms("alpha"), |_| true).is_empty());
    }
}
