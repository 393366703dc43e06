//! A build's per-record work spread over the machine's cores: a slice cut into one part per
//! worker, each part on its own scoped thread (the first on the calling thread), the results put
//! back in the slice's order.

/// How many workers a build uses: the machine's cores, at most four.
pub(crate) fn build_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// `each` applied to every item of `items`, in order, over as many parts as `states` has, each
/// part with its own state (one state: on the calling thread alone). A panic in a part is the
/// caller's.
pub(crate) fn map_in_parts<T: Sync, S: Send, R: Send>(
    items: &[T],
    states: &mut [S],
    each: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    let map = |state: &mut S, part: &[T]| part.iter().map(|item| each(state, item)).collect::<Vec<R>>();
    let Some((own_state, other_states)) = states.split_first_mut() else {
        return Vec::new();
    };
    if other_states.is_empty() || items.len() < 2 {
        return map(own_state, items);
    }
    let mut parts = items.chunks(items.len().div_ceil(other_states.len() + 1));
    let own = parts.next().unwrap_or_default();
    std::thread::scope(|scope| {
        let map = &map;
        let others: Vec<_> =
            parts.zip(other_states.iter_mut()).map(|(part, state)| scope.spawn(move || map(state, part))).collect();
        let mut results = map(own_state, own);
        for other in others {
            results.extend(other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        results
    })
}

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
            assert!(seen.iter().all(|&count| count > 0), "every worker had a part: {seen:?}");
        }
        assert!(map_in_parts(&items, &mut [(); 0], |_, item| *item).is_empty());
    }
}
