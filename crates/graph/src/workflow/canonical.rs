//! The canonical JSON form behind every hash: object keys sorted by their UTF-8 bytes, no
//! insignificant whitespace, strings escaped as serde_json writes them, numbers exactly as parsed
//! (digits kept verbatim: `1.50` stays `1.50`; only an exponent gains its sign, `1e3` → `1e+3`).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` in canonical form.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_value(value, &mut out);
    String::from_utf8(out).expect("canonical JSON is UTF-8")
}

/// Appends the canonical form of `value` to `out`, allocating only to sort object keys.
pub(crate) fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // With arbitrary precision, Display prints the number as it was parsed.
        Value::Number(n) => write_display(n, out),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_sorted_object(map.iter(), out, write_value),
    }
}

/// Appends `{"key":value,…}` with the entries sorted by key bytes; `write` writes one value.
pub(crate) fn write_sorted_object<'a, K: AsRef<str> + 'a, T>(
    entries: impl IntoIterator<Item = (&'a K, T)>,
    out: &mut Vec<u8>,
    mut write: impl FnMut(T, &mut Vec<u8>),
) {
    let mut entries: Vec<(&str, T)> = entries.into_iter().map(|(k, v)| (k.as_ref(), v)).collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(key, out);
        out.push(b':');
        write(value, out);
    }
    out.push(b'}');
}

/// Appends `s` as a JSON string, escaped exactly as serde_json escapes it.
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

/// Appends the `Display` form of `v` (numbers, slots).
pub(crate) fn write_display(v: &impl std::fmt::Display, out: &mut Vec<u8>) {
    use std::io::Write;
    write!(out, "{v}").expect("writing to a Vec cannot fail");
}

/// sha256 of `bytes` as lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_keys_and_keeps_numbers_verbatim() {
        let v: Value = serde_json::from_str(
            r#"{ "b": 1.50, "a": [18446744073709551615, 1e3, -0.0], "c": {"z": "é\n", "y": null} }"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":[18446744073709551615,1e+3,-0.0],"b":1.50,"c":{"y":null,"z":"é\n"}}"#
        );
    }

    #[test]
    fn sha256_of_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
