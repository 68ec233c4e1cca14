//! Where output goes: report lines and JSON lines on stdout, progress bars
//! on stderr.
//!
//! Progress is drawn only when stderr is a terminal and the subcommand is
//! not printing JSON, so a script reading stdout (or capturing stderr into a
//! log) never sees a bar.

use std::io::{self, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::error::CliError;

/// Stdout, locked once for the life of the subcommand.
pub(crate) struct Out {
    inner: Box<dyn Write>,
}

impl Out {
    /// The process's stdout.
    pub(crate) fn stdout() -> Self {
        Self {
            inner: Box::new(io::stdout().lock()),
        }
    }

    /// Prints one line of the human-readable report.
    pub(crate) fn line(&mut self, text: impl std::fmt::Display) -> Result<(), CliError> {
        writeln!(self.inner, "{text}").map_err(CliError::Output)
    }

    /// Prints one JSON object as one line, flushed at once so a script (or
    /// a crash test reading acks) sees it before whatever happens next.
    pub(crate) fn json(&mut self, value: &Value) -> Result<(), CliError> {
        writeln!(self.inner, "{value}").map_err(CliError::Output)?;
        self.inner.flush().map_err(CliError::Output)
    }

    /// Flushes what was written.
    pub(crate) fn flush(&mut self) -> Result<(), CliError> {
        self.inner.flush().map_err(CliError::Output)
    }
}

/// Whether a progress bar may be drawn: stderr is a terminal and stdout is
/// not carrying JSON.
pub(crate) fn progress_allowed(json: bool) -> bool {
    !json && io::stderr().is_terminal()
}

/// Whether a progress bar may be drawn beside a stream of lines (`dump`'s
/// records, `write`'s acks): only when stdout goes elsewhere than the
/// terminal, since a bar between streamed lines would garble both.
pub(crate) fn progress_beside_stream() -> bool {
    io::stderr().is_terminal() && !io::stdout().is_terminal()
}

/// A progress bar on stderr, or nothing.
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar of `len` steps, labelled `message`, when `enabled`.
    pub(crate) fn bar(len: u64, message: impl Into<String>, enabled: bool) -> Self {
        if !enabled {
            return Self(None);
        }
        let bar = ProgressBar::new(len);
        let style =
            ProgressStyle::with_template("{msg} [{bar:30}] {human_pos}/{human_len} ({eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
        bar.set_style(style);
        bar.set_message(message.into());
        Self(Some(bar))
    }

    /// A bar of `len` bytes, labelled `message`, when `enabled`.
    pub(crate) fn bytes(len: u64, message: impl Into<String>, enabled: bool) -> Self {
        let progress = Self::bar(len, message, enabled);
        if let Some(bar) = &progress.0
            && let Ok(style) =
                ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta} left)")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        progress
    }

    /// A spinner for one long step whose length is unknown.
    pub(crate) fn spinner(message: impl Into<String>, enabled: bool) -> Self {
        if !enabled {
            return Self(None);
        }
        let bar = ProgressBar::new_spinner();
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(120));
        Self(Some(bar))
    }

    /// Advances by `n` steps.
    pub(crate) fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    /// Replaces the label.
    pub(crate) fn set_message(&self, message: impl Into<String>) {
        if let Some(bar) = &self.0 {
            bar.set_message(message.into());
        }
    }

    /// Runs `f` (which prints to stdout) with the bar hidden, so report
    /// lines and the bar never share a terminal line.
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Removes the bar from the terminal.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `path` as one word of a POSIX shell command line, for the commands a
/// report suggests: as it is when it holds only characters no shell treats
/// specially, otherwise in single quotes, each embedded `'` written `'\''`.
/// Copying the suggestion then runs it on this path, whatever the path
/// holds.
pub(crate) fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `Some(n)` as a JSON number, `None` as `null`.
pub(crate) fn opt(value: Option<u64>) -> Value {
    value.map_or(Value::Null, Value::from)
}

/// `Some(n)` as decimal, `None` as `?`.
pub(crate) fn opt_text(value: Option<u64>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| v.to_string())
}

/// Seconds as a float with microsecond resolution.
pub(crate) fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

/// Rounds `value` to `places` decimal places, for JSON figures that are
/// measurements rather than counts.
pub(crate) fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::shell_quote;

    #[test]
    fn shell_quote_leaves_plain_paths_and_quotes_the_rest() {
        let cases = [
            ("/data/shard-0", "/data/shard-0"),
            ("relative/a_b.c", "relative/a_b.c"),
            ("/data/my shard", "'/data/my shard'"),
            ("it's", r"'it'\''s'"),
            ("$HOME/`x`;rm", "'$HOME/`x`;rm'"),
            ("a\nb", "'a\nb'"),
            ("", "''"),
        ];
        for (path, quoted) in cases {
            assert_eq!(shell_quote(Path::new(path)), quoted, "{path:?}");
        }
    }

    /// What `sh` makes of a quoted path is the path itself.
    #[test]
    fn shell_quote_round_trips_through_sh() {
        for path in [
            "/tmp/my shard",
            "it's here",
            "a'b'c",
            "$x `y` \\z\"",
            "tab\there",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", shell_quote(Path::new(path))))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), path);
        }
    }
}
