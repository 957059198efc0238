//! Text decoding and line handling: UTF-8 (with or without a byte-order mark) and UTF-16
//! with a byte-order mark; LF and CRLF line endings.

/// How a text file's bytes encode its characters; kept so edits write it back the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8, with or without a leading byte-order mark.
    Utf8 {
        /// Whether the file starts with `EF BB BF`.
        bom: bool,
    },
    /// UTF-16 little-endian with the `FF FE` mark.
    Utf16Le,
    /// UTF-16 big-endian with the `FE FF` mark.
    Utf16Be,
}

/// A file's text and how it was encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedText {
    /// The characters, without the byte-order mark.
    pub text: String,
    /// The encoding to write it back with.
    pub encoding: Encoding,
}

/// Why bytes are not text the tools handle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotText {
    /// A NUL byte outside UTF-16: almost surely a binary file.
    #[error("the file appears to be binary (it contains NUL bytes)")]
    NulByte,
    /// Not valid UTF-8 (or UTF-16 after its mark).
    #[error("the file is not valid UTF-8 or BOM-marked UTF-16 text (it may be binary)")]
    InvalidEncoding,
}

/// Decodes a file's bytes, refusing binary content.
pub fn decode(bytes: &[u8]) -> Result<DecodedText, NotText> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return utf8(rest, true);
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        return utf16(rest, u16::from_le_bytes).map(|text| DecodedText {
            text,
            encoding: Encoding::Utf16Le,
        });
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        return utf16(rest, u16::from_be_bytes).map(|text| DecodedText {
            text,
            encoding: Encoding::Utf16Be,
        });
    }
    utf8(bytes, false)
}

fn utf8(bytes: &[u8], bom: bool) -> Result<DecodedText, NotText> {
    if bytes.contains(&0) {
        return Err(NotText::NulByte);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| NotText::InvalidEncoding)?;
    Ok(DecodedText {
        text: text.to_string(),
        encoding: Encoding::Utf8 { bom },
    })
}

fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Result<String, NotText> {
    if !bytes.len().is_multiple_of(2) {
        return Err(NotText::InvalidEncoding);
    }
    let units = bytes.chunks_exact(2).map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| NotText::InvalidEncoding)
}

/// Encodes text back in `encoding` (with its byte-order mark).
pub fn encode(text: &str, encoding: Encoding) -> Vec<u8> {
    match encoding {
        Encoding::Utf8 { bom: false } => text.as_bytes().to_vec(),
        Encoding::Utf8 { bom: true } => {
            let mut out = vec![0xEF, 0xBB, 0xBF];
            out.extend_from_slice(text.as_bytes());
            out
        }
        Encoding::Utf16Le => {
            let mut out = vec![0xFF, 0xFE];
            text.encode_utf16()
                .for_each(|u| out.extend(u.to_le_bytes()));
            out
        }
        Encoding::Utf16Be => {
            let mut out = vec![0xFE, 0xFF];
            text.encode_utf16()
                .for_each(|u| out.extend(u.to_be_bytes()));
            out
        }
    }
}

/// The lines of `text`: split on `\n`, a trailing `\r` removed (so CRLF files show as
/// lines), and no empty last line after a final newline.
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let empty = text.is_empty();
    body.split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .take(if empty { 0 } else { usize::MAX })
}

/// Whether most line breaks in `text` are CRLF.
pub fn uses_crlf(text: &str) -> bool {
    let crlf = text.matches("\r\n").count();
    let lf = text.matches('\n').count();
    crlf > 0 && crlf * 2 >= lf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_hide_crlf_and_the_final_newline() {
        assert_eq!(lines("a\r\nb\r\n").collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(lines("a\nb").collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(lines("").count(), 0);
        assert_eq!(lines("\n").collect::<Vec<_>>(), vec![""]);
    }

    #[test]
    fn utf16_round_trips_with_its_mark() {
        for encoding in [
            Encoding::Utf16Le,
            Encoding::Utf16Be,
            Encoding::Utf8 { bom: true },
        ] {
            let bytes = encode("héllo\n", encoding);
            assert_eq!(
                decode(&bytes).unwrap(),
                DecodedText {
                    text: "héllo\n".into(),
                    encoding
                }
            );
        }
        assert_eq!(decode(b"a\0b"), Err(NotText::NulByte));
    }
}
