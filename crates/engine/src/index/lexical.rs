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
mod tests;
