//! Commands a user copies into a POSIX shell: the one quoter of their words (on `shell-words`)
//! and the one builder of the command that continues a session.

use std::borrow::Cow;
use std::path::Path;

/// `word` quoted for a POSIX shell when it needs it (`shell_words::quote`), also when it holds
/// what an interactive shell expands though POSIX does not (`!` history, `{a,b}` braces, `^`)
/// or a control character.
pub(crate) fn quote(word: &str) -> Cow<'_, str> {
    let quoted = shell_words::quote(word);
    let interactive = |c: char| matches!(c, '!' | '{' | '}' | '^') || c.is_control();
    match quoted {
        // Left bare, so it holds no `'`: plain single quotes are enough.
        Cow::Borrowed(bare) if bare.contains(interactive) => Cow::Owned(format!("'{bare}'")),
        quoted => quoted,
    }
}

/// `words` quoted ([`quote`]) and joined by spaces.
pub(crate) fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command that continues session `session_id`: `comfy-bisect resume ID --runs-dir DIR`,
/// the runs folder as an absolute path so the command works from any folder (cron, another
/// shell); `None`: not known, as in a shared report.
pub(crate) fn resume_command(session_id: &str, runs_dir: Option<&Path>) -> String {
    let mut command = format!("comfy-bisect resume {}", quote(session_id));
    if let Some(dir) = runs_dir {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        command.push_str(" --runs-dir ");
        command.push_str(&quote(&dir.display().to_string()));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_change_them() {
        assert_eq!(
            quote("runs/20261129-010000-abcd"),
            "runs/20261129-010000-abcd"
        );
        assert_eq!(quote("/tmp/a-b_c.d:e@f+g,h"), "/tmp/a-b_c.d:e@f+g,h");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("runs dir"), "'runs dir'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a=b"), "'a=b'");
        assert_eq!(quote("wow!"), "'wow!'");
        assert_eq!(quote("{a,b}"), "'{a,b}'");
        assert_eq!(quote("a\u{1b}b"), "'a\u{1b}b'");
        assert_eq!(join(&["x", "a b", "it's"]), r"x 'a b' 'it'\''s'");
    }

    #[test]
    fn the_resume_command_names_the_runs_folder_as_an_absolute_path() {
        let id = "20261129-010000-abcd";
        assert_eq!(
            resume_command(id, None),
            format!("comfy-bisect resume {id}")
        );
        // A relative folder (the default `runs`) fails from cron: it is made absolute.
        let cwd = std::env::current_dir().unwrap().join("runs");
        assert_eq!(
            resume_command(id, Some(Path::new("runs"))),
            format!(
                "comfy-bisect resume {id} --runs-dir {}",
                quote(&cwd.display().to_string())
            )
        );
        assert_eq!(
            resume_command(id, Some(Path::new("/srv/runs dir"))),
            format!("comfy-bisect resume {id} --runs-dir '/srv/runs dir'")
        );
        // What a POSIX shell makes of it is the folder as given.
        let command = resume_command(id, Some(Path::new("/tmp/it's $x")));
        let words = shell_words::split(&command).unwrap();
        assert_eq!(words[2..], [id, "--runs-dir", "/tmp/it's $x"]);
    }
}
