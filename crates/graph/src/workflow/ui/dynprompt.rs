//! The frontend's dynamic-prompt pass over root-level STRING widgets (`dynamicPrompts: true`):
//! comments are stripped and `{a|b}` groups resolved. The frontend picks a random alternative;
//! here the first one is kept so conversion stays deterministic.

/// Processes `text`; the flag is true when a group offered more than one alternative.
pub(crate) fn process(text: &str) -> (String, bool) {
    if !text.contains('{') && !text.contains("//") && !text.contains("/*") {
        return (text.to_string(), false);
    }
    let stripped = strip_comments(text);
    let chars: Vec<char> = stripped.chars().collect();
    let mut pos = 0;
    let mut choices = false;
    let out = parse(&chars, &mut pos, false, &mut choices);
    (out, choices)
}

/// Removes `/* … */` and `// …` (to the end of the line).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.is_none_or(|l| b < l) => match rest[b + 2..].find("*/") {
                Some(end) => {
                    out.push_str(&rest[..b]);
                    rest = &rest[b + 2 + end + 2..];
                }
                None => {
                    out.push_str(rest);
                    return out;
                }
            },
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                match rest[l..].find('\n') {
                    Some(nl) => rest = &rest[l + nl..],
                    None => return out,
                }
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

fn parse(chars: &[char], pos: &mut usize, nested: bool, choices: &mut bool) -> String {
    let mut current = String::new();
    let mut options: Vec<String> = Vec::new();
    while *pos < chars.len() {
        let c = chars[*pos];
        *pos += 1;
        match c {
            '\\' if *pos < chars.len() => {
                current.push(chars[*pos]);
                *pos += 1;
            }
            '{' => current.push_str(&parse(chars, pos, true, choices)),
            '}' if nested => {
                options.push(current);
                return pick(options, choices);
            }
            '|' if nested => options.push(std::mem::take(&mut current)),
            other => current.push(other),
        }
    }
    if nested {
        options.push(current);
        return pick(options, choices);
    }
    current
}

fn pick(mut options: Vec<String>, choices: &mut bool) -> String {
    if options.len() > 1 {
        *choices = true;
    }
    options.swap_remove(0)
}

#[cfg(test)]
mod tests {
    use super::process;

    #[test]
    fn comments_groups_and_escapes() {
        assert_eq!(process("a photo"), ("a photo".to_string(), false));
        assert_eq!(process("see https://x"), ("see https:".to_string(), false));
        assert_eq!(process("a /* no */b"), ("a b".to_string(), false));
        assert_eq!(process("{red|blue} car"), ("red car".to_string(), true));
        assert_eq!(process("{single}"), ("single".to_string(), false));
        assert_eq!(process("\\{x\\}"), ("{x}".to_string(), false));
        assert_eq!(process("{a {b|c}|d}"), ("a b".to_string(), true));
    }
}
