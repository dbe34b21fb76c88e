//! Extra request headers for reverse-proxy authentication (`--header 'Name: value'`,
//! `COMFY_BISECT_HEADERS`). Values are secrets: `Debug` redacts them and nothing here is ever
//! serialized.

use std::fmt;

/// Name of the environment variable holding extra headers (newline- or `;`-separated).
pub const HEADERS_ENV: &str = "COMFY_BISECT_HEADERS";

/// A list of extra headers sent with every HTTP request and the WebSocket handshake.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExtraHeaders {
    pairs: Vec<(String, String)>,
}

impl fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.pairs.iter().map(|(n, _)| format!("{n}: <redacted>")))
            .finish()
    }
}

/// A header given on the command line or in the environment that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeaderError {
    /// No colon between name and value.
    #[error("header {0:?} has no ':'; write it as 'Name: value'")]
    MissingColon(String),
    /// Empty or invalid name.
    #[error("header name {0:?} is not a valid HTTP header name")]
    BadName(String),
    /// Value with control characters.
    #[error("the value of header {0:?} contains characters not allowed in HTTP headers")]
    BadValue(String),
    /// Origin would trip ComfyUI's origin guard (403).
    #[error("an Origin header makes ComfyUI answer 403 on loopback; remove it")]
    Origin,
}

impl ExtraHeaders {
    /// No headers.
    pub fn new() -> ExtraHeaders {
        ExtraHeaders::default()
    }

    /// Parses `Name: value` strings (from `--header`), then the environment text (if any).
    pub fn from_sources(args: &[String], env: Option<&str>) -> Result<ExtraHeaders, HeaderError> {
        let mut headers = ExtraHeaders::new();
        if let Some(env) = env {
            for item in split_env(env) {
                headers.push_line(&item)?;
            }
        }
        for a in args {
            headers.push_line(a)?;
        }
        Ok(headers)
    }

    /// Reads `--header` values and `COMFY_BISECT_HEADERS` from the process environment.
    pub fn from_args_and_env(args: &[String]) -> Result<ExtraHeaders, HeaderError> {
        let env = std::env::var(HEADERS_ENV).ok();
        ExtraHeaders::from_sources(args, env.as_deref())
    }

    /// Adds one `Name: value` line.
    pub fn push_line(&mut self, line: &str) -> Result<(), HeaderError> {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| HeaderError::MissingColon(redact_line(line)))?;
        self.push(name.trim(), value.trim())
    }

    /// Adds one header (a later header with the same name replaces the earlier one).
    pub fn push(&mut self, name: &str, value: &str) -> Result<(), HeaderError> {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() || name.is_empty() {
            return Err(HeaderError::BadName(name.to_string()));
        }
        if name.eq_ignore_ascii_case("origin") {
            return Err(HeaderError::Origin);
        }
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(HeaderError::BadValue(name.to_string()));
        }
        self.pairs.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.pairs.push((name.to_string(), value.to_string()));
        Ok(())
    }

    /// The headers as a reqwest header map.
    pub fn to_header_map(&self) -> reqwest::header::HeaderMap {
        let mut map = reqwest::header::HeaderMap::new();
        for (n, v) in &self.pairs {
            if let (Ok(n), Ok(mut v)) = (
                reqwest::header::HeaderName::from_bytes(n.as_bytes()),
                reqwest::header::HeaderValue::from_str(v),
            ) {
                v.set_sensitive(true);
                map.insert(n, v);
            }
        }
        map
    }

    /// The header names (for messages; never the values).
    #[cfg(test)]
    pub(crate) fn names(&self) -> Vec<&str> {
        self.pairs.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// (name, value) pairs, for the WebSocket handshake.
    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }
}

/// Splits the environment value on newlines, and on `;` where the next part starts a new
/// `Name:` header (so `Cookie: a=1; b=2` stays one header).
fn split_env(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let mut current = String::new();
        for part in line.split(';') {
            if current.is_empty() {
                current = part.to_string();
            } else if starts_header(part) {
                out.push(std::mem::take(&mut current));
                current = part.to_string();
            } else {
                current.push(';');
                current.push_str(part);
            }
        }
        out.push(current);
    }
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn starts_header(part: &str) -> bool {
    let part = part.trim_start();
    match part.split_once(':') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        }
        None => false,
    }
}

fn redact_line(line: &str) -> String {
    let chars: String = line.chars().take(12).collect();
    if line.chars().count() > 12 {
        format!("{chars}…")
    } else {
        chars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_splits_on_newlines_and_semicolons_but_keeps_cookies() {
        let h = ExtraHeaders::from_sources(
            &["X-Extra: 1".to_string()],
            Some("Authorization: Bearer abc; Cookie: a=1; b=2\nX-Token: t"),
        )
        .unwrap();
        assert_eq!(
            h.names(),
            vec!["Authorization", "Cookie", "X-Token", "X-Extra"]
        );
        assert_eq!(h.pairs()[1].1, "a=1; b=2");
        assert_eq!(h.pairs()[0].1, "Bearer abc");
    }

    #[test]
    fn debug_output_never_shows_values() {
        let h = ExtraHeaders::from_sources(&["Authorization: Bearer s3cret".into()], None).unwrap();
        let shown = format!("{h:?}");
        assert!(shown.contains("Authorization"));
        assert!(!shown.contains("s3cret"));
    }

    #[test]
    fn bad_headers_are_explained() {
        assert!(matches!(
            ExtraHeaders::from_sources(&["no colon".into()], None),
            Err(HeaderError::MissingColon(_))
        ));
        assert_eq!(
            ExtraHeaders::from_sources(&["Origin: http://x".into()], None),
            Err(HeaderError::Origin)
        );
        assert!(matches!(
            ExtraHeaders::from_sources(&["Bad Name: v".into()], None),
            Err(HeaderError::BadName(_))
        ));
    }

    #[test]
    fn later_header_replaces_earlier() {
        let h = ExtraHeaders::from_sources(&["A: 2".into()], Some("a: 1")).unwrap();
        assert_eq!(h.pairs(), &[("A".to_string(), "2".to_string())]);
    }
}
