//! The little binary encoding of the local copy of a replica (`memory::local_copy`): integers and
//! floats little-endian, strings and lists length-first, long arrays of numbers as raw bytes.
//! Every read checks what it reads (lengths against a bound, UTF-8), so a damaged file is an
//! error, never a panic or an unbounded allocation.

use std::io::{self, Read, Write};

/// No string, list or array in a copy is longer (elements): a length beyond it is damage.
const MAX_LEN: u64 = 1 << 34;

pub(super) struct Writer<W: Write>(pub W);

impl<W: Write> Writer<W> {
    pub(crate) fn u8(&mut self, value: u8) -> io::Result<()> {
        self.0.write_all(&[value])
    }

    pub(crate) fn u32(&mut self, value: u32) -> io::Result<()> {
        self.0.write_all(&value.to_le_bytes())
    }

    pub(crate) fn u64(&mut self, value: u64) -> io::Result<()> {
        self.0.write_all(&value.to_le_bytes())
    }

    pub(crate) fn len(&mut self, value: usize) -> io::Result<()> {
        self.u64(value as u64)
    }

    pub(crate) fn f32(&mut self, value: f32) -> io::Result<()> {
        self.0.write_all(&value.to_le_bytes())
    }

    pub(crate) fn str(&mut self, value: &str) -> io::Result<()> {
        self.len(value.len())?;
        self.0.write_all(value.as_bytes())
    }

    pub(crate) fn strs(&mut self, values: &[String]) -> io::Result<()> {
        self.len(values.len())?;
        values.iter().try_for_each(|value| self.str(value))
    }

    pub(crate) fn option_str(&mut self, value: Option<&str>) -> io::Result<()> {
        match value {
            Some(value) => {
                self.u8(1)?;
                self.str(value)
            }
            None => self.u8(0),
        }
    }

    /// Numbers of 4 bytes each, back to back, without a length (the reader knows it).
    pub(crate) fn words(&mut self, values: impl IntoIterator<Item = [u8; 4]>) -> io::Result<()> {
        let values = values.into_iter();
        let mut buffer = Vec::with_capacity(values.size_hint().0.saturating_mul(4).clamp(4, 1 << 16));
        for value in values {
            buffer.extend_from_slice(&value);
            if buffer.len() >= 1 << 16 {
                self.0.write_all(&buffer)?;
                buffer.clear();
            }
        }
        self.0.write_all(&buffer)
    }
}

pub(super) struct Reader<R: Read>(pub R);

pub(super) fn damaged(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl<R: Read> Reader<R> {
    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut bytes = [0; N];
        self.0.read_exact(&mut bytes)?;
        Ok(bytes)
    }

    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A length, at most `MAX_LEN`.
    pub(crate) fn len(&mut self) -> io::Result<usize> {
        let value = self.u64()?;
        if value > MAX_LEN {
            return Err(damaged(format!("length {value} out of bounds")));
        }
        usize::try_from(value).map_err(|_| damaged("length beyond this machine's address space"))
    }

    pub(crate) fn f32(&mut self) -> io::Result<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }

    pub(crate) fn string(&mut self) -> io::Result<String> {
        let len = self.len()?;
        let mut bytes = Vec::new();
        (&mut self.0).take(len as u64).read_to_end(&mut bytes)?;
        if bytes.len() != len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        String::from_utf8(bytes).map_err(|_| damaged("a string is not UTF-8"))
    }

    pub(crate) fn strings(&mut self) -> io::Result<Vec<String>> {
        let len = self.len()?;
        let mut values = Vec::with_capacity(len.min(1024));
        for _ in 0..len {
            values.push(self.string()?);
        }
        Ok(values)
    }

    pub(crate) fn option_string(&mut self) -> io::Result<Option<String>> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.string()?)),
            other => Err(damaged(format!("option tag {other}"))),
        }
    }

    /// `count` numbers of 4 bytes each, as written by `Writer::words`, into `out` (cleared).
    pub(crate) fn words_into<T>(
        &mut self,
        count: usize,
        out: &mut Vec<T>,
        from: impl Fn([u8; 4]) -> T,
    ) -> io::Result<()> {
        if count as u64 > MAX_LEN {
            return Err(damaged(format!("array of {count} out of bounds")));
        }
        out.clear();
        out.reserve(count);
        let mut buffer = vec![0u8; (1 << 16).min(count * 4)];
        let mut left = count;
        while left > 0 {
            let take = left.min(buffer.len() / 4);
            let bytes = &mut buffer[..take * 4];
            self.0.read_exact(bytes)?;
            out.extend(bytes.chunks_exact(4).map(|word| from([word[0], word[1], word[2], word[3]])));
            left -= take;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_written_and_damage_is_an_error() {
        let mut bytes = Vec::new();
        let mut writer = Writer(&mut bytes);
        writer.u32(7).unwrap();
        writer.str("привет").unwrap();
        writer.option_str(None).unwrap();
        writer.option_str(Some("x")).unwrap();
        writer.strs(&["a".into(), String::new()]).unwrap();
        writer.words([1.5f32, -0.0].map(f32::to_le_bytes)).unwrap();
        let mut reader = Reader(bytes.as_slice());
        assert_eq!(reader.u32().unwrap(), 7);
        assert_eq!(reader.string().unwrap(), "привет");
        assert_eq!(reader.option_string().unwrap(), None);
        assert_eq!(reader.option_string().unwrap().as_deref(), Some("x"));
        assert_eq!(reader.strings().unwrap(), vec!["a".to_string(), String::new()]);
        let mut floats = Vec::new();
        reader.words_into(2, &mut floats, f32::from_le_bytes).unwrap();
        assert_eq!(floats[0], 1.5);
        assert!(floats[1].is_sign_negative());

        // Cut short, an absurd length, bad UTF-8, a bad tag: errors.
        assert!(Reader(&bytes[..6]).string().is_err());
        assert!(Reader(&u64::MAX.to_le_bytes()[..]).string().is_err());
        let mut bad = 2u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xff, 0xfe]);
        assert!(Reader(bad.as_slice()).string().is_err());
        assert!(Reader(&[9u8][..]).option_string().is_err());
    }
}
