//! An embedding's numbers read with SSSE3 and SSE4.1 (x86-64 CPUs since 2008, checked at run
//! time): the short form most of them have (`-0.01953443`: one digit, a point, one to ten digits)
//! in a dozen vector instructions instead of a few dozen scalar ones. Every value is the one the
//! scalar reader gives (`load::nearest_of_short`, the same arithmetic); anything else is read by
//! it.

use super::load::{nearest_of_short, parse_number, parse_numbers_with};
use std::arch::x86_64::*;

/// Whether this CPU has the instructions (the standard library checks once and remembers).
pub(super) fn available() -> bool {
    is_x86_feature_detected!("ssse3") && is_x86_feature_detected!("sse4.1")
}

/// `load::parse_numbers`, the short form read by `short_fraction`.
///
/// # Safety
/// The CPU has SSSE3 and SSE4.1 (`available`).
#[target_feature(enable = "ssse3,sse4.1")]
pub(super) unsafe fn parse_numbers(text: &[u8], numbers: &mut Vec<f32>) -> Option<usize> {
    parse_numbers_with(
        text,
        numbers,
        #[inline(always)]
        // SAFETY: this function's caller vouches for the instructions.
        |text, at| unsafe { short_fraction(text, at) }.or_else(|| parse_number(text, at)),
    )
}

/// Per count `k` of digits after the point (1 to 10): the byte shuffle that takes a window
/// starting at the number's first digit (the point at byte 1, the fraction at 2..2 + k) to its
/// `k + 1` digits in the last bytes, zeros before them.
const ALIGN: [[u8; 16]; 11] = {
    // 0x80: a zero byte.
    let mut table = [[0x80u8; 16]; 11];
    let mut count = 1;
    while count <= 10 {
        table[count][15 - count] = 0;
        let mut digit = 1;
        while digit <= count {
            table[count][15 - count + digit] = (1 + digit) as u8;
            digit += 1;
        }
        count += 1;
    }
    table
};

/// The short form at `start` (see the module), when the 16 bytes from its first digit lie in
/// `text`: its value and where it ends; `None` for anything else.
///
/// # Safety
/// The CPU has SSSE3 and SSE4.1. (No target feature of its own, so that it is inlined into
/// `parse_numbers`, which has them, and the intrinsics with it.)
#[inline(always)]
unsafe fn short_fraction(text: &[u8], start: usize) -> Option<(f32, usize)> {
    let negative = *text.get(start)? == b'-';
    let first = start + usize::from(negative);
    if first + 16 > text.len() || text[first + 1] != b'.' {
        return None;
    }
    // SAFETY: the 16 bytes from `first` lie inside `text` (checked above); the CPU has the
    // instructions (the caller's promise).
    unsafe {
        let values = _mm_sub_epi8(_mm_loadu_si128(text.as_ptr().add(first).cast()), _mm_set1_epi8(b'0' as i8));
        // Bit i set: byte i is a digit (its value, unsigned, at most 9).
        let digits = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(values, _mm_set1_epi8(9)), values)) as u32;
        // The digits after the point, up to the first other byte (the window has 14 bytes there).
        let count = (!(digits >> 2)).trailing_zeros() as usize;
        let end = first + 2 + count;
        if digits & 1 == 0 || count == 0 || count > 10 || matches!(text[end], b'e' | b'E') {
            return None;
        }
        let aligned = _mm_shuffle_epi8(values, _mm_loadu_si128(ALIGN[count].as_ptr().cast()));
        // Pairs of digits, then fours (each at most 9,999), then eights.
        let pairs = _mm_maddubs_epi16(aligned, _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1));
        let fours = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
        let fours = _mm_packus_epi32(fours, fours);
        let eights = _mm_madd_epi16(fours, _mm_setr_epi16(10_000, 1, 10_000, 1, 10_000, 1, 10_000, 1));
        let high = _mm_cvtsi128_si32(eights) as u64;
        let low = _mm_extract_epi32::<1>(eights) as u64;
        Some((nearest_of_short(high * 100_000_000 + low, count, negative), end))
    }
}

#[cfg(test)]
mod tests {
    use super::super::load::any_number;
    use super::*;

    #[test]
    fn the_short_form_reads_as_the_scalar_reader_reads_it_and_anything_else_is_left_to_it() {
        if !available() {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut short = 0;
        for _ in 0..200_000 {
            // A sign or not, one or two digits, a point or not, 0 to 12 digits, an exponent or
            // not, then a byte of any kind and bytes enough for the vector read or not.
            let mut text = Vec::new();
            if next() % 2 == 0 {
                text.push(b'-');
            }
            text.extend((0..1 + next() % 8 / 7).map(|_| b'0' + (next() % 10) as u8));
            if next() % 8 != 0 {
                text.push(b'.');
            }
            text.extend((0..next() % 13).map(|_| b'0' + (next() % 10) as u8));
            if next() % 8 == 0 {
                text.extend_from_slice(b"e-3");
            }
            let after = [b',', b']', b' ', b'.', b'e', b'E', b'5', b'x', 0x80, 0xff, b'/', b':'][next() as usize % 12];
            text.push(after);
            text.extend((0..next() % 20).map(|_| [b'0', b',', b' ', b'"', b'9'][next() as usize % 5]));
            // SAFETY: `available` said the CPU has the instructions.
            let ours = unsafe { short_fraction(&text, 0) };
            let theirs = any_number(&text, 0);
            if let Some(ours) = ours {
                short += 1;
                assert_eq!(Some((ours.0.to_bits(), ours.1)), theirs.map(|(v, end)| (v.to_bits(), end)), "{text:?}");
            }
            // Whole arrays: the same numbers and length as the scalar reader's.
            let mut array = b"[".to_vec();
            array.extend_from_slice(&text[..text.len() - text.len() / 3]);
            array.extend_from_slice(b",0.5,-0.0625]                ");
            let (mut vector, mut scalar) = (Vec::new(), Vec::new());
            // SAFETY: as above.
            let read = unsafe { parse_numbers(&array, &mut vector) };
            assert_eq!(read, parse_numbers_with(&array, &mut scalar, parse_number), "{array:?}");
            if read.is_some() {
                let bits = |numbers: &[f32]| numbers.iter().map(|n| n.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&vector), bits(&scalar), "{array:?}");
            }
        }
        assert!(short > 40_000, "the vector read took {short} numbers");
        // The shortest texts of `f32`s (what `ingest` writes) below 0.01 and above: nine and ten
        // digits after the point, and eight.
        for text in
            [&b"-0.004610545,0.1,0.2,0.3,0.4"[..], b"0.0046105451]               ", b"0.03792541,0.1,0.2,0.3,0.4"]
        {
            // SAFETY: as above.
            let ours = unsafe { short_fraction(text, 0) }.map(|(value, end)| (value.to_bits(), end));
            assert!(ours.is_some());
            assert_eq!(ours, any_number(text, 0).map(|(value, end)| (value.to_bits(), end)));
        }
    }
}
