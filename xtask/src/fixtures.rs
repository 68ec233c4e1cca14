//! The golden fixtures under `fixtures/v2/`: generation, writing, checking.
//!
//! Every byte comes from `felix-format`'s encoders with fixed inputs (no
//! clocks, no randomness), so regenerating is byte-identical and any diff is
//! a format change someone must commit on purpose. Damaged fixtures start from
//! the clean shard and change one thing each; the few that need a wrong field
//! under a valid CRC are re-sealed by `crc.rs`, and every case is decoded
//! again here to prove it fails with the intended variant at the intended
//! byte before anything is written.
//!
//! `fixtures/v2/` is wholly generated: writing removes files it no longer
//! produces, so the directory never keeps a stale case around.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::Path;

use felix_format::epochs::{EpochEntry, decode_epochs};
use felix_format::key_file::decode_key_file;
use felix_format::log_start::decode_log_start;
use felix_format::raft_snapshot::decode_raft_snapshot;
use felix_format::raft_state::decode_raft_state;
use felix_format::time_index::decode_time_index;
use felix_format::{
    IndexEntry, IndexHeader, SegmentHeader, decode_record, encode_index_entry, encode_record_header,
};

use crate::crc::{crc32, crc32_pair};
use crate::hexdump::{self, Layout};
use crate::shard::{self, Failure};

mod cases;
mod key_file;
mod log_start;
mod raft_snapshot;
mod raft_state;
mod readme;
mod tier_manifest;
mod time_index;

/// Where the fixtures live, relative to the workspace root.
pub const FIXTURES_DIR: &str = "fixtures/v2";

/// Creation time of every generated segment (2023-11-14T22:13:20Z), fixed so
/// that regeneration is byte-identical.
pub const CREATED_AT_MICROS: u64 = 1_700_000_000_000_000;
/// Records in the clean shard: enough for several index entries and a tail.
pub const SMALL_SHARD_RECORDS: u64 = 5;
/// Index spacing of the clean shard: small, so five records give three
/// entries and a reader's binary search has something to search.
pub const INDEX_SPACING_BYTES: u64 = 128;
/// The clean shard's generation history: generation 1 wrote offsets 0..=1,
/// generation 3 (2 never wrote) took over at offset 2.
pub const EPOCHS: [EpochEntry; 2] = [
    EpochEntry {
        generation: 1,
        start_offset: 0,
    },
    EpochEntry {
        generation: 3,
        start_offset: 2,
    },
];

/// Generated files by path relative to [`FIXTURES_DIR`] (`/`-separated).
pub type FileSet = BTreeMap<String, Vec<u8>>;

/// Publish time of the record at `offset`: 1 ms apart, after creation.
fn timestamp_micros(offset: u64) -> u64 {
    CREATED_AT_MICROS + 1_000 * (offset + 1)
}

/// The payload of the record at `offset`, by the interop corpus's rule
/// (`felix-record-` + 20-digit offset + `-`, then `(offset % 251 + i) % 256`
/// for byte `i`), so one content check serves both corpora. Lengths differ
/// per record (34 + 6 × offset) so a reader assuming fixed sizes fails.
fn payload(offset: u64) -> Vec<u8> {
    let len = 34 + 6 * offset as usize;
    let mut bytes = format!("felix-record-{offset:020}-").into_bytes();
    // `% 256` is the rule; the cast performs it.
    bytes.extend((34..len).map(|i| ((offset % 251) as usize + i) as u8));
    bytes
}

/// A generated segment and where each record begins.
struct Segment {
    /// The base offset its header (and its index's) holds.
    base_offset: u64,
    bytes: Vec<u8>,
    /// `(offset, byte position)` of each record.
    records: Vec<(u64, usize)>,
}

impl Segment {
    /// The clean v2 segment every other case starts from.
    fn small() -> Result<Self, String> {
        Self::rebased(0)
    }

    /// small-shard's records — the same payloads and timestamps, so the
    /// same bytes at the same positions but for the offsets and the CRCs
    /// that cover them — at offsets `base_offset..`. The encoder writes any
    /// offset it is given: keeping `u64::MAX` off disk is the writers' rule,
    /// which is what lets a fixture carry it.
    fn rebased(base_offset: u64) -> Result<Self, String> {
        let mut bytes = SegmentHeader::new(base_offset, CREATED_AT_MICROS)
            .encode()
            .to_vec();
        let mut records = Vec::new();
        for i in 0..SMALL_SHARD_RECORDS {
            let offset = base_offset.wrapping_add(i);
            records.push((offset, bytes.len()));
            let body = payload(i);
            let header = encode_record_header(offset, timestamp_micros(i), &body)
                .map_err(|kind| format!("encode_record_header({offset}): {kind}"))?;
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(&body);
        }
        Ok(Self {
            base_offset,
            bytes,
            records,
        })
    }

    /// The same records in the unreleased v1 layout: version 1 in the
    /// header, 24-byte record headers without `header_crc`, the checksum
    /// over bytes 0..20 and the payload. felix-format has no v1 encoder (it
    /// must never write one), so this is built by hand.
    fn v1() -> Self {
        let mut bytes = SegmentHeader::new(0, CREATED_AT_MICROS).encode().to_vec();
        put(&mut bytes, 4, &1u16.to_be_bytes());
        reseal_segment_header(&mut bytes);
        let mut records = Vec::new();
        for offset in 0..SMALL_SHARD_RECORDS {
            records.push((offset, bytes.len()));
            let body = payload(offset);
            let mut header = (body.len() as u32).to_be_bytes().to_vec();
            header.extend_from_slice(&offset.to_be_bytes());
            header.extend_from_slice(&timestamp_micros(offset).to_be_bytes());
            let checksum = crc32_pair(&header, &body);
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(&checksum.to_be_bytes());
            bytes.extend_from_slice(&body);
        }
        Self {
            base_offset: 0,
            bytes,
            records,
        }
    }

    /// Byte position of the newest record, where tail damage goes.
    fn last_position(&self) -> usize {
        self.records.last().map_or(0, |&(_, at)| at)
    }

    /// The entries a writer with [`INDEX_SPACING_BYTES`] emits: the first
    /// record, then each record at least that many bytes past the previous
    /// entry (the rule the interop corpus was written with).
    fn index_entries(&self) -> Vec<IndexEntry> {
        let mut entries: Vec<IndexEntry> = Vec::new();
        for &(offset, at) in &self.records {
            let position = at as u64;
            if entries
                .last()
                .is_none_or(|e| position - e.position >= INDEX_SPACING_BYTES)
            {
                entries.push(IndexEntry { offset, position });
            }
        }
        entries
    }

    /// The segment's index file.
    fn index(&self) -> Vec<u8> {
        index_bytes(self.base_offset, &self.index_entries())
    }
}

fn index_bytes(base_offset: u64, entries: &[IndexEntry]) -> Vec<u8> {
    let mut bytes = IndexHeader { base_offset }.encode().to_vec();
    for &entry in entries {
        bytes.extend_from_slice(&encode_index_entry(entry));
    }
    bytes
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

/// Recomputes a segment header's CRC after a deliberate edit, so the edit is
/// the header's only defect.
fn reseal_segment_header(bytes: &mut [u8]) {
    let crc = crc32(&bytes[..24]);
    put(bytes, 24, &crc.to_be_bytes());
}

/// What a reader must report for a case; checked before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The segment fails with this variant, the damaged structure beginning
    /// at `position`.
    Segment {
        variant: &'static str,
        position: usize,
    },
    /// The segment is clean; its index fails with this variant.
    Index { variant: &'static str },
    /// Everything decodes.
    Clean,
    /// The key file fails with this variant (`SideFileError::name`).
    KeyFile { variant: &'static str },
    /// A time index file alone, for small-shard's segment: it fails to
    /// decode with this
    /// variant (`SideFileError::name`), or decodes and is
    /// `TimeIndexStale` (another extent) or `TimeIndexWrong` (entries the
    /// records do not give).
    TimeIndex { variant: &'static str },
    /// A log-start file alone: it fails with this variant
    /// (`SideFileError::name`).
    LogStart { variant: &'static str },
    /// A tiered manifest object alone: it fails with this variant
    /// (`SideFileError::name`).
    TierManifest { variant: &'static str },
    /// A raft-state file alone: it fails with this variant
    /// (`SideFileError::name`).
    RaftState { variant: &'static str },
    /// A raft-snapshot file alone: it fails with this variant
    /// (`SideFileError::name`).
    RaftSnapshot { variant: &'static str },
}

/// One directory of fixtures and what it is for.
struct Case {
    /// Directory relative to [`FIXTURES_DIR`]; empty for top-level files.
    dir: String,
    /// `(file name, bytes, layout)`.
    files: Vec<(String, Vec<u8>, Layout)>,
    /// What was changed and where, in bytes.
    damage: String,
    /// What recovery should make of it (implemented in felix-recovery).
    recovery: String,
    expect: Expect,
}

impl Case {
    fn path(&self, name: &str) -> String {
        if self.dir.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.dir)
        }
    }

    fn file(&self, layout: Layout) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|(_, _, l)| *l == layout)
            .map(|(_, bytes, _)| bytes.as_slice())
    }
}

/// Every fixture file, README and manifest included, in memory.
pub fn generate() -> Result<FileSet, String> {
    let small = Segment::small()?;
    let mut cases = cases::all(&small)?;
    cases.extend(key_file::all()?);
    cases.extend(time_index::all(&small)?);
    cases.extend(log_start::all(&small)?);
    cases.extend(tier_manifest::all()?);
    cases.extend(raft_state::all(&small)?);
    cases.extend(raft_snapshot::all()?);
    let mut files = FileSet::new();
    for case in &cases {
        verify(case)?;
        let segment = case.file(Layout::Segment);
        for (name, bytes, layout) in &case.files {
            let path = case.path(name);
            let dump = hexdump::render(&path, bytes, *layout, segment);
            files.insert(format!("{path}.hex.txt"), dump.into_bytes());
            files.insert(path, bytes.clone());
        }
    }
    files.insert(
        "README.md".into(),
        readme::render(&cases, &small).into_bytes(),
    );
    files.insert("manifest.tsv".into(), manifest(&cases).into_bytes());
    // `--check` compares bytes, so no checkout may convert line endings.
    files.insert(
        ".gitattributes".into(),
        b"# Generated by `cargo xtask fixtures`: compared byte for byte, never converted.\n* -text\n"
            .to_vec(),
    );
    Ok(files)
}

/// Proves a case decodes the way it is documented to.
fn verify(case: &Case) -> Result<(), String> {
    let bug = |what: String| Err(format!("fixture generator bug in `{}`: {what}", case.dir));
    let log = case.file(Layout::Segment).unwrap_or_default();
    match case.expect {
        Expect::Segment { variant, position } => match shard::scan_segment(log) {
            Err(Failure { position: at, kind })
                if kind.name() == variant && at == position as u64 =>
            {
                Ok(())
            }
            other => bug(format!(
                "should fail with {variant} at byte {position}, decodes as {other:?}"
            )),
        },
        Expect::Index { variant } => {
            let index = case.file(Layout::Index).unwrap_or_default();
            match (shard::scan_segment(log), shard::load_index(index, log)) {
                (Ok(_), Err(kind)) if kind.name() == variant => Ok(()),
                (scan, loaded) => bug(format!(
                    "index should fail with {variant}: segment {scan:?}, index {loaded:?}"
                )),
            }
        }
        Expect::KeyFile { variant } => {
            let bytes = case.file(Layout::KeyFile).unwrap_or_default();
            match decode_key_file(bytes) {
                Err(err) if err.name() == variant => Ok(()),
                other => bug(format!(
                    "key file should fail with {variant}, decodes as {other:?}"
                )),
            }
        }
        Expect::TimeIndex { variant } => {
            let bytes = case.file(Layout::TimeIndex).unwrap_or_default();
            let small = Segment::small()?;
            let found = match decode_time_index(bytes) {
                Err(err) => err.name(),
                Ok(view) if view.header != time_index::golden_header(&small) => "TimeIndexStale",
                Ok(view) if view.iter().ne(time_index::golden_entries(&small)) => "TimeIndexWrong",
                Ok(_) => "ok",
            };
            if found == variant {
                Ok(())
            } else {
                bug(format!("time index should be {variant}, is {found}"))
            }
        }
        Expect::LogStart { variant } => {
            let bytes = case.file(Layout::LogStart).unwrap_or_default();
            match decode_log_start(bytes) {
                Err(err) if err.name() == variant => Ok(()),
                decoded => bug(format!(
                    "log-start file should fail with {variant}, decodes as {decoded:?}"
                )),
            }
        }
        Expect::TierManifest { variant } => {
            let bytes = case.file(Layout::TierManifest).unwrap_or_default();
            match felix_format::tier_manifest::decode_manifest(bytes) {
                Err(err) if err.name() == variant => Ok(()),
                decoded => bug(format!(
                    "manifest should fail with {variant}, decodes as {decoded:?}"
                )),
            }
        }
        Expect::RaftState { variant } => {
            let bytes = case.file(Layout::RaftState).unwrap_or_default();
            match decode_raft_state(bytes) {
                Err(err) if err.name() == variant => Ok(()),
                decoded => bug(format!(
                    "raft-state file should fail with {variant}, decodes as {decoded:?}"
                )),
            }
        }
        Expect::RaftSnapshot { variant } => {
            let bytes = case.file(Layout::RaftSnapshot).unwrap_or_default();
            match decode_raft_snapshot(bytes) {
                Err(err) if err.name() == variant => Ok(()),
                decoded => bug(format!(
                    "raft-snapshot file should fail with {variant}, decodes as {decoded:?}"
                )),
            }
        }
        Expect::Clean => {
            for (name, bytes, layout) in &case.files {
                let text = verdict(bytes, *layout, log);
                if !text.starts_with("ok") {
                    return bug(format!("{name} should decode: {text}"));
                }
            }
            Ok(())
        }
    }
}

/// One line saying what felix-format's decoders make of a file.
fn verdict(bytes: &[u8], layout: Layout, segment: &[u8]) -> String {
    let failed = |kind: felix_format::CorruptionKind| format!("{}: {kind}", kind.name());
    match layout {
        Layout::SegmentHeader => SegmentHeader::decode(bytes).map_or_else(failed, |h| {
            format!(
                "ok: base_offset {}, created_at_micros {}",
                h.base_offset, h.created_at_micros
            )
        }),
        Layout::Record => decode_record(bytes, None).map_or_else(failed, |r| {
            format!(
                "ok: offset {}, timestamp_micros {}, payload {:?}",
                r.header.offset,
                r.header.timestamp_micros,
                String::from_utf8_lossy(r.payload)
            )
        }),
        Layout::Segment => match shard::scan_segment(bytes) {
            Ok(scan) => scan.to_string(),
            Err(failure) => failure.to_string(),
        },
        Layout::Index => shard::index_verdict(bytes, segment),
        Layout::Epochs => match decode_epochs(bytes) {
            Ok(entries) => format!("ok: {} entries", entries.len()),
            Err(err) => format!("{err:?}: {err}"),
        },
        Layout::KeyFile => match decode_key_file(bytes) {
            Ok(view) => format!("ok: key {}", view.to_key()),
            Err(err) => format!("{}: {err}", err.name()),
        },
        Layout::TimeIndex => match decode_time_index(bytes) {
            Ok(view) => {
                let entries: Vec<String> = view
                    .iter()
                    .map(|e| format!("({}, {})", e.timestamp_micros, e.offset))
                    .collect();
                format!(
                    "ok: offsets {}..{} in {} bytes, {} entries [{}]",
                    view.header.base_offset,
                    view.header.next_offset,
                    view.header.segment_len,
                    entries.len(),
                    entries.join(", ")
                )
            }
            Err(err) => format!("{}: {err}", err.name()),
        },
        Layout::LogStart => match decode_log_start(bytes) {
            Ok(start) => format!(
                "ok: the log begins at offset {}, in segment {} or later{}",
                start.start_offset,
                start.first_segment_id,
                match start.moved_by {
                    felix_format::log_start::MovedBy::Deletion => "",
                    felix_format::log_start::MovedBy::Offload => "; an offload moved it",
                }
            ),
            Err(err) => format!("{}: {err}", err.name()),
        },
        Layout::TierManifest => match felix_format::tier_manifest::decode_manifest(bytes) {
            Ok(view) => format!(
                "ok: seq {}, key {}, remote offsets {}..{} in {} segments",
                view.seq,
                view.key.to_key(),
                view.start_offset,
                view.to_manifest().next_offset(),
                view.len()
            ),
            Err(err) => format!("{}: {err}", err.name()),
        },
        Layout::RaftState => match decode_raft_state(bytes) {
            Ok(state) => format!(
                "ok: vote {:?}, last purged {:?}, committed {:?}, log encoding {}",
                state.vote, state.last_purged, state.committed, state.log_encoding
            ),
            Err(err) => format!("{}: {err}", err.name()),
        },
        Layout::RaftSnapshot => match decode_raft_snapshot(bytes) {
            Ok(snapshot) => format!(
                "ok: last {:?}, membership of {:?}, {} bytes of membership",
                snapshot.last,
                snapshot.membership_id,
                snapshot.membership.len()
            ),
            Err(err) => format!("{}: {err}", err.name()),
        },
    }
}

/// `manifest.tsv`: every binary with its size and its decoder verdict, for
/// tests that want to iterate the fixtures instead of naming each one.
fn manifest(cases: &[Case]) -> String {
    let mut out = String::from(
        "# Generated by `cargo xtask fixtures`; do not edit.\n# path\tbytes\tverdict\n",
    );
    for case in cases {
        let log = case.file(Layout::Segment).unwrap_or_default();
        for (name, bytes, layout) in &case.files {
            let line = format!(
                "{}\t{}\t{}\n",
                case.path(name),
                bytes.len(),
                verdict(bytes, *layout, log)
            );
            out.push_str(&line);
        }
    }
    out
}

/// How the files on disk differ from the generated ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Present on both sides with different bytes.
    pub differs: Vec<String>,
    /// Generated but not on disk.
    pub missing: Vec<String>,
    /// On disk but no longer generated.
    pub extra: Vec<String>,
}

impl Diff {
    /// Compares the generated set with the one on disk.
    pub fn between(generated: &FileSet, on_disk: &FileSet) -> Self {
        let mut diff = Self::default();
        for (path, bytes) in generated {
            match on_disk.get(path) {
                None => diff.missing.push(path.clone()),
                Some(found) if found != bytes => diff.differs.push(path.clone()),
                Some(_) => {}
            }
        }
        diff.extra = on_disk
            .keys()
            .filter(|path| !generated.contains_key(*path))
            .cloned()
            .collect();
        diff
    }

    /// True when disk and generator agree.
    pub fn is_empty(&self) -> bool {
        self.differs.is_empty() && self.missing.is_empty() && self.extra.is_empty()
    }
}

impl Diff {
    /// The paths under `labels` for differing, missing and extra files.
    fn list(&self, labels: [&str; 3]) -> String {
        let mut out = String::new();
        for (label, paths) in labels
            .iter()
            .zip([&self.differs, &self.missing, &self.extra])
        {
            for path in paths {
                out.push_str(&format!("  {label} {FIXTURES_DIR}/{path}\n"));
            }
        }
        out
    }

    /// The same list worded as what [`write()`] did about it.
    pub fn as_written(&self) -> String {
        self.list(["updated", "created", "removed"])
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.list(["differs", "missing", "extra  "]))
    }
}

/// Reads every file under `dir` (absent reads as empty).
pub fn read_tree(dir: &Path) -> Result<FileSet, String> {
    let mut files = FileSet::new();
    if dir.exists() {
        read_into(dir, "", &mut files)?;
    }
    Ok(files)
}

fn read_into(dir: &Path, prefix: &str, files: &mut FileSet) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("read dir {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("read dir {}: {e}", dir.display()))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name
            .to_str()
            .ok_or_else(|| format!("{}: file name is not UTF-8", path.display()))?;
        let relative = format!("{prefix}{name}");
        if path.is_dir() {
            read_into(&path, &format!("{relative}/"), files)?;
        } else {
            let bytes = fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
            files.insert(relative, bytes);
        }
    }
    Ok(())
}

/// Regenerates in memory and compares with `<root>/fixtures/v2`.
///
/// The error is the message for the person who has to act on it.
pub fn check(root: &Path) -> Result<(), String> {
    let generated = generate()?;
    let on_disk = read_tree(&root.join(FIXTURES_DIR))?;
    let diff = Diff::between(&generated, &on_disk);
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{FIXTURES_DIR} is out of date with the generator:\n{diff}run `cargo xtask fixtures` and commit"
        ))
    }
}

/// Writes the fixtures under `<root>/fixtures/v2`, touching only files whose
/// bytes change and removing files no longer generated. Returns what changed.
pub fn write(root: &Path) -> Result<Diff, String> {
    let dir = root.join(FIXTURES_DIR);
    let generated = generate()?;
    let diff = Diff::between(&generated, &read_tree(&dir)?);
    for path in diff.differs.iter().chain(&diff.missing) {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        fs::write(&target, &generated[path])
            .map_err(|e| format!("write {}: {e}", target.display()))?;
    }
    for path in &diff.extra {
        let target = dir.join(path);
        fs::remove_file(&target).map_err(|e| format!("remove {}: {e}", target.display()))?;
        // Drop directories the removal emptied; a non-empty one refuses,
        // which is the stopping condition, not an error.
        let mut parent = target.parent();
        while let Some(p) = parent.filter(|p| *p != dir) {
            if fs::remove_dir(p).is_err() {
                break;
            }
            parent = p.parent();
        }
    }
    Ok(diff)
}

#[cfg(test)]
mod tests;
