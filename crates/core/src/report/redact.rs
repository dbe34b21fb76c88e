//! Redaction of what a report must not leak when pasted into a public issue: home directories
//! (`/home/x`, `/Users/x`, `C:\Users\x`, `~x`, `/root`) and user names in paths, host names
//! (in URLs, `host=` values, private suffixes such as `.lan`, and every host name seen in a
//! URL elsewhere in the text) and IP addresses, e-mail addresses, secret-looking inputs
//! (`api_key`, `token`, `civitai_key`, `webhook_url`, `password`, …) and, in free text,
//! `name=value` / `name: value` pairs and URL query parameters with such names, credential
//! headers, well-known token formats and Slack/Discord/other webhook URLs.
//!
//! Works on JSON values, so the same rules apply to the report, to workflow files and to run
//! records. Model file names stay: they identify the components. Loopback addresses
//! (`127.0.0.1`, `localhost`, `::1`, `0.0.0.0`) identify nobody and stay too.

use regex::Regex;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Replaces a user name.
pub(crate) const USER: &str = "<user>";
/// Replaces a host name.
pub(crate) const HOST: &str = "<host>";
/// Replaces an IP address.
pub(crate) const IP: &str = "<ip>";
/// Replaces a secret.
pub(crate) const SECRET: &str = "<secret>";
/// Replaces an e-mail address.
pub(crate) const EMAIL: &str = "<email>";
/// Replaces the home folder `/root` (the user name is the folder itself).
pub(crate) const HOME: &str = "<home>";

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
    webhook: Regex,
    query: Regex,
    assignment: Regex,
    email: Regex,
    root_home: Regex,
    tilde_home: Regex,
    private_host: Regex,
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
            r"(?i)\b([a-z][a-z0-9+.-]*://)(?:([^/\s@:]*)(?::([^/\s@]*))?@)?(\[[0-9a-f:.]+\]|[^/\s:?#<>@\x22']+)",
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
        // Webhook URLs carry their secret in the path: Slack's
        // hooks.slack.com/services/T…/B…/X…, Discord's /api/webhooks/ID/TOKEN, and any other
        // `/webhook(s)/…` or `/hooks/…` path (Zapier, n8n, Make).
        webhook: Regex::new(
            r#"(?i)\b(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)/|[^/\s"'<>]+/(?:[^\s"'<>?#]*/)?(?:webhooks?|hooks)/))[^\s"'<>)\]]+"#,
        )
        .expect("webhook pattern"),
        // A query parameter: `?key=…`, `&access_token=…`.
        query: Regex::new(r#"([?&;])([A-Za-z][A-Za-z0-9_.\-]*)=([^?&#\s"'<>]+)"#)
            .expect("query pattern"),
        // `name=`, `name: `, `'name': `, `"name" = ` (the value follows the match).
        assignment: Regex::new(r#"\b([A-Za-z][A-Za-z0-9_.\-]*)(["']?)(\s*[:=]\s*)"#)
            .expect("assignment pattern"),
        email: Regex::new(
            r"\b([A-Za-z0-9][A-Za-z0-9._%+-]*)@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b",
        )
        .expect("email pattern"),
        // `/root` as a path of its own (not `/srv/root` or `/rootfs`).
        root_home: Regex::new(r#"(^|[\s"'=(,\[{:])/root(/|$|[\s"'),;\]}:])"#)
            .expect("root home pattern"),
        tilde_home: Regex::new(r"(^|[^\w~])~([A-Za-z_][A-Za-z0-9_.-]*)([/\\])").expect("tilde pattern"),
        // Host names under suffixes that only exist on private networks.
        private_host: Regex::new(
            r"(?i)\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.(?:local|lan|internal|localdomain|intranet|corp|home\.arpa)\b(\.[a-z0-9])?",
        )
        .expect("private host pattern"),
    })
}

/// Whether an object key names a secret: `api_key`, `apiKey`, `token`, `auth_token_comfy_org`,
/// `password`, `client_secret`, `cookie`, `civitai_key`, `webhook_url`, … but not
/// `max_tokens`, `token_normalization`, `tokenizer`, `key` alone (an output's key in a run
/// record, a combo option's key in a UI workflow) or `key_frame`/`sort_key`-like names.
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
        "webhook",
        "webhooks",
        "passkey",
        "licensekey",
    ];
    if SECRET_WORDS.iter().any(|w| has(w)) {
        return true;
    }
    // `<service>_key` (civitai_key, openai_key, hf_key): a key with a qualifier that is not
    // one of the non-secret kinds of key.
    const NOT_SECRET_KEYS: &[&str] = &[
        "frame", "frames", "sort", "cache", "dict", "map", "hash", "primary", "foreign", "lookup",
        "name", "names", "index", "press", "hot", "compile", "output", "input", "node", "model",
        "state", "prompt", "latent", "image", "color", "chroma", "mode",
    ];
    if has("key") && words.len() > 1 && !words.iter().any(|w| NOT_SECRET_KEYS.contains(&w.as_str()))
    {
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
    "slack.com",
    "discord.com",
    "discordapp.com",
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

/// The redaction rules, with the user names learned from home paths and the private host
/// names learned from URLs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    users: BTreeSet<String>,
    hosts: BTreeSet<String>,
}

impl Redactor {
    /// A redactor that knows no user names yet.
    pub(crate) fn new() -> Redactor {
        Redactor::default()
    }

    /// Learns the user names of every home path in `value` (so `/mnt/data/alice/…` is caught
    /// once `/home/alice` was seen anywhere).
    pub(crate) fn learn(&mut self, value: &Value) {
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
        for cap in p.tilde_home.captures_iter(text) {
            if cap[2].len() >= 2 {
                self.users.insert(cap[2].to_string());
            }
        }
        // Host names (not addresses) of URLs: the same name elsewhere in the text (a console
        // line, an error without the scheme) is the same machine.
        for cap in p.url.captures_iter(text) {
            let host = cap[4].to_ascii_lowercase();
            let bare = host.trim_matches(|c| c == '[' || c == ']');
            // Only names that cannot be an ordinary word (`gpu-box`, `nas.example.org`,
            // `node7`): a compose service called `comfyui` must not blank the word ComfyUI.
            let distinctive = host.contains(['.', '-']) || host.chars().any(|c| c.is_ascii_digit());
            if host.len() >= 3
                && distinctive
                && !is_loopback_host(&host)
                && !is_public_host(&host)
                && !is_ipv4(bare)
                && !bare.contains(':')
                && host != HOST
                && host != IP
            {
                self.hosts.insert(host);
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
            .webhook
            .replace_all(&out, |c: &regex::Captures| format!("{}{SECRET}", &c[1]))
            .into_owned();
        out = p
            .query
            .replace_all(&out, |c: &regex::Captures| {
                if is_secret_query_name(&c[2]) && &c[3] != SECRET {
                    format!("{}{}={SECRET}", &c[1], &c[2])
                } else {
                    c[0].to_string()
                }
            })
            .into_owned();
        out = redact_assignments(&out);
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
        out = p
            .email
            .replace_all(&out, |c: &regex::Captures| {
                // `git@github.com:owner/repo` is an address of a repository, not a person.
                if &c[1] == "git" {
                    c[0].to_string()
                } else {
                    EMAIL.to_string()
                }
            })
            .into_owned();
        out = p
            .private_host
            .replace_all(&out, |c: &regex::Captures| {
                if c.get(1).is_some() {
                    c[0].to_string() // a file name such as settings.local.json
                } else {
                    HOST.to_string()
                }
            })
            .into_owned();
        for host in &self.hosts {
            out = replace_word(&out, host, HOST);
        }
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
        out = replace_before_last_group(&out, &p.root_home, |c| format!("{}{HOME}", &c[1]));
        out = replace_before_last_group(&out, &p.tilde_home, |c| format!("{}~{USER}", &c[1]));
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

/// Query parameter names that hold a secret: every [secret key](is_secret_key), and the short
/// names APIs use for one (`?key=`, `?sig=`, `X-Amz-Signature=`).
fn is_secret_query_name(name: &str) -> bool {
    let words = key_words(name);
    is_secret_key(name)
        || words
            .iter()
            .any(|w| matches!(w.as_str(), "key" | "sig" | "signature" | "code" | "session"))
}

/// Names whose value is a host name (`host='nas'`, `hostname: gpu-box`).
fn is_host_key(name: &str) -> bool {
    key_words(name)
        .iter()
        .any(|w| matches!(w.as_str(), "host" | "hostname" | "hosts"))
}

/// Redacts the values of `name=value`, `name: value`, `'name': 'value'` pairs whose name says
/// secret (`token=…`, `api_key='…'`, `"password": "…"`) or host (`host='nas'`). A value after
/// `=` or in quotes is always taken; an unquoted value after `:` only when it does not read
/// as a plain word (`Invalid token: expired` stays).
fn redact_assignments(text: &str) -> String {
    let re = &patterns().assignment;
    let mut out = String::with_capacity(text.len());
    let (mut last, mut from) = (0, 0);
    while let Some(c) = re.captures_at(text, from) {
        let m = c.get(0).expect("whole match");
        from = m.end();
        let name = &c[1];
        let (secret, host) = (is_secret_key(name), is_host_key(name));
        if !secret && !host {
            continue;
        }
        let rest = &text[m.end()..];
        let Some((skip, len, quoted)) = value_span(rest) else {
            continue;
        };
        let value = &rest[skip..skip + len];
        if value.starts_with('<') && value.ends_with('>') {
            continue; // already a placeholder
        }
        let by_colon = !c[3].contains('=');
        let plain_word = value.chars().all(|ch| ch.is_ascii_lowercase());
        if by_colon && !quoted && plain_word && c[2].is_empty() {
            continue;
        }
        let replacement = if secret {
            SECRET
        } else if is_loopback_host(value) || is_public_host(value) {
            continue;
        } else {
            host_placeholder(value)
        };
        out.push_str(&text[last..m.end() + skip]);
        out.push_str(replacement);
        last = m.end() + skip + len;
        from = last;
    }
    out.push_str(&text[last..]);
    out
}

/// Where the value at the start of `rest` is: (offset, length, quoted). A quoted value runs to
/// its closing quote on the same line; an unquoted one to whitespace or punctuation.
fn value_span(rest: &str) -> Option<(usize, usize, bool)> {
    let first = rest.chars().next()?;
    if first == '"' || first == '\'' {
        let body = &rest[1..];
        let end = body.find([first, '\n'])?;
        return (end > 0).then_some((1, end, true));
    }
    let end = rest
        .find(|ch: char| ch.is_whitespace() || "\"',;&()[]{}<>".contains(ch))
        .unwrap_or(rest.len());
    (end > 0).then_some((0, end, false))
}

/// Replaces every whole-word occurrence of `word` (not inside a longer host or file name).
fn replace_word(text: &str, word: &str, with: &str) -> String {
    let is_name = |ch: char| ch.is_alphanumeric() || ch == '-' || ch == '_' || ch == '.';
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    let mut from = 0;
    while let Some(pos) = lower[from..].find(word).map(|p| p + from) {
        let end = pos + word.len();
        from = end;
        let before_ok = text[..pos]
            .chars()
            .next_back()
            .is_none_or(|ch| !is_name(ch));
        // A trailing dot ends a sentence, not a longer name.
        let after = &text[end..];
        let after_ok = match after.chars().next() {
            None => true,
            Some('.') => after[1..].chars().next().is_none_or(|ch| !is_name(ch)),
            Some(ch) => !is_name(ch),
        };
        if before_ok && after_ok {
            out.push_str(&text[last..pos]);
            out.push_str(with);
            last = end;
        }
    }
    out.push_str(&text[last..]);
    out
}

/// Like `Regex::replace_all` for a pattern whose last group is the delimiter after the match,
/// which the next match may need as its leading delimiter (`/root /root`, `~a/~b/`): each match
/// is replaced up to that group only, and the search goes on from there.
fn replace_before_last_group(
    text: &str,
    re: &Regex,
    with: impl Fn(&regex::Captures) -> String,
) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut last, mut from) = (0, 0);
    while let Some(c) = re.captures_at(text, from) {
        let whole = c.get(0).expect("whole match");
        let end = c
            .get(c.len() - 1)
            .map_or(whole.end(), |g| g.start())
            .max(whole.start() + 1);
        out.push_str(&text[last..whole.start()]);
        out.push_str(&with(&c));
        last = end;
        from = end;
    }
    out.push_str(&text[last..]);
    out
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
        // A link to another node's output (`["4", 0]`) is not the secret itself.
        Value::Array(a) if a.len() == 2 && a[0].is_string() && a[1].is_u64() => {}
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
    #[test]
    fn secret_pairs_in_free_text() {
        for (raw, want) in [
            (
                "download failed: token=abc123XYZ then",
                "download failed: token=<secret> then",
            ),
            (
                "Client(api_key='sk-not-a-format', timeout=5)",
                "Client(api_key='<secret>', timeout=5)",
            ),
            (
                r#"{"password": "hunter two", "steps": 20}"#,
                r#"{"password": "<secret>", "steps": 20}"#,
            ),
            ("hf_token: Abc123 loaded", "hf_token: <secret> loaded"),
            ("self.civitai_key = Xy9", "self.civitai_key = <secret>"),
            // A plain word after a colon is prose, not a value.
            ("Invalid token: expired", "Invalid token: expired"),
            (
                "max_tokens=256 tokenizer: t5 key=images",
                "max_tokens=256 tokenizer: t5 key=images",
            ),
        ] {
            assert_eq!(redact_text(raw), want, "{raw}");
        }
    }

    #[test]
    fn secret_query_parameters() {
        for (raw, want) in [
            (
                "GET https://api.example.com/v1/models?key=AIzaSyA1b2&alt=json",
                "GET https://<host>/v1/models?key=<secret>&alt=json",
            ),
            (
                "https://civitai.com/api/download/models/12?type=Model&token=0123abcd",
                "https://civitai.com/api/download/models/12?type=Model&token=<secret>",
            ),
            (
                "https://bucket.s3.amazonaws.com/x?X-Amz-Signature=f00d&X-Amz-Expires=60",
                "https://<host>/x?X-Amz-Signature=<secret>&X-Amz-Expires=60",
            ),
            (
                "/view?filename=a.png&type=output",
                "/view?filename=a.png&type=output",
            ),
        ] {
            assert_eq!(redact_text(raw), want, "{raw}");
        }
    }

    #[test]
    fn webhook_urls() {
        for (raw, want) in [
            (
                "posting to https://hooks.slack.com/services/T0AAAA/B0BBBB/XXsecretXX failed",
                "posting to https://hooks.slack.com/services/<secret> failed",
            ),
            (
                "https://discord.com/api/webhooks/123456789/abcDEF-ghi_jkl",
                "https://discord.com/api/webhooks/<secret>",
            ),
            (
                "(https://hooks.zapier.com/hooks/catch/123/abc/)",
                "(https://<host>/hooks/<secret>)",
            ),
        ] {
            assert_eq!(redact_text(raw), want, "{raw}");
        }
    }

    #[test]
    fn emails_root_and_tilde_homes() {
        for (raw, want) in [
            (
                "contact alice.smith@example.org for access",
                "contact <email> for access",
            ),
            (
                "git@github.com:comfyanonymous/ComfyUI.git",
                "git@github.com:comfyanonymous/ComfyUI.git",
            ),
            (
                "torch@2.1.0 and @torch.no_grad",
                "torch@2.1.0 and @torch.no_grad",
            ),
            (
                r#"File "/root/ComfyUI/nodes.py", line 5"#,
                r#"File "<home>/ComfyUI/nodes.py", line 5"#,
            ),
            (
                "cd /root && ls /srv/root /rootfs/x",
                "cd <home> && ls /srv/root /rootfs/x",
            ),
            (
                "~alice/ComfyUI and ~/.cache",
                "~<user>/ComfyUI and ~/.cache",
            ),
        ] {
            assert_eq!(redact_text(raw), want, "{raw}");
        }
    }

    #[test]
    fn private_host_names() {
        for (raw, want) in [
            (
                "HTTPConnectionPool(host='nas-01', port=8188)",
                "HTTPConnectionPool(host='<host>', port=8188)",
            ),
            ("host='huggingface.co' ok", "host='huggingface.co' ok"),
            (
                "ComfyUI on studio.lan and nas.local.",
                "ComfyUI on <host> and <host>.",
            ),
            ("read settings.local.json", "read settings.local.json"),
        ] {
            assert_eq!(redact_text(raw), want, "{raw}");
        }
        // A host name seen in a URL is the same machine wherever else it appears.
        let mut v = json!({
            "server": "http://gpu-box:8188",
            "log": "lost gpu-box at 10:00. gpu-box-2 and ComfyUI stay",
            "compose": "http://comfyui:8188",
        });
        redact(&mut v);
        assert_eq!(v["server"], "http://<host>:8188");
        assert_eq!(v["log"], "lost <host> at 10:00. gpu-box-2 and ComfyUI stay");
    }

    #[test]
    fn service_keys_and_webhook_inputs_are_secret_keys() {
        for k in [
            "civitai_key",
            "webhook_url",
            "openai_key",
            "hf_api_key",
            "discordWebhook",
        ] {
            assert!(is_secret_key(k), "{k} should be secret");
        }
        for k in [
            "key",
            "key_frame",
            "sort_key",
            "detailer_hook",
            "debug_compile_keys",
        ] {
            assert!(!is_secret_key(k), "{k} should not be secret");
        }
        let mut v = json!({"inputs": {
            "civitai_key": "civ-123", "webhook_url": "https://example.net/x",
            "api_key": ["5", 0], "model": ["4", 0]
        }});
        redact(&mut v);
        assert_eq!(v["inputs"]["civitai_key"], "<secret>");
        assert_eq!(v["inputs"]["webhook_url"], "<secret>");
        assert_eq!(
            v["inputs"]["api_key"],
            json!(["5", 0]),
            "a link stays a link"
        );
    }

    #[test]
    fn free_text_redaction_is_idempotent() {
        let raw = "token=abc1 https://x.example/a?key=k2 alice@example.org /root/x host='nas-1' \
                   https://discord.com/api/webhooks/1/t studio.lan ~bob/x";
        let once = redact_text(raw);
        for private in [
            "abc1", "k2", "alice@", "/root", "nas-1", "/1/t", "studio", "bob",
        ] {
            assert!(!once.contains(private), "{private} left in {once:?}");
        }
        assert_eq!(redact_text(&once), once);
    }
    proptest::proptest! {
        /// Any text mixing the patterns' pieces with multi-byte characters: redaction never
        /// panics (byte offsets stay on character boundaries).
        #[test]
        fn free_text_redaction_never_panics(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "token", "=", ": ", "'", "\"", "?key=", "&", "host", "@", ".lan", ".", "/root",
                "~", "/", "ü", "東京", "x1", "https://", "gpu-box", "hooks/", " ", "\n", "<", ">",
                "api_key", "sk-", "example.org", "\u{202e}",
            ]), 0..24)
        ) {
            let _ = redact_text(&parts.concat());
        }

        /// Log lines made of the forms the rules know, in any order: a second pass changes
        /// nothing (placeholders are not redacted into something else).
        #[test]
        fn free_text_redaction_is_idempotent_on_any_mix_of_forms(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "download failed: token=abc123XYZ", "Client(api_key='sk-not-a-format')",
                r#"{"password": "hunter two"}"#, "hf_token: Abc123", "Invalid token: expired",
                "https://api.example.com/v1/models?key=AIzaSyA1b2&alt=json",
                "https://hooks.slack.com/services/T0AAAA/B0BBBB/XXsecretXX",
                "https://discord.com/api/webhooks/123456789/abc", "alice.smith@example.org",
                r#"File "/root/ComfyUI/nodes.py""#, "~alice/ComfyUI", "host='nas-01'",
                "studio.lan", "http://gpu-box:8188", "lost gpu-box.", "192.168.1.20",
                "/home/bob/x", r"C:\Users\Carol Smith\x", "Authorization: Basic dXNl",
                "東京 ü", "git@github.com:o/r.git",
            ]), 0..12),
            newline in proptest::bool::ANY,
        ) {
            let text = parts.join(if newline { "\n" } else { " " });
            let once = redact_text(&text);
            proptest::prop_assert_eq!(redact_text(&once), once.clone(), "{:?}", text);
        }
    }
}
