//! Just enough JSON for this step: read a top-level string or integer of the inputs object, and
//! write a string literal. A real plugin would use serde_json; this example has no dependencies
//! so that it builds offline. The host guarantees the inputs are a valid JSON object.

/// A top-level value of the inputs, as far as this step cares.
#[derive(Debug, PartialEq)]
pub enum Value {
    Text(String),
    Integer(i64),
    /// Present, but neither a string nor an integer that fits i64.
    Other,
}

/// The value of top-level key `key` of the JSON object `json`, or None when absent.
pub fn top_level(json: &str, key: &str) -> Option<Value> {
    let mut reader = Reader {
        bytes: json.as_bytes(),
        at: 0,
    };
    reader.expect(b'{')?;
    loop {
        reader.skip_space();
        if reader.peek()? == b'}' {
            return None;
        }
        let name = reader.string()?;
        reader.expect(b':')?;
        reader.skip_space();
        if name == key {
            return Some(reader.value());
        }
        reader.skip_value()?;
        reader.skip_space();
        if reader.peek()? == b',' {
            reader.at += 1;
        }
    }
}

/// `text` as a JSON string literal.
pub fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// The value at the cursor, read as this step needs it.
    fn value(&mut self) -> Value {
        match self.peek() {
            Some(b'"') => self.string().map_or(Value::Other, Value::Text),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                while matches!(self.peek(), Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) {
                    self.at += 1;
                }
                let digits = std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or("");
                digits.parse().map_or(Value::Other, Value::Integer)
            }
            _ => Value::Other,
        }
    }

    /// A string literal at the cursor, unescaped (surrogate pairs included).
    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.at;
            while !matches!(self.peek()?, b'"' | b'\\') {
                self.at += 1;
            }
            out.push_str(std::str::from_utf8(&self.bytes[start..self.at]).ok()?);
            let byte = self.peek()?;
            self.at += 1;
            if byte == b'"' {
                return Some(out);
            }
            let escape = self.peek()?;
            self.at += 1;
            match escape {
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'u' => {
                    let high = self.hex4()?;
                    let code = if (0xD800..0xDC00).contains(&high) {
                        self.at += 2; // the "\u" of the low surrogate
                        let low = self.hex4()?;
                        0x10000 + ((high - 0xD800) << 10) + (low.checked_sub(0xDC00)?)
                    } else {
                        high
                    };
                    out.push(char::from_u32(code)?);
                }
                other => out.push(other as char), // \" \\ \/
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.bytes.get(self.at..self.at + 4)?).ok()?;
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// Moves past the value at the cursor (any JSON value, nested or not).
    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.skip_space();
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.at += 1;
                }
                b',' | b':' if depth > 0 => self.at += 1,
                _ => {
                    // a number, true, false or null
                    while !matches!(self.peek()?, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        self.at += 1;
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_top_level_values_only() {
        let json =
            r#"{"nested":{"name":"no"},"list":[1,"x",{"a":[]}],"name":"Ada \"A\" \u00e9\ud83d\ude00","work_ms":250}"#;
        assert_eq!(top_level(json, "name"), Some(Value::Text("Ada \"A\" é😀".into())));
        assert_eq!(top_level(json, "work_ms"), Some(Value::Integer(250)));
        assert_eq!(top_level(json, "greeting"), None);
        assert_eq!(top_level(r#"{"n": true}"#, "n"), Some(Value::Other));
    }

    #[test]
    fn writes_string_literals() {
        assert_eq!(string_literal("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
    }
}
