//! Redaction of what a report must not leak when pasted into a public issue: home directories
//! and user names in paths, host names and IP addresses in URLs and launch arguments, and
//! secret-looking inputs (`api_key`, `token`, `auth_token_comfy_org`, `password`, …).
//!
//! Works on JSON values, so the same rules apply to the report, to workflow files and to run
//! records. Model file names stay: they identify the components. Loopback addresses
//! (`127.0.0.1`, `localhost`, `::1`, `0.0.0.0`) identify nobody and stay too.

use regex::Regex;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Replaces a user name.
pub const USER: &str = "<user>";
/// Replaces a host name.
pub(crate) const HOST: &str = "<host>";
/// Replaces an IP address.
pub const IP: &str = "<ip>";
/// Replaces a secret.
pub(crate) const SECRET: &str = "<secret>";

/// Path components after a home-folder prefix that are not user names.
const NOT_USERS: &[&str] = &["Shared", "Public", "Default", "All Users", USER];

struct Patterns {
    home_spaced: Regex,
    home: Regex,
    url: Regex,
    ipv4: Regex,
    ipv6: Regex,
    secret_value: Regex,
    header: Regex,
    path_token: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // Windows user names may contain spaces: C:\Users\Carol Smith\… (followed by a separator)
        home_spaced: Regex::new(
            r#"(?i)([A-Z]:[\\/]+(?:Users|Documents and Settings)[\\/]+)([^\\/"'<>:*?|,;\r\n]+)([\\/])"#,
        )
        .expect("windows home pattern"),
        // /home/x, /var/home/x, /Users/x, C:\Users\x, C:/Users/x, C:\\Users\\x, \Users\x
        home: Regex::new(
            r#"(?i)(/home/|/Users/|[A-Z]:[\\/]+Users[\\/]+|[A-Z]:[\\/]+Documents and Settings[\\/]+|\\Users\\)([^\\/\s"'<>:*?|,;]+)"#,
        )
        .expect("home pattern"),
        // scheme://[userinfo@]host[:port]
        url: Regex::new(
            r"(?i)\b([a-z][a-z0-9+.-]*://)(?:([^/\s@:]*)(?::([^/\s@]*))?@)?(\[[0-9a-f:.]+\]|[^/\s:?#<>\x22']+)",
        )
        .expect("url pattern"),
        ipv4: Regex::new(r"(?:^|[^0-9.])((?:[0-9]{1,3}\.){3}[0-9]{1,3})(?:$|[^0-9.]|\.[^0-9])")
            .expect("ipv4 pattern"),
        // Full-form IPv6 (at least six groups); compressed forms are only caught in URLs and
        // launch arguments, where the context says they are addresses.
        ipv6: Regex::new(r"(?i)\b(?:[0-9a-f]{1,4}:){5,7}[0-9a-f]{1,4}\b").expect("ipv6 pattern"),
        // Well-known token formats, wherever they appear.
        secret_value: Regex::new(
            r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|comfyui-[A-Za-z0-9]{32,}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})|(?i:\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}",
        )
        .expect("secret pattern"),
        // A credential header written as `Name: value` (or `Name=value`) in free text: a
        // `--header` value, a proxy's or a custom node's log line.
        header: Regex::new(
            r#"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token|x-access-token)(\s*[:=]\s*)(?:(?:basic|bearer|digest|token)\s+)?[^\s"',;]+"#,
        )
        .expect("header pattern"),
        path_token: Regex::new(r#"[/\\]([^/\\\s"'<>]+)"#).expect("path token pattern"),
    })
}

/// Whether an object key names a secret: `api_key`, `apiKey`, `token`, `auth_token_comfy_org`,
/// `password`, `client_secret`, `cookie`, … but not `max_tokens`, `token_normalization` or
/// `tokenizer`.
pub(crate) fn is_secret_key(key: &str) -> bool {
    let words = key_words(key);
    let has = |w: &str| words.iter().any(|x| x == w);
    const QUALIFIERS: &[&str] = &[
        "normalization",
        "max",
        "min",
        "count",
        "limit",
        "length",
        "num",
        "number",
        "merge",
        "merging",
        "weight",
        "weights",
        "interpretation",
        "strength",
        "size",
        "type",
        "ratio",
        "per",
    ];
    if QUALIFIERS.iter().any(|q| has(q)) {
        return false;
    }
    const SECRET_WORDS: &[&str] = &[
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "apikey",
        "token",
        "credential",
        "credentials",
        "cookie",
        "bearer",
        "authorization",
        "auth",
        "privatekey",
    ];
    if SECRET_WORDS.iter().any(|w| has(w)) {
        return true;
    }
    words.windows(2).any(|pair| {
        matches!(
            (pair[0].as_str(), pair[1].as_str()),
            ("api", "key") | ("access", "key") | ("private", "key") | ("secret", "key")
        )
    })
}

/// Splits a key into lower-case words at `_`, `-`, `.`, spaces and camelCase boundaries.
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Public documentation and model hosts that identify nobody (links in error messages).
const PUBLIC_HOSTS: &[&str] = &[
    "pytorch.org",
    "github.com",
    "githubusercontent.com",
    "huggingface.co",
    "hf.co",
    "civitai.com",
    "comfy.org",
    "python.org",
    "nvidia.com",
];

fn is_public_host(host: &str) -> bool {
    let h = host.to_ascii_lowercase();
    PUBLIC_HOSTS
        .iter()
        .any(|p| h == *p || h.ends_with(&format!(".{p}")))
}

fn is_loopback_host(host: &str) -> bool {
    let h = host
        .trim_matches(|c| c == '[' || c == ']')
        .to_ascii_lowercase();
    h == "localhost"
        || h == "::1"
        || h == "::"
        || h == "0.0.0.0"
        || h.starts_with("127.")
        || h.ends_with(".localhost")
}

fn is_ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|n| n <= 255))
}

fn host_placeholder(host: &str) -> &'static str {
    let bare = host.trim_matches(|c| c == '[' || c == ']');
    if is_ipv4(bare) || bare.contains(':') {
        IP
    } else {
        HOST
    }
}

/// The redaction rules, with the user names learned from home paths.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    users: BTreeSet<String>,
}

impl Redactor {
    /// A redactor that knows no user names yet.
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Learns the user names of every home path in `value` (so `/mnt/data/alice/…` is caught
    /// once `/home/alice` was seen anywhere).
    pub fn learn(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.learn_text(s),
            Value::Array(a) => a.iter().for_each(|v| self.learn(v)),
            Value::Object(m) => m.values().for_each(|v| self.learn(v)),
            _ => {}
        }
    }

    /// Learns the user names of every home path in `text`.
    pub(crate) fn learn_text(&mut self, text: &str) {
        let p = patterns();
        for cap in p
            .home_spaced
            .captures_iter(text)
            .chain(p.home.captures_iter(text))
        {
            let name = cap[2].to_string();
            if !NOT_USERS.iter().any(|n| n.eq_ignore_ascii_case(&name)) && name.len() >= 2 {
                self.users.insert(name);
            }
        }
    }

    /// Redacts a whole JSON value in place: secret-looking keys lose their string values, every
    /// string is redacted as text, and `argv` arrays are redacted as launch arguments.
    pub(crate) fn redact_value(&self, value: &mut Value) {
        self.walk(value, None);
    }

    fn walk(&self, value: &mut Value, key: Option<&str>) {
        match value {
            Value::String(s) => *s = self.redact_text(s),
            Value::Array(items) => {
                if key == Some("argv") {
                    redact_argv_values(items);
                }
                for item in items {
                    self.walk(item, key);
                }
            }
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if is_secret_key(k) {
                        blank_strings(v);
                    } else {
                        self.walk(v, Some(k));
                    }
                }
            }
            _ => {}
        }
    }

    /// Redacts free text: home folders, learned user names in paths, URL hosts and
    /// credentials, IP addresses and well-known token formats.
    pub(crate) fn redact_text(&self, text: &str) -> String {
        let p = patterns();
        let mut out = p.secret_value.replace_all(text, SECRET).into_owned();
        out = p
            .header
            .replace_all(&out, |c: &regex::Captures| {
                format!("{}{}{SECRET}", &c[1], &c[2])
            })
            .into_owned();
        out = p
            .url
            .replace_all(&out, |c: &regex::Captures| {
                let mut s = c[1].to_string();
                if let Some(user) = c.get(2) {
                    if c.get(3).is_some() {
                        s.push_str(&format!("{USER}:{SECRET}@"));
                    } else if user.as_str().is_empty() {
                        s.push('@');
                    } else {
                        s.push_str(&format!("{USER}@"));
                    }
                }
                let host = &c[4];
                if is_loopback_host(host) || is_public_host(host) || host == HOST || host == IP {
                    s.push_str(host);
                } else {
                    s.push_str(host_placeholder(host));
                }
                s
            })
            .into_owned();
        out = replace_ipv4(&out);
        out = p.ipv6.replace_all(&out, IP).into_owned();
        out = p
            .home_spaced
            .replace_all(&out, |c: &regex::Captures| {
                if NOT_USERS.iter().any(|n| n.eq_ignore_ascii_case(&c[2])) {
                    c[0].to_string()
                } else {
                    format!("{}{USER}{}", &c[1], &c[3])
                }
            })
            .into_owned();
        out = p
            .home
            .replace_all(&out, |c: &regex::Captures| {
                let name = &c[2];
                if NOT_USERS.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                    c[0].to_string()
                } else {
                    format!("{}{USER}", &c[1])
                }
            })
            .into_owned();
        if !self.users.is_empty() {
            out = p
                .path_token
                .replace_all(&out, |c: &regex::Captures| {
                    let whole = &c[0];
                    if self.users.contains(&c[1]) {
                        format!("{}{USER}", &whole[..1])
                    } else {
                        whole.to_string()
                    }
                })
                .into_owned();
        }
        out
    }
}

/// Redacts `value` in place with the user names found in `value` itself.
pub fn redact(value: &mut Value) {
    let mut r = Redactor::new();
    r.learn(value);
    r.redact_value(value);
}

/// Redacts one string with no learned user names.
#[cfg(test)]
pub(crate) fn redact_text(text: &str) -> String {
    let mut r = Redactor::new();
    r.learn_text(text);
    r.redact_text(text)
}

fn replace_ipv4(text: &str) -> String {
    let re = &patterns().ipv4;
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut search_from = 0;
    while let Some(c) = re.captures_at(text, search_from) {
        let m = c.get(1).expect("group 1");
        search_from = m.end();
        if !is_ipv4(m.as_str()) || is_loopback_host(m.as_str()) {
            continue;
        }
        out.push_str(&text[last..m.start()]);
        out.push_str(IP);
        last = m.end();
    }
    out.push_str(&text[last..]);
    out
}

fn blank_strings(value: &mut Value) {
    match value {
        Value::String(s) if !s.is_empty() => *s = SECRET.to_string(),
        Value::Array(a) => a.iter_mut().for_each(blank_strings),
        Value::Object(m) => m.values_mut().for_each(blank_strings),
        _ => {}
    }
}

/// Launch flags whose value is a listening address.
const ADDRESS_FLAGS: &[&str] = &["--listen", "--host", "--address", "--server"];

/// Redacts launch arguments: the address after `--listen` (a comma-separated list) and the
/// value of any flag whose name looks like a secret (`--api-key X`, `--token=X`).
pub(crate) fn redact_argv(argv: &mut [String]) {
    let mut i = 0;
    while i < argv.len() {
        let token = argv[i].clone();
        i += 1;
        let Some(flag) = token.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        let is_address = ADDRESS_FLAGS.contains(&format!("--{name}").as_str());
        let is_secret = is_secret_key(name);
        if !is_address && !is_secret {
            continue;
        }
        let redact_value = |v: &str| {
            if is_secret {
                SECRET.to_string()
            } else {
                v.split(',')
                    .map(|h| {
                        if h.is_empty() || is_loopback_host(h) {
                            h.to_string()
                        } else {
                            host_placeholder(h).to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        if let Some(v) = inline {
            argv[i - 1] = format!("--{name}={}", redact_value(&v));
        } else if let Some(next) = argv.get(i).filter(|n| !n.starts_with("--")).cloned() {
            argv[i] = redact_value(&next);
            i += 1;
        }
    }
}

fn redact_argv_values(items: &mut [Value]) {
    if !items.iter().all(Value::is_string) {
        return;
    }
    let mut argv: Vec<String> = items
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect();
    redact_argv(&mut argv);
    for (item, s) in items.iter_mut().zip(argv) {
        *item = Value::String(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn posix_and_windows_home_folders() {
        assert_eq!(
            redact_text("File \"/home/alice/ComfyUI/comfy/sd.py\", line 3"),
            "File \"/home/<user>/ComfyUI/comfy/sd.py\", line 3"
        );
        assert_eq!(
            redact_text("/Users/bob/ComfyUI/models"),
            "/Users/<user>/ComfyUI/models"
        );
        assert_eq!(
            redact_text(r"C:\Users\Carol Smith\ComfyUI_windows_portable\ComfyUI\main.py"),
            r"C:\Users\<user>\ComfyUI_windows_portable\ComfyUI\main.py"
        );
        assert_eq!(
            redact_text(r"D:\\Users\\dave\\x.py and c:/users/erin/y.py"),
            r"D:\\Users\\<user>\\x.py and c:/users/<user>/y.py"
        );
        assert_eq!(redact_text("/Users/Shared/models"), "/Users/Shared/models");
        assert_eq!(
            redact_text(r"C:\Users\alice, then C:\Users\bob\x"),
            r"C:\Users\<user>, then C:\Users\<user>\x"
        );
    }

    #[test]
    fn learned_user_names_are_replaced_in_other_paths() {
        let mut v = json!({"a": "/home/alice/x", "b": "/mnt/data/alice/ComfyUI", "c": "alice_lora.safetensors"});
        redact(&mut v);
        assert_eq!(v["a"], "/home/<user>/x");
        assert_eq!(v["b"], "/mnt/data/<user>/ComfyUI");
        assert_eq!(v["c"], "alice_lora.safetensors", "file names stay");
    }

    #[test]
    fn hosts_and_ips_in_urls_and_text() {
        assert_eq!(
            redact_text("http://gpu-box.lan:8188/prompt"),
            "http://<host>:8188/prompt"
        );
        assert_eq!(
            redact_text("https://user:pw@10.0.0.5/x"),
            "https://<user>:<secret>@<ip>/x"
        );
        assert_eq!(redact_text("ws://[fe80::1]:8188/ws"), "ws://<ip>:8188/ws");
        assert_eq!(
            redact_text("http://127.0.0.1:8188"),
            "http://127.0.0.1:8188"
        );
        assert_eq!(
            redact_text("http://localhost:8188"),
            "http://localhost:8188"
        );
        assert_eq!(
            redact_text("(https://pytorch.org/docs/stable/notes/cuda.html#env)"),
            "(https://pytorch.org/docs/stable/notes/cuda.html#env)"
        );
        assert_eq!(
            redact_text("connect to 192.168.1.20 failed"),
            "connect to <ip> failed"
        );
        assert_eq!(
            redact_text("torch 2.15.0.1.2 and 1.2.3"),
            "torch 2.15.0.1.2 and 1.2.3"
        );
        assert_eq!(
            redact_text("c10::cuda::Error at 04:12:33"),
            "c10::cuda::Error at 04:12:33"
        );
        assert_eq!(
            redact_text("2001:0db8:85a3:0000:0000:8a2e:0370:7334"),
            "<ip>"
        );
    }

    #[test]
    fn argv_listen_address_and_secret_flags() {
        let mut argv: Vec<String> = [
            "main.py",
            "--listen",
            "192.168.1.5,gpubox,127.0.0.1",
            "--port",
            "8188",
            "--api-key",
            "abc",
            "--token=xyz",
            "--lowvram",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        redact_argv(&mut argv);
        assert_eq!(argv[2], "<ip>,<host>,127.0.0.1");
        assert_eq!(argv[4], "8188");
        assert_eq!(argv[6], "<secret>");
        assert_eq!(argv[7], "--token=<secret>");
        assert_eq!(argv[8], "--lowvram");
    }

    #[test]
    fn secret_keys() {
        for k in [
            "api_key",
            "apiKey",
            "API_KEY",
            "token",
            "auth_token_comfy_org",
            "api_key_comfy_org",
            "password",
            "client_secret",
            "hf_token",
            "Authorization",
            "access_key_id",
        ] {
            assert!(is_secret_key(k), "{k} should be secret");
        }
        for k in [
            "max_tokens",
            "token_normalization",
            "tokenizer",
            "author",
            "text",
            "ckpt_name",
            "session_id",
            "keyframe",
            "seed",
        ] {
            assert!(!is_secret_key(k), "{k} should not be secret");
        }
    }

    #[test]
    fn secrets_in_inputs_and_extra_data() {
        let mut v = json!({
            "current_inputs": {"api_key": ["sk-live-123"], "prompt": ["a cat"], "max_tokens": [256]},
            "extra_data": {"auth_token_comfy_org": "eyJabc", "api_key_comfy_org": "", "client_id": "c1"},
            "text": "my key is hf_abcdefghijklmnopqrstuvwx ok"
        });
        redact(&mut v);
        assert_eq!(v["current_inputs"]["api_key"][0], "<secret>");
        assert_eq!(v["current_inputs"]["prompt"][0], "a cat");
        assert_eq!(v["current_inputs"]["max_tokens"][0], 256);
        assert_eq!(v["extra_data"]["auth_token_comfy_org"], "<secret>");
        assert_eq!(
            v["extra_data"]["api_key_comfy_org"], "",
            "empty stays empty"
        );
        assert_eq!(v["extra_data"]["client_id"], "c1");
        assert_eq!(v["text"], "my key is <secret> ok");
    }

    #[test]
    fn redaction_replaces_each_secret_once_and_is_idempotent() {
        let raw = "http://10.1.2.3:8188 /home/alice C:\\Users\\bob\\x sk-aaaaaaaaaaaaaaaaaaaa";
        let once = redact_text(raw);
        // Each kind of private text is replaced by its placeholder (an identity function fails).
        for private in ["10.1.2.3", "alice", "bob", "sk-aaaa"] {
            assert!(!once.contains(private), "{private} left in {once:?}");
        }
        assert_eq!(
            once,
            format!("http://{IP}:8188 /home/{USER} C:\\Users\\{USER}\\x {SECRET}")
        );
        // Redacting again changes nothing (placeholders are not redacted into something else).
        assert_eq!(redact_text(&once), once);
    }

    #[test]
    fn credential_header_values_in_text() {
        let raw = "--header 'Authorization: Basic dXNlcjpodW50ZXIy' proxy-authorization=Bearer abcdefghijk X-API-Key: planted-123; Cookie: session=s3cr3t, max_tokens: 5";
        let out = redact_text(raw);
        for private in ["dXNlcjpodW50ZXIy", "abcdefghijk", "planted-123", "s3cr3t"] {
            assert!(!out.contains(private), "{private} left in {out:?}");
        }
        assert_eq!(
            out,
            format!("--header 'Authorization: {SECRET}' proxy-authorization={SECRET} X-API-Key: {SECRET}; Cookie: {SECRET}, max_tokens: 5")
        );
        assert_eq!(redact_text(&out), out);
    }
}
