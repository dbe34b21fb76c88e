//! Shell commands: the one quoter of the words a user copies into a POSIX shell (on
//! `shell-words`), the one builder of the command that continues a session, and how the user's
//! own commands (`--restart-cmd`, `--launch-cmd`) are run: `sh -c` on Unix, `cmd /D /S /C` on
//! Windows, each in a process group of its own so that the whole tree can be stopped.

use std::borrow::Cow;
use std::path::Path;

/// `word` quoted for the shell of this platform when it needs it: [`quote_posix`] on Unix,
/// [`quote_windows`] on Windows (where a path such as `C:\Users\me\runs` is left bare).
pub(crate) fn quote(word: &str) -> Cow<'_, str> {
    if cfg!(windows) {
        quote_windows(word)
    } else {
        quote_posix(word)
    }
}

/// `word` quoted for a POSIX shell when it needs it (`shell_words::quote`), also when it holds
/// what an interactive shell expands though POSIX does not (`!` history, `{a,b}` braces, `^`)
/// or a control character.
pub(crate) fn quote_posix(word: &str) -> Cow<'_, str> {
    let quoted = shell_words::quote(word);
    let interactive = |c: char| matches!(c, '!' | '{' | '}' | '^') || c.is_control();
    match quoted {
        // Left bare, so it holds no `'`: plain single quotes are enough.
        Cow::Borrowed(bare) if bare.contains(interactive) => Cow::Owned(format!("'{bare}'")),
        quoted => quoted,
    }
}

/// `word` as cmd.exe and PowerShell both read it: bare when it holds only letters, digits and
/// `_-.:/\\=+,@~` (drive letters and backslashes included), else between double quotes (a `"`
/// inside doubled; `%` and `$` are left as they are: Windows paths rarely hold them, and the two
/// shells escape them differently).
pub(crate) fn quote_windows(word: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.:/\\=+,@~".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("\"{}\"", word.replace('"', "\"\"")))
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

/// `command` as the platform's shell runs it: `sh -c COMMAND` on Unix, `cmd /D /S /C "COMMAND"`
/// on Windows (see [`cmd_arguments`]).
pub(crate) fn user_command(command: &str) -> std::process::Command {
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        let mut c = std::process::Command::new("cmd");
        // Verbatim: std's own quoting follows the C runtime's rules, which cmd does not read.
        c.raw_arg(cmd_arguments(command));
        c
    }
    #[cfg(not(windows))]
    {
        let mut c = std::process::Command::new("sh");
        c.arg("-c").arg(command);
        c
    }
}

/// The arguments of `cmd.exe` that run `command` exactly as typed: `/D` skips the AutoRun
/// commands of the registry, `/S` makes cmd drop only the first and the last quote of what
/// follows `/C`, so a command that starts with a quoted program path
/// (`"C:\ComfyUI\run_nvidia_gpu.bat" --lowvram`) is kept whole.
#[cfg(any(windows, test))]
pub(crate) fn cmd_arguments(command: &str) -> String {
    format!("/D /S /C \"{command}\"")
}

/// Puts a command to be started in a process group of its own: on Unix a new process group (a
/// terminal's Ctrl-C does not reach it; [`stop_tree`] signals the whole group), on Windows
/// `CREATE_NEW_PROCESS_GROUP` (Ctrl-C in our console does not reach it either).
pub(crate) fn own_process_group(command: &mut std::process::Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        /// winbase.h
        const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
        command.creation_flags(CREATE_NEW_PROCESS_GROUP);
    }
    #[cfg(not(any(unix, windows)))]
    let _ = command;
}

/// Stops process `pid` and every process it started, at once: Unix sends SIGKILL to the
/// process group `pid` leads (it was started with [`own_process_group`]), Windows runs
/// `taskkill /T /F /PID pid` (the tree by parent process id). Whether that was done.
pub(crate) fn stop_tree(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pgid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: kill(2) with a negative pid signals the process group `pid` leads; no memory
        // is touched.
        unsafe { libc::kill(-pgid, libc::SIGKILL) == 0 }
    }
    #[cfg(windows)]
    {
        std::process::Command::new("taskkill")
            .args(taskkill_arguments(pid))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = pid;
        false
    }
}

/// The arguments of `taskkill` that end `pid` and its descendants, forcibly.
#[cfg(any(windows, test))]
fn taskkill_arguments(pid: u32) -> [String; 4] {
    ["/T".into(), "/F".into(), "/PID".into(), pid.to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmd_gets_the_command_whole_between_one_pair_of_quotes() {
        assert_eq!(
            cmd_arguments(r#""C:\ComfyUI_windows_portable\run_nvidia_gpu.bat" --lowvram"#),
            r#"/D /S /C ""C:\ComfyUI_windows_portable\run_nvidia_gpu.bat" --lowvram""#
        );
        assert_eq!(
            cmd_arguments("cd /d D:\\ComfyUI && python main.py --port 8188"),
            "/D /S /C \"cd /d D:\\ComfyUI && python main.py --port 8188\""
        );
        assert_eq!(
            taskkill_arguments(4242),
            ["/T", "/F", "/PID", "4242"].map(String::from)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_user_command_runs_in_the_shell_and_its_group_can_be_stopped() {
        let out = user_command("echo $((6 * 7))").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "42\n");
        let mut sleeper = user_command("sleep 600 & wait");
        own_process_group(&mut sleeper);
        let mut child = sleeper.spawn().unwrap();
        assert!(stop_tree(child.id()));
        assert!(!child.wait().unwrap().success());
    }

    #[test]
    fn windows_words_keep_drive_letters_and_backslashes_bare() {
        assert_eq!(quote_windows(r"C:\Users\me\runs"), r"C:\Users\me\runs");
        assert_eq!(quote_windows(r"D:\runs-2026_a.b"), r"D:\runs-2026_a.b");
        assert_eq!(
            quote_windows(r"C:\Users\Jane Doe\runs"),
            r#""C:\Users\Jane Doe\runs""#
        );
        assert_eq!(quote_windows(""), r#""""#);
        assert_eq!(quote_windows(r#"a"b"#), r#""a""b""#);
        assert_eq!(quote_windows("a&b"), r#""a&b""#);
    }

    #[cfg(not(windows))]
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

    #[cfg(not(windows))]
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
