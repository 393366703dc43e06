//! An embedding's numbers read with SSSE3 and SSE4.1 (x86-64 CPUs since 2008, checked at run
//! time): the short form most of them have (`-0.01953443`: one digit, a point, one to ten digits)
//! in a dozen vector instructions instead of a few dozen scalar ones. Every value is the one the
//! scalar reader gives (`numbers::nearest_of_short`, the same arithmetic); anything else is read by
//! it.

use super::numbers::{after_number, array_start, nearest_of_short, parse_number, skip_space, Next};
use std::arch::x86_64::*;

/// Whether this CPU has the instructions (the standard library checks once and remembers).
pub(super) fn available() -> bool {
    is_x86_feature_detected!("ssse3") && is_x86_feature_detected!("sse4.1")
}

/// The numbers and length `numbers::parse_numbers_with` gives with `numbers::parse_number`, the
/// short form read by `short_form`. A short form followed by a comma is followed straight by the
/// next number: the next read waits only for this one's vector steps, not for loads of the bytes
/// after it.
///
/// # Safety
/// The CPU has SSSE3 and SSE4.1 (`available`).
#[target_feature(enable = "ssse3,sse4.1")]
pub(super) unsafe fn parse_numbers(text: &[u8], numbers: &mut Vec<f32>) -> Option<usize> {
    let mut next = array_start(text)?;
    loop {
        let at = match next {
            Next::Number(at) => at,
            Next::End(length) => return Some(length),
        };
        // SAFETY: this function's caller vouches for the instructions.
        if let Some((number, end, comma)) = unsafe { short_form(text, at) } {
            numbers.push(number);
            next = if comma { Next::Number(end + 1) } else { Next::End(end + 1) };
            continue;
        }
        // Anything else (spaces, an exponent, more digits, the end of the text near) as
        // `numbers::parse_numbers_with` reads it.
        let (number, end) = parse_number(text, skip_space(text, at))?;
        numbers.push(number);
        next = after_number(text, end)?;
    }
}

/// Per sign (0: none, 1: `-`) and count `k` of digits after the point (1 to 10): the byte
/// shuffle that takes a window starting at the number (its first digit at byte `sign`, the point
/// after it, then the fraction) to its `k + 1` digits in the last bytes, zeros before them.
const ALIGN: [[[u8; 16]; 11]; 2] = {
    // 0x80: a zero byte.
    let mut table = [[[0x80u8; 16]; 11]; 2];
    let mut sign = 0;
    while sign < 2 {
        let mut count = 1;
        while count <= 10 {
            table[sign][count][15 - count] = sign as u8;
            let mut digit = 1;
            while digit <= count {
                table[sign][count][15 - count + digit] = (sign + 1 + digit) as u8;
                digit += 1;
            }
            count += 1;
        }
        sign += 1;
    }
    table
};

/// The short form at `at` (see the module) followed by a comma or `]`, when the 16 bytes from
/// `at` lie in `text`: its value, where it ends, and whether a comma follows; `None` for anything
/// else. Every test is on bits of the one 16-byte window.
///
/// # Safety
/// The CPU has SSSE3 and SSE4.1. (No target feature of its own, so that it is inlined into
/// `parse_numbers`, which has them, and the intrinsics with it.)
#[inline(always)]
unsafe fn short_form(text: &[u8], at: usize) -> Option<(f32, usize, bool)> {
    if at + 16 > text.len() {
        return None;
    }
    let sign = usize::from(text[at] == b'-');
    // SAFETY: the 16 bytes from `at` lie inside `text` (checked above); the CPU has the
    // instructions (the caller's promise).
    unsafe {
        let window = _mm_loadu_si128(text.as_ptr().add(at).cast());
        let values = _mm_sub_epi8(window, _mm_set1_epi8(b'0' as i8));
        // Bit i set: byte i is a digit (its value, unsigned, at most 9); a comma or `]`.
        let digits = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(values, _mm_set1_epi8(9)), values)) as u32;
        let ends = _mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(window, _mm_set1_epi8(b',' as i8)),
            _mm_cmpeq_epi8(window, _mm_set1_epi8(b']' as i8)),
        )) as u32;
        // The digits after the point, up to the first other byte (the window has 13 bytes there).
        let count = (!(digits >> (sign + 2))).trailing_zeros() as usize;
        let after = sign + 2 + count;
        let shape = (digits >> sign) & (ends >> after) & 1;
        if shape == 0 || text[at + sign + 1] != b'.' || count == 0 || count > 10 {
            return None;
        }
        let aligned = _mm_shuffle_epi8(values, _mm_loadu_si128(ALIGN[sign][count].as_ptr().cast()));
        // Pairs of digits, then fours (each at most 9,999), then eights: the first two lanes.
        let pairs = _mm_maddubs_epi16(aligned, _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1));
        let fours = _mm_madd_epi16(pairs, _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1));
        let fours = _mm_packus_epi32(fours, fours);
        let eights =
            _mm_cvtsi128_si64(_mm_madd_epi16(fours, _mm_setr_epi16(10_000, 1, 10_000, 1, 10_000, 1, 10_000, 1))) as u64;
        let mantissa = (eights & 0xffff_ffff) * 100_000_000 + (eights >> 32);
        Some((nearest_of_short(mantissa, count, sign == 1), at + after, text[at + after] == b','))
    }
}

#[cfg(test)]
mod tests {
    use super::super::numbers::{any_number, parse_numbers_with, xorshift};
    use super::*;

    /// A number's text of any shape near the short form: a sign or not, one or two digits, a
    /// point or not, 0 to 12 digits, an exponent or not.
    fn number_text(next: &mut impl FnMut() -> u64) -> Vec<u8> {
        let mut text = Vec::new();
        if next().is_multiple_of(2) {
            text.push(b'-');
        }
        text.extend((0..1 + next() % 8 / 7).map(|_| b'0' + (next() % 10) as u8));
        if !next().is_multiple_of(8) {
            text.push(b'.');
        }
        text.extend((0..next() % 13).map(|_| b'0' + (next() % 10) as u8));
        if next().is_multiple_of(8) {
            text.extend_from_slice(b"e-3");
        }
        text
    }

    #[test]
    fn the_short_form_reads_as_the_scalar_reader_reads_it_and_anything_else_is_left_to_it() {
        if !available() {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || xorshift(&mut state);
        let mut short = 0;
        for _ in 0..200_000 {
            // A number, then a byte of any kind and bytes enough for the vector read or not.
            let mut text = number_text(&mut next);
            let after = [b',', b']', b' ', b'.', b'e', b'E', b'5', b'x', 0x80, 0xff, b'/', b':'][next() as usize % 12];
            text.push(after);
            text.extend((0..next() % 20).map(|_| [b'0', b',', b' ', b'"', b'9'][next() as usize % 5]));
            // SAFETY: `available` said the CPU has the instructions.
            if let Some((value, end, comma)) = unsafe { short_form(&text, 0) } {
                short += 1;
                let theirs = any_number(&text, 0).map(|(value, end)| (value.to_bits(), end));
                assert_eq!(Some((value.to_bits(), end)), theirs, "{text:?}");
                assert!(matches!(text[end], b',' | b']') && comma == (text[end] == b','), "{text:?}");
            }
        }
        assert!(short > 10_000, "the vector read took {short} numbers");
        // The shortest texts of `f32`s (what `ingest` writes) below 0.01 and above: nine and ten
        // digits after the point, and eight.
        for text in
            [&b"-0.004610545,0.1,0.2,0.3,0.4"[..], b"0.0046105451]               ", b"0.03792541,0.1,0.2,0.3,0.4"]
        {
            // SAFETY: as above.
            let ours = unsafe { short_form(text, 0) }.map(|(value, end, _)| (value.to_bits(), end));
            assert!(ours.is_some());
            assert_eq!(ours, any_number(text, 0).map(|(value, end)| (value.to_bits(), end)));
        }
    }

    #[test]
    fn arrays_read_as_the_scalar_reader_reads_them() {
        if !available() {
            return;
        }
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || xorshift(&mut state);
        let bits = |numbers: &[f32]| numbers.iter().map(|n| n.to_bits()).collect::<Vec<_>>();
        for _ in 0..20_000 {
            // 0 to 40 numbers between any of the separators JSON allows (and a few it does not),
            // cut anywhere near the end or not, then bytes after the array or none.
            let mut array = b"[".to_vec();
            for n in 0..next() % 41 {
                if n > 0 {
                    array.extend_from_slice(
                        [&b","[..], b", ", b" ,", b",\n  ", b"", b",,"]
                            [next() as usize % 6 * usize::from(next().is_multiple_of(4))],
                    );
                }
                array.extend(number_text(&mut next));
            }
            array.extend_from_slice([&b"]"[..], b" ]", b""][next() as usize % 3]);
            if next().is_multiple_of(4) {
                array.truncate(array.len().saturating_sub((next() % 30) as usize));
            }
            array.extend((0..next() % 24).map(|_| [b'}', b',', b' ', b'"', b'0'][next() as usize % 5]));
            let (mut vector, mut scalar) = (Vec::new(), Vec::new());
            // SAFETY: as above.
            let read = unsafe { parse_numbers(&array, &mut vector) };
            assert_eq!(
                read,
                parse_numbers_with(&array, &mut scalar, parse_number),
                "{:?}",
                String::from_utf8_lossy(&array)
            );
            if read.is_some() {
                assert_eq!(bits(&vector), bits(&scalar), "{:?}", String::from_utf8_lossy(&array));
            }
        }
    }
}
