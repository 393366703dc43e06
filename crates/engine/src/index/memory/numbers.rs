//! JSON numbers read straight into `f32`, exactly as serde_json reads them (an `f64`, then the
//! nearest `f32` to it), and the whitespace between them: the scalar reader of an embedding's
//! array, which `load` uses for every record (through `numbers_x86` where the CPU has its
//! instructions) and which the vector reader leaves anything unusual to.

/// Where the first byte from `at` on that is not whitespace is (the end of `buffer`: none).
pub(super) fn skip_space(buffer: &[u8], mut at: usize) -> usize {
    while buffer.get(at).is_some_and(|byte| byte.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// Where reading an array of numbers goes on: a number at this byte, or the array ended (its
/// length in the text).
pub(super) enum Next {
    Number(usize),
    End(usize),
}

/// The array's `[` and what follows it; `None` when `text` does not start with `[`.
#[inline(always)]
pub(super) fn array_start(text: &[u8]) -> Option<Next> {
    if text.first() != Some(&b'[') {
        return None;
    }
    let at = skip_space(text, 1);
    Some(if text.get(at) == Some(&b']') { Next::End(at + 1) } else { Next::Number(at) })
}

/// What follows a number that ends at `end`: a comma and the next number, or `]`; `None` for
/// anything else.
#[inline(always)]
pub(super) fn after_number(text: &[u8], end: usize) -> Option<Next> {
    let at = skip_space(text, end);
    match text.get(at) {
        Some(b',') => Some(Next::Number(skip_space(text, at + 1))),
        Some(b']') => Some(Next::End(at + 1)),
        _ => None,
    }
}

/// Reads the JSON array of numbers `text` starts with into `numbers`, each number read by `read`
/// (`parse_number`, or a reader that gives the same values); its length in `text`, or `None` for
/// anything but an array of numbers.
#[inline(always)]
pub(super) fn parse_numbers_with(
    text: &[u8],
    numbers: &mut Vec<f32>,
    read: impl Fn(&[u8], usize) -> Option<(f32, usize)>,
) -> Option<usize> {
    let mut next = array_start(text)?;
    loop {
        let at = match next {
            Next::Number(at) => at,
            Next::End(length) => return Some(length),
        };
        let (number, end) = read(text, at)?;
        numbers.push(number);
        next = after_number(text, end)?;
    }
}

/// One number of JSON's grammar (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`) at `start`:
/// the nearest `f32` and where the number ends. Exact when its digits fit `f32`'s 24 bits and its
/// power of ten is at most 10 (one correctly rounded operation on two exact values), or `f64`'s
/// 53 bits and 22 (the same in `f64`, then rounded to `f32` as serde_json does); otherwise the
/// standard library's parser.
#[inline(always)]
pub(super) fn parse_number(text: &[u8], start: usize) -> Option<(f32, usize)> {
    short_fraction(text, start).or_else(|| any_number(text, start))
}

/// The powers of ten an `f32` holds exactly that the fast paths multiply or divide by.
const POWERS_F32: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// The powers of ten an `f64` holds exactly.
const POWERS_F64: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// `parse_number` for the numbers most of an embedding is written in: one digit, a point and one
/// to ten digits (`-0.01953443`, `0.0046105450`), with no exponent and at least 20 bytes of text
/// from `start`. Read in a few word-wide steps, with the fast paths' arithmetic of `any_number`,
/// which reads anything else. (The shortest text of an `f32` below 0.01 has nine or ten digits
/// after the point: most numbers of a real site's embeddings.)
#[inline(always)]
fn short_fraction(text: &[u8], start: usize) -> Option<(f32, usize)> {
    const TENS: [u64; 11] =
        [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 10_000_000_000];
    let bytes: &[u8; 20] = text.get(start..start + 20)?.try_into().ok()?;
    let negative = bytes[0] == b'-';
    let at = usize::from(negative);
    let whole = bytes[at].wrapping_sub(b'0');
    if whole > 9 || bytes[at + 1] != b'.' {
        return None;
    }
    let word = |from: usize| u64::from_le_bytes(bytes[from..from + 8].try_into().unwrap_or_default());
    let (mut digits, mut count) = leading_digits(word(at + 2));
    if count == 8 {
        let (more, more_count) = leading_digits(word(at + 10));
        digits = digits * TENS[more_count.min(2)] + more;
        count += more_count;
    }
    let end = at + 2 + count;
    // No digits after the point, more than ten, or an exponent: `any_number`'s.
    if count == 0 || count > 10 || matches!(bytes[end], b'e' | b'E') {
        return None;
    }
    Some((nearest_of_short(u64::from(whole) * TENS[count] + digits, count, negative), start + end))
}

/// The `f32` nearest to a short form's value (`short_fraction`): its digits `mantissa` (at most
/// eleven) over 10^`count` (at most 10), negated or not. To the bit what `any_number`'s two fast
/// paths give: one division in `f64`, then rounded to `f32`. (Their other path, digits of 24 bits
/// or less divided in `f32`, gives the same `f32` for every such mantissa and count: a test tries
/// all of them.) One division on no branch: which of the two paths a real site's numbers take
/// is a coin toss, and a branch on it cost more than the reading. The sign is set the same way,
/// as a bit: an embedding's signs are a coin toss too, and a branch on each (`if negative`)
/// guessed wrong half the time.
#[inline(always)]
pub(super) fn nearest_of_short(mantissa: u64, count: usize, negative: bool) -> f32 {
    let magnitude = (mantissa as f64 / POWERS_F64[count]) as f32;
    // The magnitude's sign bit is clear (it is 0 or more): setting it is negating it.
    f32::from_bits(magnitude.to_bits() | (u32::from(negative) << 31))
}

/// How many of the eight bytes of `word` (little-endian: the first is the lowest) are ASCII
/// digits before the first that is not, and the value of those digits: checked and combined in a
/// few word-wide operations (the SWAR method of fast_float).
#[inline(always)]
fn leading_digits(word: u64) -> (u64, usize) {
    let less = word.wrapping_sub(0x3030_3030_3030_3030);
    // A byte below b'0' wraps past 0x7f; one above b'9' passes 0x7f once 0x46 is added. A borrow
    // or carry only reaches the bytes after the first byte that is not a digit, which are not read.
    let others = (word.wrapping_add(0x4646_4646_4646_4646) | less) & 0x8080_8080_8080_8080;
    let count = (others.trailing_zeros() / 8) as usize;
    if count == 0 {
        return (0, 0);
    }
    // The digits moved to the last bytes, zeros (leading zeros of the same value) before them.
    let digits = if count == 8 { less } else { less << (8 * (8 - count)) };
    (eight_digit_value(digits), count)
}

/// The value of eight digits, each byte one (0–9), the first the lowest byte.
#[inline(always)]
fn eight_digit_value(less: u64) -> u64 {
    // Pairs of digits, then pairs of pairs.
    let pairs = less.wrapping_mul(10).wrapping_add(less >> 8);
    let value = (pairs & 0x0000_00ff_0000_00ff)
        .wrapping_mul(100 + (1_000_000 << 32))
        .wrapping_add(((pairs >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    value & 0xffff_ffff
}

/// `parse_number` for any number.
pub(super) fn any_number(text: &[u8], start: usize) -> Option<(f32, usize)> {
    let mut at = start;
    let negative = text.get(at) == Some(&b'-');
    at += usize::from(negative);
    // The digits read as one integer, saturating: past 2^24 the fast path is not taken anyway.
    let mut mantissa = 0u64;
    match text.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at = digit_run(text, at, &mut mantissa),
        _ => return None,
    }
    let mut power = 0i32;
    if text.get(at) == Some(&b'.') {
        let from = at + 1;
        at = digit_run(text, from, &mut mantissa);
        if at == from {
            return None;
        }
        power = -i32::try_from(at - from).unwrap_or(i32::MAX);
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        at += 1;
        let sign = match text.get(at) {
            Some(b'-') => -1,
            Some(b'+') => 1,
            _ => 0,
        };
        let from = at + usize::from(sign != 0);
        let mut exponent = 0u64;
        at = digit_run(text, from, &mut exponent);
        if at == from {
            return None;
        }
        let exponent = exponent.min(100_000) as i32;
        power = power.saturating_add(if sign < 0 { -exponent } else { exponent });
    }
    let value = if mantissa <= 1 << 24 && power.unsigned_abs() <= 10 {
        let scale = POWERS_F32[power.unsigned_abs() as usize];
        let magnitude = if power < 0 { mantissa as f32 / scale } else { mantissa as f32 * scale };
        if negative {
            -magnitude
        } else {
            magnitude
        }
    } else if mantissa <= 1 << 53 && power.unsigned_abs() <= 22 {
        // Nine digits and more (the shortest text of an `f32` often has nine): the same one
        // operation in `f64`, whose result is the nearest `f64`, then the nearest `f32` to that,
        // which is exactly how serde_json reads an `f32`.
        let scale = POWERS_F64[power.unsigned_abs() as usize];
        let magnitude = if power < 0 { mantissa as f64 / scale } else { mantissa as f64 * scale };
        (if negative { -magnitude } else { magnitude }) as f32
    } else {
        std::str::from_utf8(&text[start..at]).ok()?.parse().ok()?
    };
    Some((value, at))
}

/// The run of ASCII digits at `at` appended to `mantissa` (saturating); where the run ends. Eight
/// digits at a time while there are eight (an embedding's numbers have 7 to 10).
fn digit_run(text: &[u8], mut at: usize, mantissa: &mut u64) -> usize {
    while let Some(value) = text.get(at..at + 8).and_then(eight_digits) {
        *mantissa = mantissa.saturating_mul(100_000_000).saturating_add(value);
        at += 8;
    }
    while let Some(byte) = text.get(at).filter(|byte| byte.is_ascii_digit()) {
        *mantissa = mantissa.saturating_mul(10).saturating_add(u64::from(byte - b'0'));
        at += 1;
    }
    at
}

/// The value of eight ASCII digits, or `None` when any of the eight bytes is not one.
fn eight_digits(bytes: &[u8]) -> Option<u64> {
    match leading_digits(u64::from_le_bytes(bytes.try_into().ok()?)) {
        (value, 8) => Some(value),
        _ => None,
    }
}

/// A xorshift step, for the tests' random texts.
#[cfg(test)]
pub(super) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_digits_at_once_are_their_value_and_anything_else_is_refused() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let state = xorshift(&mut state);
            let text = format!("{:08}", state % 100_000_000);
            assert_eq!(eight_digits(text.as_bytes()), Some(state % 100_000_000), "{text}");
            // Any byte that is not a digit, at any of the eight places, refuses the whole word.
            for bad in [b'/', b':', b'.', b'-', b'e', b' ', 0x00, 0x7f, 0x80, 0xb0, 0xba, 0xff] {
                let mut bytes = text.clone().into_bytes();
                bytes[(state >> 40) as usize % 8] = bad;
                assert_eq!(eight_digits(&bytes), None, "{bytes:?}");
            }
        }
        assert_eq!(eight_digits(b"00000000"), Some(0));
        assert_eq!(eight_digits(b"99999999"), Some(99_999_999));
        assert_eq!(eight_digits(b"1234567"), None);
        // Runs longer than eight digits, and runs that saturate, read as the standard parser reads them.
        for text in ["123456789012345678901234567890", "0.000000000000000123456789", "1234567.8901234", "99999999e-8"] {
            let (value, end) = parse_number(text.as_bytes(), 0).unwrap();
            assert_eq!(end, text.len());
            assert_eq!(value.to_bits(), text.parse::<f32>().unwrap().to_bits(), "{text}");
        }
    }

    #[test]
    fn a_short_fraction_reads_as_any_number_reads_it() {
        let mut state = 0x1234_5678_9abc_def1_u64;
        let mut next = || xorshift(&mut state);
        let mut fast = 0;
        for _ in 0..50_000 {
            // A sign or not, one or two digits, a point or not, 0 to 12 digits, an exponent or
            // not, then a byte of any kind and bytes enough for the fast path or not.
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
            let after = [b',', b']', b' ', b'.', b'e', b'E', b'5', b'x', 0x80, 0xff][next() as usize % 10];
            text.push(after);
            text.extend((0..next() % 24).map(|_| [b'0', b',', b' ', b'"'][next() as usize % 4]));
            let ours = parse_number(&text, 0).map(|(value, end)| (value.to_bits(), end));
            let theirs = any_number(&text, 0).map(|(value, end)| (value.to_bits(), end));
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(&text));
            fast += usize::from(short_fraction(&text, 0).is_some());
        }
        assert!(fast > 5_000, "the fast path read {fast} numbers");
        // Nine and ten digits after the point (the shortest text of an `f32` below 0.01) take it.
        for text in [&b"-0.004610545,0.1,0.2,0.3"[..], b"0.0046105451]         ", b"7.0123456789,         "] {
            let theirs = any_number(text, 0).map(|(value, end)| (value.to_bits(), end));
            assert!(theirs.is_some());
            assert_eq!(short_fraction(text, 0).map(|(value, end)| (value.to_bits(), end)), theirs);
        }
    }

    #[test]
    fn a_short_form_divided_in_f64_rounds_to_what_f32_division_gives_for_every_24_bit_mantissa() {
        // `nearest_of_short` divides in `f64` alone; `any_number` divides digits of 24 bits or
        // less in `f32`. All 11 × 2^24 + 11 pairs.
        for (count, power) in POWERS_F32.iter().enumerate() {
            let differ = (0..=1u64 << 24)
                .filter(|&mantissa| {
                    nearest_of_short(mantissa, count, false).to_bits() != (mantissa as f32 / power).to_bits()
                })
                .count();
            assert_eq!(differ, 0, "{differ} mantissas over 10^{count}");
        }
    }
}
