//! The canonical JSON form behind every hash: object keys sorted by their UTF-8 bytes, no
//! insignificant whitespace, strings escaped as serde_json writes them, numbers exactly as parsed
//! (digits kept verbatim: `1.50` stays `1.50`; only an exponent gains its sign, `1e3` → `1e+3`).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` in canonical form.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // With arbitrary precision, Display prints the number as it was parsed.
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => out.push_str(&serde_json::to_string(s).expect("strings serialize")),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).expect("strings serialize"));
                out.push(':');
                write_value(&map[key], out);
            }
            out.push('}');
        }
    }
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
