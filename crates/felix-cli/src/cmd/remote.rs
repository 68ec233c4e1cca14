//! `--remote`: where a tiered shard's remote copy is, and the remote parts
//! of `stat` and `verify`.
//!
//! A remote is named by URL: `file:///DIR` is a local-directory object
//! store rooted at DIR; `s3://BUCKET[/PREFIX]` is an S3 bucket, reached at
//! `--s3-endpoint` (default: AWS's endpoint for the region), signed with
//! `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, in region `AWS_REGION`
//! (default `us-east-1`). The tier prefix (`TierConfig::prefix`) is the
//! URL's path after the bucket for S3, or `--tier-prefix`, default `felix`.
//! Everything the commands read goes through felix-tiered's `RemoteShard`:
//! this module only parses the URL and prints.

use std::time::Duration;

use felix_format::ShardKey;
use felix_format::tier_manifest::Manifest;
use felix_recovery::Inspection;
use felix_tiered::{RemoteFinding, RemoteShard, S3Endpoint, TierConfig, TieredError, stores};
use serde_json::{Value, json};

use crate::error::{CliError, Outcome};
use crate::output::Out;

/// The arguments naming a remote, shared by `stat`, `verify` and
/// `manifest`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RemoteArgs {
    /// The tiered shard's object store: `file:///DIR` (a local-directory
    /// store) or `s3://BUCKET[/PREFIX]` (credentials from AWS_ACCESS_KEY_ID
    /// and AWS_SECRET_ACCESS_KEY, region from AWS_REGION, default
    /// us-east-1).
    #[arg(long, value_name = "URL")]
    pub(crate) remote: Option<String>,
    /// The S3 endpoint, e.g. `http://127.0.0.1:9000` for a local
    /// S3-compatible server. Default: AWS's endpoint for the region.
    #[arg(long, value_name = "URL", requires = "remote")]
    pub(crate) s3_endpoint: Option<String>,
    /// The prefix the tier's objects are under (the tier configuration's
    /// prefix). Default `felix`, or the path after the bucket of an
    /// `s3://` URL.
    #[arg(long, value_name = "PREFIX", requires = "remote")]
    pub(crate) tier_prefix: Option<String>,
}

/// A remote store, opened.
pub(crate) struct Opened {
    /// The URL as given, for reports.
    pub(crate) url: String,
    store: felix_tiered::TierStore,
    prefix: String,
    runtime: tokio::runtime::Runtime,
}

impl RemoteArgs {
    /// The store the URL names, or `None` without `--remote`.
    pub(crate) fn open(&self) -> Result<Option<Opened>, CliError> {
        let Some(url) = &self.remote else {
            return Ok(None);
        };
        let usage = |m: String| CliError::Usage(m);
        let (store, url_prefix) = if let Some(dir) = url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(usage(format!(
                    "--remote {url}: a file URL names an absolute directory, file:///DIR"
                )));
            }
            let store = stores::local_dir(std::path::Path::new(dir))
                .map_err(|e| usage(format!("--remote {url}: {}", chain(&e))))?;
            (store, None)
        } else if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(usage(format!(
                    "--remote {url}: an S3 URL names a bucket, s3://BUCKET[/PREFIX]"
                )));
            }
            let var = |name: &str| {
                std::env::var(name).map_err(|_| {
                    usage(format!(
                        "--remote {url}: {name} is not set (S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
                    ))
                })
            };
            let region = std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into());
            let endpoint = self
                .s3_endpoint
                .clone()
                .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
            let mut s3 = S3Endpoint::new(
                &endpoint,
                bucket,
                &var("AWS_ACCESS_KEY_ID")?,
                &var("AWS_SECRET_ACCESS_KEY")?,
            );
            s3.region = region;
            s3.request_timeout = Duration::from_secs(60);
            let store =
                stores::s3(&s3).map_err(|e| usage(format!("--remote {url}: {}", chain(&e))))?;
            let prefix = prefix.trim_end_matches('/');
            (store, (!prefix.is_empty()).then(|| prefix.to_owned()))
        } else {
            return Err(usage(format!(
                "--remote {url}: expected file:///DIR or s3://BUCKET[/PREFIX]"
            )));
        };
        if self.s3_endpoint.is_some() && !url.starts_with("s3://") {
            return Err(usage(format!(
                "--s3-endpoint is for s3:// remotes, not {url}"
            )));
        }
        let prefix = match (url_prefix, self.tier_prefix.clone()) {
            (Some(_), Some(_)) => {
                return Err(usage(format!(
                    "--remote {url} names a prefix already; drop --tier-prefix"
                )));
            }
            (Some(p), None) | (None, Some(p)) => p,
            (None, None) => TierConfig::default().prefix,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| CliError::io("start the async runtime", "-", e))?;
        Ok(Some(Opened {
            url: url.clone(),
            store,
            prefix,
            runtime,
        }))
    }
}

impl Opened {
    /// The shard `key`'s objects in this store.
    pub(crate) fn shard(&self, key: &ShardKey) -> RemoteShard {
        RemoteShard::new(self.store.clone(), &self.prefix, key)
    }

    /// Runs one of felix-tiered's calls to completion.
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// An error with its sources on one line, `a: b: c`, as the operator needs
/// the cause, each fact once: a source whose text the line holds already is
/// left out. `object_store`'s errors print their sources inside their own
/// text (the request's URL, the server's answer), so without this rule one
/// error would print them two or three times over. A server's answer
/// spanning lines (an XML body) is joined into the one line.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let one_line = |text: String| {
        if !text.contains('\n') {
            return text;
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines.join(" ")
    };
    let mut text = one_line(err.to_string());
    let mut source = err.source();
    while let Some(s) = source {
        let said = one_line(s.to_string());
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = s.source();
    }
    text
}

/// Whether `err` is damage in the store (exit 1) rather than a failure to
/// reach it (exit 2).
pub(crate) fn is_damage(err: &TieredError) -> bool {
    matches!(
        err,
        TieredError::Manifest { .. }
            | TieredError::ManifestSeq { .. }
            | TieredError::KeyMismatch { .. }
            | TieredError::RemoteCorrupt { .. }
            | TieredError::RemoteLength { .. }
            | TieredError::RemoteChecksum { .. }
            | TieredError::RemoteExtent { .. }
            | TieredError::RemoteMissing { .. }
            | TieredError::HeldNowhere { .. }
    )
}

/// The outcome an error reaching the remote copy means.
pub(crate) fn outcome_of(err: &TieredError) -> Outcome {
    if is_damage(err) {
        Outcome::Damage
    } else {
        Outcome::Failed
    }
}

/// What the store holds for one shard, as `stat` and `verify` show it.
pub(crate) enum Found {
    /// The shard has no key file, so its objects cannot be named.
    NoKey,
    /// No manifest: nothing offloaded.
    Nothing,
    /// The manifest a tier would use.
    Manifest(Manifest),
    /// The store could not be read, or no manifest decodes.
    Error(TieredError),
}

impl Found {
    /// Loads shard `key`'s newest manifest.
    pub(crate) fn load(opened: &Opened, key: Option<&ShardKey>) -> Self {
        let Some(key) = key else {
            return Found::NoKey;
        };
        match opened.block_on(opened.shard(key).newest()) {
            Ok(Some(m)) => Found::Manifest(m),
            Ok(None) => Found::Nothing,
            Err(e) => Found::Error(e),
        }
    }

    /// The exit status it implies on its own.
    pub(crate) fn outcome(&self) -> Outcome {
        match self {
            Found::NoKey => Outcome::Failed,
            Found::Nothing | Found::Manifest(_) => Outcome::Success,
            Found::Error(e) => outcome_of(e),
        }
    }
}

/// Whether the remote copy holds every record an offload deleted locally
/// (felix-tiered's [`held_nowhere`](felix_tiered::held_nowhere), the rule
/// a tiered open applies): the offsets in neither copy as an error, or
/// `None`. Nothing is said when the store could not be read or the shard
/// has no key.
pub(crate) fn held_nowhere(found: &Found, inspection: &Inspection) -> Option<TieredError> {
    let key = inspection.key.as_ref()?;
    let manifest = match found {
        Found::Manifest(m) => Some(m),
        Found::Nothing => None,
        Found::NoKey | Found::Error(_) => return None,
    };
    felix_tiered::held_nowhere(key, manifest, inspection.log_start.as_ref()).err()
}

/// Tells on stderr what kept the remote copy from being read (exit 2 comes
/// with a message there): the manifest, or any listed object, that could
/// not be fetched. Stdout is flushed first, so the two read in order.
pub(crate) fn tell_failures(
    out: &mut Out,
    shard: &str,
    opened: &Opened,
    found: &Found,
    findings: &[RemoteFinding],
) -> Result<(), CliError> {
    let mut lines = Vec::new();
    match found {
        Found::Error(e) if !is_damage(e) => lines.push(chain(e)),
        Found::NoKey => {
            lines.push("the shard has no key file, so its objects cannot be named".to_owned())
        }
        _ => {}
    }
    for f in findings.iter().filter(|f| !is_damage(&f.error)) {
        lines.push(format!(
            "segment {:020} {}: {}",
            f.segment,
            kind_name(f.kind),
            chain(&f.error)
        ));
    }
    if !lines.is_empty() {
        out.flush()?;
    }
    for line in lines {
        eprintln!("felix-store: shard {shard}: remote {}: {line}", opened.url);
    }
    Ok(())
}

/// Bytes of a manifest's segments (their `.log` objects).
fn remote_bytes(m: &Manifest) -> u64 {
    m.segments.iter().map(|s| s.extent.len).sum()
}

/// The remote summary line of `stat` and `verify`, and with `gap` (what
/// [`held_nowhere`] found) the line naming the offsets held nowhere.
pub(crate) fn summary_lines(opened: &Opened, found: &Found, gap: Option<&TieredError>) -> String {
    let summary = summary_line(opened, found, gap.is_some());
    match gap {
        Some(gap) => format!("{summary}\n  REMOTE DAMAGED: {gap}"),
        None => summary,
    }
}

fn summary_line(opened: &Opened, found: &Found, gap: bool) -> String {
    match found {
        Found::NoKey => format!(
            "  remote {}: the shard has no key file, so its objects cannot be named",
            opened.url
        ),
        Found::Nothing if gap => format!("  remote {}: no manifest", opened.url),
        Found::Nothing => format!("  remote {}: no manifest (nothing offloaded)", opened.url),
        Found::Manifest(m) => format!(
            "  remote {}: manifest {}, offsets {}..{}, {} segment{}, {} bytes",
            opened.url,
            m.seq,
            m.start_offset,
            m.next_offset(),
            m.segments.len(),
            if m.segments.len() == 1 { "" } else { "s" },
            remote_bytes(m)
        ),
        Found::Error(e) => format!("  remote {}: {}", opened.url, chain(e)),
    }
}

/// `stat`'s table of remote segments.
pub(crate) fn print_segments(out: &mut Out, m: &Manifest) -> Result<(), CliError> {
    out.line(format!(
        "  {:<20}  {:>10}  {:>10}  {:>10}  {:>12}  upload",
        "remote segment", "base", "next", "records", "bytes"
    ))?;
    for s in &m.segments {
        out.line(format!(
            "  {:<20}  {:>10}  {:>10}  {:>10}  {:>12}  {:016x}",
            format!("{:020}", s.extent.id),
            s.extent.base_offset,
            s.extent.next_offset,
            s.extent.next_offset - s.extent.base_offset,
            s.extent.len,
            s.upload,
        ))?;
    }
    Ok(())
}

/// The `"remote"` field of a `--json` line: with `gap`, `"held_nowhere"`
/// says which offsets are in neither copy (`{"start", "end", "detail"}`,
/// otherwise `null`).
pub(crate) fn json(
    opened: &Opened,
    found: &Found,
    gap: Option<&TieredError>,
    findings: Option<&[RemoteFinding]>,
) -> Value {
    let mut v = match found {
        Found::NoKey => json!({ "error": "no key file" }),
        Found::Nothing => json!({ "manifest_seq": null }),
        Found::Manifest(m) => json!({
            "manifest_seq": m.seq,
            "start_offset": m.start_offset,
            "next_offset": m.next_offset(),
            "bytes": remote_bytes(m),
            "segments": m.segments.iter().map(|s| json!({
                "id": s.extent.id,
                "base_offset": s.extent.base_offset,
                "next_offset": s.extent.next_offset,
                "bytes": s.extent.len,
                "upload": format!("{:016x}", s.upload),
            })).collect::<Vec<_>>(),
        }),
        Found::Error(e) => json!({ "error": chain(e), "damage": is_damage(e) }),
    };
    if let Value::Object(map) = &mut v {
        map.insert("url".into(), opened.url.clone().into());
        let held_nowhere = match gap {
            Some(e @ TieredError::HeldNowhere { missing, .. }) => json!({
                "start": missing.start,
                "end": missing.end,
                "detail": e.to_string(),
            }),
            _ => Value::Null,
        };
        map.insert("held_nowhere".into(), held_nowhere);
        if let Some(findings) = findings {
            map.insert(
                "findings".into(),
                findings.iter().map(finding_json).collect(),
            );
        }
    }
    v
}

/// What a file of a segment is called in reports.
pub(crate) fn kind_name(kind: felix_format::FileKind) -> &'static str {
    match kind {
        felix_format::FileKind::Segment => "log",
        felix_format::FileKind::Index => "index",
        felix_format::FileKind::TimeIndex => "timeindex",
    }
}

fn finding_json(f: &RemoteFinding) -> Value {
    json!({
        "segment": f.segment,
        "object": kind_name(f.kind),
        "damage": is_damage(&f.error),
        "detail": chain(&f.error),
    })
}

/// Checks every segment `m` lists, object by object; returns what is
/// wrong.
pub(crate) fn verify(opened: &Opened, key: &ShardKey, m: &Manifest) -> Vec<RemoteFinding> {
    let shard = opened.shard(key);
    let mut findings = Vec::new();
    for segment in &m.segments {
        findings.extend(opened.block_on(shard.verify_segment(segment)));
    }
    findings
}

/// `verify`'s lines for the remote findings, and the outcome they imply.
pub(crate) fn print_findings(
    out: &mut Out,
    m: &Manifest,
    findings: &[RemoteFinding],
) -> Result<(), CliError> {
    for f in findings {
        out.line(format!(
            "  REMOTE segment {:020} {}: {}",
            f.segment,
            kind_name(f.kind),
            chain(&f.error)
        ))?;
    }
    let damaged = findings.iter().filter(|f| is_damage(&f.error)).count();
    let failed = findings.len() - damaged;
    out.line(format!(
        "  remote: {} segment{} checked ({} objects), {}",
        m.segments.len(),
        if m.segments.len() == 1 { "" } else { "s" },
        m.segments.len() * 3,
        if findings.is_empty() {
            "every object matches its manifest entry and every record its checksum".to_owned()
        } else {
            format!("{damaged} damaged, {failed} unreadable")
        }
    ))
}

/// The exit status remote findings imply.
pub(crate) fn outcome_for(findings: &[RemoteFinding]) -> Outcome {
    findings
        .iter()
        .fold(Outcome::Success, |o, f| o.and(outcome_of(&f.error)))
}

#[cfg(test)]
mod tests {
    use std::fmt;

    /// An error whose text is `text`, caused by `source`.
    #[derive(Debug)]
    struct Said {
        text: &'static str,
        source: Option<Box<Said>>,
    }

    impl fmt::Display for Said {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.text)
        }
    }

    impl std::error::Error for Said {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.source.as_deref().map(|s| s as _)
        }
    }

    fn said(text: &'static str, source: Option<Said>) -> Said {
        Said {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn chain_sources_told_already_are_left_out() {
        // object_store's shape: its error prints its source inside its own
        // text, whose source prints the server's answer again.
        let err = said(
            "object store get of felix/a failed",
            Some(said(
                "Generic S3 error: Error performing GET http://h/b/felix/a - Server returned 503: <Error>Busy</Error>",
                Some(said(
                    "Error performing GET http://h/b/felix/a - Server returned 503: <Error>Busy</Error>",
                    Some(said("<Error>Busy</Error>", None)),
                )),
            )),
        );
        assert_eq!(
            super::chain(&err),
            "object store get of felix/a failed: Generic S3 error: Error performing GET http://h/b/felix/a - Server returned 503: <Error>Busy</Error>"
        );
        // A source with news is still told, after one that was not.
        let err = said("a", Some(said("a", Some(said("connection refused", None)))));
        assert_eq!(super::chain(&err), "a: connection refused");
        // An answer over several lines is one line, and still told once.
        let err = said(
            "list failed: 404: <?xml?>\n<Error>\n  <Code>NoSuchBucket</Code>\n</Error>",
            Some(said(
                "404: <?xml?>\n<Error>\n  <Code>NoSuchBucket</Code>\n</Error>",
                None,
            )),
        );
        assert_eq!(
            super::chain(&err),
            "list failed: 404: <?xml?> <Error> <Code>NoSuchBucket</Code> </Error>"
        );
    }
}
