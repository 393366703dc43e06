//! A build's per-record work spread over the machine's cores: a slice cut into one part per
//! worker, each part on its own scoped thread (the first on the calling thread), the results put
//! back in the slice's order.

/// How many workers a build uses: the machine's cores, at most four.
pub(crate) fn build_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// `each` applied to every item of `items`, in order, by as many workers as `states` has, each
/// with its own state (one state: on the calling thread alone). The items are cut into
/// `PIECES_PER_WORKER` pieces per worker, which the workers take in turn as each finishes one:
/// a worker the machine's other work slows down takes fewer, instead of the others waiting for
/// its equal share. A panic in a worker is the caller's.
pub(crate) fn map_in_parts<T: Sync, S: Send, R: Send>(
    items: &[T],
    states: &mut [S],
    each: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let Some((own_state, other_states)) = states.split_first_mut() else {
        return Vec::new();
    };
    if other_states.is_empty() || items.len() < 2 {
        return items.iter().map(|item| each(own_state, item)).collect();
    }
    let workers = other_states.len() + 1;
    let piece = items.len().div_ceil(workers * PIECES_PER_WORKER).max(1);
    let pieces = items.len().div_ceil(piece);
    let next = std::sync::atomic::AtomicUsize::new(0);
    // Each worker's pieces, by number, mapped.
    let work = |state: &mut S| {
        let mut done: Vec<(usize, Vec<R>)> = Vec::new();
        loop {
            let number = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if number >= pieces {
                return done;
            }
            let part = &items[number * piece..((number + 1) * piece).min(items.len())];
            done.push((number, part.iter().map(|item| each(state, item)).collect()));
        }
    };
    let mut mapped: Vec<Option<Vec<R>>> = (0..pieces).map(|_| None).collect();
    std::thread::scope(|scope| {
        let work = &work;
        let others: Vec<_> = other_states.iter_mut().map(|state| scope.spawn(move || work(state))).collect();
        let own = work(own_state);
        for done in std::iter::once(own).chain(
            others.into_iter().map(|other| other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))),
        ) {
            for (number, results) in done {
                mapped[number] = Some(results);
            }
        }
    });
    let mut results = Vec::with_capacity(items.len());
    for part in mapped {
        results.extend(part.expect("every piece is taken by exactly one worker"));
    }
    results
}

/// Pieces a worker's share of the items is cut into (see `map_in_parts`).
const PIECES_PER_WORKER: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_mapped_once_in_order_whatever_the_parts() {
        let items: Vec<u32> = (0..1001).collect();
        for workers in [1, 2, 3, 4] {
            let mut seen = vec![0usize; workers];
            let doubled = map_in_parts(&items, &mut seen, |count, item| {
                *count += 1;
                item * 2
            });
            assert_eq!(doubled, items.iter().map(|item| item * 2).collect::<Vec<_>>(), "{workers} workers");
            assert_eq!(seen.iter().sum::<usize>(), items.len());
        }
        assert!(map_in_parts(&items, &mut [(); 0], |_, item| *item).is_empty());
    }

    #[test]
    fn a_slow_worker_leaves_its_share_to_the_others() {
        // The calling thread's worker (state 0) takes 5 ms an item; the other none.
        let items: Vec<u32> = (0..64).collect();
        let mut seen = vec![(0usize, 0usize), (1, 0)];
        let mapped = map_in_parts(&items, &mut seen, |(worker, count), item| {
            if *worker == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            *count += 1;
            item + 1
        });
        assert_eq!(mapped, (1..65).collect::<Vec<_>>());
        assert_eq!(seen[0].1 + seen[1].1, 64);
        assert!(seen[1].1 > 32, "the fast worker took more than an equal share: {seen:?}");
    }
}
