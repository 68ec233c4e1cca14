//! `felix-store manifest list|fetch|check`: a tiered shard's remote
//! manifest versions.
//!
//! The shard is named by its directory, whose key file holds the exact key
//! its objects are stored under; the store by `--remote` (see
//! `cmd/remote.rs`). `list` shows every version with whether it decodes,
//! `check` decodes one as an open does (exit 1 when it does not), and
//! `fetch` writes one's bytes as stored, for a bug report or a hex dump.
//! Nothing here writes to the store.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use felix_format::key_file::decode_key_file;
use felix_format::tier_manifest::Manifest;
use felix_format::{KEY_FILE_NAME, ShardKey};
use serde_json::{Value, json};

use crate::cmd::remote::{Opened, RemoteArgs, chain, outcome_of};
use crate::error::{CliError, Outcome};
use crate::output::Out;

/// Arguments of `manifest`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Every manifest version in the store, and whether each decodes.
    List {
        #[command(flatten)]
        common: Common,
        /// Only this version (whether it is in force still depends on the
        /// newer ones, and the exit status is the whole listing's).
        #[arg(long)]
        seq: Option<u64>,
    },
    /// Write one manifest version's bytes, as stored, to a file or stdout.
    Fetch {
        #[command(flatten)]
        common: Common,
        /// The version. Default: the highest in the store.
        #[arg(long)]
        seq: Option<u64>,
        /// Write here instead of stdout (stdout must not be a terminal).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Decode one version as an open does; exit 1 if it does not decode.
    Check {
        #[command(flatten)]
        common: Common,
        /// The version. Default: the highest in the store.
        #[arg(long)]
        seq: Option<u64>,
    },
}

/// What every `manifest` command takes.
#[derive(Debug, clap::Args)]
struct Common {
    /// The shard directory (its key file names the shard's objects).
    #[arg(required_unless_present = "key")]
    path: Option<PathBuf>,
    /// The shard's key instead of its directory, for a shard whose local
    /// directory is gone or unreadable.
    #[arg(
        long,
        num_args = 4,
        value_names = ["TENANT", "NAMESPACE", "STREAM", "SHARD"],
        conflicts_with = "path"
    )]
    key: Option<Vec<String>>,
    #[command(flatten)]
    remote: RemoteArgs,
    /// Print JSON lines.
    #[arg(long)]
    json: bool,
}

impl Common {
    fn open(&self) -> Result<(Opened, ShardKey), CliError> {
        let Some(opened) = self.remote.open()? else {
            return Err(CliError::Usage(
                "manifest needs --remote URL (file:///DIR or s3://BUCKET[/PREFIX])".into(),
            ));
        };
        let key = match (&self.key, &self.path) {
            (Some(parts), _) => key_from_parts(parts)?,
            (None, Some(path)) => shard_key(path)?,
            (None, None) => {
                return Err(CliError::Usage(
                    "manifest needs a shard directory or --key".into(),
                ));
            }
        };
        Ok((opened, key))
    }
}

/// The key `--key TENANT NAMESPACE STREAM SHARD` names.
pub(crate) fn key_from_parts(parts: &[String]) -> Result<ShardKey, CliError> {
    let [tenant, namespace, stream, shard] = parts else {
        return Err(CliError::Usage(
            "--key takes four values: TENANT NAMESPACE STREAM SHARD".into(),
        ));
    };
    let shard: u32 = shard
        .parse()
        .map_err(|_| CliError::Usage(format!("--key: the shard number {shard:?} is not a u32")))?;
    Ok(ShardKey::new(tenant, namespace, stream, shard))
}

/// The exact key in `dir`'s key file.
fn shard_key(dir: &Path) -> Result<ShardKey, CliError> {
    let path = dir.join(KEY_FILE_NAME);
    let bytes = std::fs::read(&path).map_err(|e| CliError::io("read key file", &path, e))?;
    let view = decode_key_file(&bytes).map_err(|e| {
        CliError::Usage(format!(
            "{}: the key file does not decode ({e}); the shard's objects cannot be named",
            path.display()
        ))
    })?;
    Ok(view.to_key())
}

/// Runs `manifest`.
pub(crate) fn run(args: Args, out: &mut Out) -> Result<Outcome, CliError> {
    match args.command {
        Command::List { common, seq } => list(&common, seq, out),
        Command::Fetch {
            common,
            seq,
            output,
        } => fetch(&common, seq, output.as_deref(), out),
        Command::Check { common, seq } => check(&common, seq, out),
    }
}

fn store_error(opened: &Opened, error: felix_tiered::TieredError) -> CliError {
    CliError::Remote {
        url: opened.url.clone(),
        error: Box::new(error),
    }
}

fn list(common: &Common, seq: Option<u64>, out: &mut Out) -> Result<Outcome, CliError> {
    let (opened, key) = common.open()?;
    let shard = opened.shard(&key);
    let versions = opened
        .block_on(shard.manifests())
        .map_err(|e| store_error(&opened, e))?;
    if let Some(seq) = seq
        && !versions.iter().any(|v| v.seq == seq)
    {
        return Err(CliError::Usage(format!(
            "shard {key}: no manifest version {seq} under {}/ in {} ({})",
            shard.base(),
            opened.url,
            match (versions.first(), versions.last()) {
                (Some(first), Some(last)) => format!(
                    "{} version{} from {} to {}",
                    versions.len(),
                    if versions.len() == 1 { "" } else { "s" },
                    first.seq,
                    last.seq
                ),
                _ => "none at all: nothing offloaded".to_owned(),
            }
        )));
    }
    if !common.json {
        out.line(format!(
            "shard {key}: {} manifest version{} under {}/ in {}{}",
            versions.len(),
            if versions.len() == 1 { "" } else { "s" },
            shard.base(),
            opened.url,
            match seq {
                Some(seq) => format!(", version {seq} shown"),
                None => String::new(),
            }
        ))?;
    }
    let mut outcome = Outcome::Success;
    let mut in_force = false;
    for v in versions.iter().rev() {
        let checked = opened.block_on(shard.check(v.seq));
        // The newest that decodes is the one a tier opening the shard uses.
        let newest_good = checked.is_ok() && !in_force;
        in_force |= checked.is_ok();
        if let Err(e) = &checked {
            // An older damaged version is passed over by an open; only
            // when nothing decodes does the shard refuse to open.
            if !in_force {
                outcome = outcome.and(outcome_of(e));
            }
        }
        if seq.is_some_and(|seq| seq != v.seq) {
            continue;
        }
        if common.json {
            out.json(&json!({
                "seq": v.seq,
                "object": v.object.to_string(),
                "bytes": v.size,
                "in_force": newest_good,
                "manifest": checked.as_ref().ok().map_or(Value::Null, manifest_json),
                "error": checked.as_ref().err().map_or(Value::Null, |e| chain(e).into()),
            }))?;
        } else {
            let what = match &checked {
                Ok(m) => format!(
                    "{}{}",
                    describe(m),
                    if newest_good { " (in force)" } else { "" }
                ),
                Err(e) => format!("DAMAGED: {}", chain(e)),
            };
            out.line(format!("  {:020}  {:>8} bytes  {what}", v.seq, v.size))?;
        }
    }
    if in_force {
        // Damage in a version older than the one in force stops nothing.
        outcome = Outcome::Success;
    }
    Ok(outcome)
}

fn describe(m: &Manifest) -> String {
    format!(
        "offsets {}..{}, {} segment{}",
        m.start_offset,
        m.next_offset(),
        m.segments.len(),
        if m.segments.len() == 1 { "" } else { "s" }
    )
}

fn manifest_json(m: &Manifest) -> Value {
    json!({
        "seq": m.seq,
        "start_offset": m.start_offset,
        "next_offset": m.next_offset(),
        "segments": m.segments.iter().map(|s| json!({
            "id": s.extent.id,
            "base_offset": s.extent.base_offset,
            "next_offset": s.extent.next_offset,
            "bytes": s.extent.len,
            "index_bytes": s.index_len,
            "time_index_bytes": s.time_index_len,
            "max_timestamp_micros": s.max_timestamp_micros,
            "upload": format!("{:016x}", s.upload),
            "segment_crc": format!("{:08x}", s.segment_crc),
            "index_crc": format!("{:08x}", s.index_crc),
            "time_index_crc": format!("{:08x}", s.time_index_crc),
        })).collect::<Vec<_>>(),
    })
}

/// The version `seq` names, or the highest in the store.
fn pick(opened: &Opened, key: &ShardKey, seq: Option<u64>) -> Result<u64, CliError> {
    if let Some(seq) = seq {
        return Ok(seq);
    }
    let versions = opened
        .block_on(opened.shard(key).manifests())
        .map_err(|e| store_error(opened, e))?;
    versions.last().map(|v| v.seq).ok_or_else(|| {
        CliError::Usage(format!(
            "shard {key}: no manifest in {} (nothing offloaded)",
            opened.url
        ))
    })
}

fn fetch(
    common: &Common,
    seq: Option<u64>,
    output: Option<&Path>,
    out: &mut Out,
) -> Result<Outcome, CliError> {
    let (opened, key) = common.open()?;
    let seq = pick(&opened, &key, seq)?;
    if output.is_none() && std::io::stdout().is_terminal() {
        return Err(CliError::Usage(
            "manifest fetch writes binary: name a file with --output, or redirect stdout".into(),
        ));
    }
    let bytes = opened
        .block_on(opened.shard(&key).fetch(seq))
        .map_err(|e| store_error(&opened, e))?;
    match output {
        Some(path) => {
            std::fs::write(path, &bytes).map_err(|e| CliError::io("write", path, e))?;
            if common.json {
                out.json(&json!({ "seq": seq, "bytes": bytes.len(), "output": path.display().to_string() }))?;
            } else {
                out.line(format!(
                    "manifest {seq}: {} bytes written to {}",
                    bytes.len(),
                    path.display()
                ))?;
            }
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .map_err(CliError::Output)?;
        }
    }
    Ok(Outcome::Success)
}

fn check(common: &Common, seq: Option<u64>, out: &mut Out) -> Result<Outcome, CliError> {
    let (opened, key) = common.open()?;
    let seq = pick(&opened, &key, seq)?;
    match opened.block_on(opened.shard(&key).check(seq)) {
        Ok(m) => {
            if common.json {
                out.json(&json!({ "seq": seq, "ok": true, "manifest": manifest_json(&m) }))?;
            } else {
                out.line(format!(
                    "manifest {seq} of shard {key}: ok, {}",
                    describe(&m)
                ))?;
                out.line(format!(
                    "  {:<20}  {:>10}  {:>10}  {:>12}  {:>8}  {:>8}  {:<16}  crc log/index/time",
                    "segment", "base", "next", "bytes", "index", "time", "upload"
                ))?;
                for s in &m.segments {
                    out.line(format!(
                        "  {:020}  {:>10}  {:>10}  {:>12}  {:>8}  {:>8}  {:016x}  {:08x}/{:08x}/{:08x}",
                        s.extent.id,
                        s.extent.base_offset,
                        s.extent.next_offset,
                        s.extent.len,
                        s.index_len,
                        s.time_index_len,
                        s.upload,
                        s.segment_crc,
                        s.index_crc,
                        s.time_index_crc,
                    ))?;
                }
            }
            Ok(Outcome::Success)
        }
        Err(e) => {
            let outcome = outcome_of(&e);
            if outcome == Outcome::Failed {
                return Err(store_error(&opened, e));
            }
            if common.json {
                out.json(&json!({ "seq": seq, "ok": false, "error": chain(&e) }))?;
            } else {
                out.line(format!(
                    "manifest {seq} of shard {key}: DAMAGED: {}",
                    chain(&e)
                ))?;
            }
            Ok(outcome)
        }
    }
}
