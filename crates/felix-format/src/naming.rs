//! Every name a shard directory may hold, and the shard directory's own name.
//!
//! Segment and index files are named by a 20-digit zero-padded segment id, so
//! lexicographic and numeric order agree; readers still parse the number and
//! sort on it, because directory iteration order is filesystem-defined. A
//! file name is a segment id, not an offset: offsets come from headers.
//!
//! The files other layers keep beside the segments (the generation history,
//! the writer's lock, the clean-shutdown record, the shard key, and their
//! temporaries) are named here too, so that one classifier,
//! [`ShardFileName::parse`], says what any entry of a shard directory is.

use alloc::string::String;
use core::fmt;

/// Which file of a segment a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// The segment data file, `*.log`.
    Segment,
    /// The sparse index file, `*.index`.
    Index,
    /// The time index file, `*.timeindex` (see [`crate::time_index`]).
    TimeIndex,
}

impl FileKind {
    /// The extension, without the dot.
    pub const fn extension(self) -> &'static str {
        match self {
            Self::Segment => "log",
            Self::Index => "index",
            Self::TimeIndex => "timeindex",
        }
    }
}

/// Name of the generation history file (felix-epochs owns it).
pub const EPOCHS_FILE_NAME: &str = "epochs";
/// The temporary the history is written to before it is renamed over
/// [`EPOCHS_FILE_NAME`]; one left by a crash is removed on the next load.
pub const EPOCHS_TEMP_FILE_NAME: &str = "epochs.tmp";
/// Name of the lock file earlier releases locked (the shard directory
/// itself is locked now; the file is locked too, for them).
pub const LOCK_FILE_NAME: &str = "lock";
/// Name of the clean-shutdown file (see [`crate::clean`]).
pub const CLEAN_SHUTDOWN_FILE_NAME: &str = "clean-shutdown";
/// The temporary the clean-shutdown file is written to before its rename.
pub const CLEAN_SHUTDOWN_TEMP_FILE_NAME: &str = "clean-shutdown.tmp";
/// Name of the file recording which shard key a directory holds (see
/// [`crate::key_file`]).
pub const KEY_FILE_NAME: &str = "key";
/// The temporary the key file is written to before its rename.
pub const KEY_TEMP_FILE_NAME: &str = "key.tmp";
/// Name of the file recording where the log begins when that is inside a
/// segment or after a reset (see [`crate::log_start`]).
pub const LOG_START_FILE_NAME: &str = "log-start";
/// The temporary the log-start file is written to before its rename.
pub const LOG_START_TEMP_FILE_NAME: &str = "log-start.tmp";
/// Name of the file a Raft log kept in the shard records its vote and its
/// last purged entry in (felix-raft writes it; see [`crate::raft_state`]).
pub const RAFT_STATE_FILE_NAME: &str = "raft-state";
/// The temporary the raft-state file is written to before its rename.
pub const RAFT_STATE_TEMP_FILE_NAME: &str = "raft-state.tmp";
/// Name of the file a Raft log kept in the shard records its snapshot in:
/// the last entry it covers and the membership there (felix-raft writes
/// it; see [`crate::raft_snapshot`]).
pub const RAFT_SNAPSHOT_FILE_NAME: &str = "raft-snapshot";
/// The temporary the raft-snapshot file is written to before its rename.
pub const RAFT_SNAPSHOT_TEMP_FILE_NAME: &str = "raft-snapshot.tmp";
/// What a segment's temporary adds to the segment's name: a new segment's
/// header is written and synced as `{id:020}.log.tmp`, then renamed.
const TEMP_SUFFIX: &str = ".tmp";
/// What a sealed segment's replacement adds to the segment's name: a
/// verified copy is written and synced as `{id:020}.log.copy`, then renamed
/// over the damaged segment.
const COPY_SUFFIX: &str = ".copy";

/// What an entry of a shard directory is, by its name alone.
///
/// Not `#[non_exhaustive]` on purpose: every layer that classifies names
/// matches on it, and a new kind of file must make each of them decide
/// what to do with it.
///
/// ```
/// use felix_format::ShardFileName;
/// assert_eq!(ShardFileName::parse("00000000000000000007.log"), ShardFileName::Segment(7));
/// assert_eq!(ShardFileName::parse("00000000000000000007.log.tmp"), ShardFileName::SegmentTemp(7));
/// assert_eq!(ShardFileName::parse("00000000000000000007.log.copy"), ShardFileName::SegmentCopy(7));
/// assert_eq!(ShardFileName::parse("epochs"), ShardFileName::Epochs);
/// assert_eq!(ShardFileName::parse("operator-backup.log.tmp"), ShardFileName::Other);
/// assert_eq!(ShardFileName::Index(7).file_name().unwrap().as_str(), "00000000000000000007.index");
/// assert_eq!(ShardFileName::KeyTemp.file_name().unwrap().as_str(), "key.tmp");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardFileName {
    /// `{id:020}.log`: a segment's data.
    Segment(u64),
    /// `{id:020}.index`: a segment's sparse index.
    Index(u64),
    /// `{id:020}.timeindex`: a sealed segment's time index.
    TimeIndex(u64),
    /// `{id:020}.log.tmp`: a new segment's header before its rename; it
    /// never holds a record.
    SegmentTemp(u64),
    /// `{id:020}.log.copy`: a verified copy of sealed segment `id` before
    /// it is renamed over the damaged segment (a replacement a crash
    /// interrupted leaves the old segment in place, and this beside it).
    SegmentCopy(u64),
    /// [`EPOCHS_FILE_NAME`]: the generation history.
    Epochs,
    /// [`EPOCHS_TEMP_FILE_NAME`]: the history's temporary.
    EpochsTemp,
    /// [`LOCK_FILE_NAME`]: the lock file of earlier releases.
    Lock,
    /// [`CLEAN_SHUTDOWN_FILE_NAME`]: the clean-shutdown record.
    CleanShutdown,
    /// [`CLEAN_SHUTDOWN_TEMP_FILE_NAME`]: its temporary.
    CleanShutdownTemp,
    /// [`KEY_FILE_NAME`]: the shard key the directory holds.
    Key,
    /// [`KEY_TEMP_FILE_NAME`]: its temporary.
    KeyTemp,
    /// [`LOG_START_FILE_NAME`]: where the log begins.
    LogStart,
    /// [`LOG_START_TEMP_FILE_NAME`]: its temporary.
    LogStartTemp,
    /// [`RAFT_STATE_FILE_NAME`]: a Raft log's vote and last purged id.
    RaftState,
    /// [`RAFT_STATE_TEMP_FILE_NAME`]: its temporary.
    RaftStateTemp,
    /// [`RAFT_SNAPSHOT_FILE_NAME`]: a Raft log's snapshot.
    RaftSnapshot,
    /// [`RAFT_SNAPSHOT_TEMP_FILE_NAME`]: its temporary.
    RaftSnapshotTemp,
    /// Any other name: not ours (a stray), never adopted.
    Other,
}

impl ShardFileName {
    /// Classifies `name`. Only the exact shapes written here are ours:
    /// `7.log`, `operator-backup.log.tmp` and `00000000000000000007.index.tmp`
    /// are [`Self::Other`].
    pub fn parse(name: &str) -> Self {
        match name {
            EPOCHS_FILE_NAME => return Self::Epochs,
            EPOCHS_TEMP_FILE_NAME => return Self::EpochsTemp,
            LOCK_FILE_NAME => return Self::Lock,
            CLEAN_SHUTDOWN_FILE_NAME => return Self::CleanShutdown,
            CLEAN_SHUTDOWN_TEMP_FILE_NAME => return Self::CleanShutdownTemp,
            KEY_FILE_NAME => return Self::Key,
            KEY_TEMP_FILE_NAME => return Self::KeyTemp,
            LOG_START_FILE_NAME => return Self::LogStart,
            LOG_START_TEMP_FILE_NAME => return Self::LogStartTemp,
            RAFT_STATE_FILE_NAME => return Self::RaftState,
            RAFT_STATE_TEMP_FILE_NAME => return Self::RaftStateTemp,
            RAFT_SNAPSHOT_FILE_NAME => return Self::RaftSnapshot,
            RAFT_SNAPSHOT_TEMP_FILE_NAME => return Self::RaftSnapshotTemp,
            _ => {}
        }
        if let Some(segment) = name.strip_suffix(TEMP_SUFFIX) {
            return match parse_id_name(segment) {
                Some((id, FileKind::Segment)) => Self::SegmentTemp(id),
                _ => Self::Other,
            };
        }
        if let Some(segment) = name.strip_suffix(COPY_SUFFIX) {
            return match parse_id_name(segment) {
                Some((id, FileKind::Segment)) => Self::SegmentCopy(id),
                _ => Self::Other,
            };
        }
        match parse_id_name(name) {
            Some((id, FileKind::Segment)) => Self::Segment(id),
            Some((id, FileKind::Index)) => Self::Index(id),
            Some((id, FileKind::TimeIndex)) => Self::TimeIndex(id),
            None => Self::Other,
        }
    }

    /// The name itself, built without allocating; `None` for
    /// [`Self::Other`], which has no one name.
    pub fn file_name(self) -> Option<FileName> {
        let fixed = match self {
            Self::Segment(id) => return Some(file_name(id, FileKind::Segment)),
            Self::Index(id) => return Some(file_name(id, FileKind::Index)),
            Self::TimeIndex(id) => return Some(file_name(id, FileKind::TimeIndex)),
            Self::SegmentTemp(id) => {
                let mut name = file_name(id, FileKind::Segment);
                name.push_str(TEMP_SUFFIX);
                return Some(name);
            }
            Self::SegmentCopy(id) => {
                let mut name = file_name(id, FileKind::Segment);
                name.push_str(COPY_SUFFIX);
                return Some(name);
            }
            Self::Epochs => EPOCHS_FILE_NAME,
            Self::EpochsTemp => EPOCHS_TEMP_FILE_NAME,
            Self::Lock => LOCK_FILE_NAME,
            Self::CleanShutdown => CLEAN_SHUTDOWN_FILE_NAME,
            Self::CleanShutdownTemp => CLEAN_SHUTDOWN_TEMP_FILE_NAME,
            Self::Key => KEY_FILE_NAME,
            Self::KeyTemp => KEY_TEMP_FILE_NAME,
            Self::LogStart => LOG_START_FILE_NAME,
            Self::LogStartTemp => LOG_START_TEMP_FILE_NAME,
            Self::RaftState => RAFT_STATE_FILE_NAME,
            Self::RaftStateTemp => RAFT_STATE_TEMP_FILE_NAME,
            Self::RaftSnapshot => RAFT_SNAPSHOT_FILE_NAME,
            Self::RaftSnapshotTemp => RAFT_SNAPSHOT_TEMP_FILE_NAME,
            Self::Other => return None,
        };
        let mut name = FileName::EMPTY;
        name.push_str(fixed);
        Some(name)
    }

    /// Whether this is the temporary of an interrupted write of ours.
    pub fn is_temporary(self) -> bool {
        matches!(
            self,
            Self::SegmentTemp(_)
                | Self::SegmentCopy(_)
                | Self::EpochsTemp
                | Self::CleanShutdownTemp
                | Self::KeyTemp
                | Self::LogStartTemp
                | Self::RaftStateTemp
                | Self::RaftSnapshotTemp
        )
    }
}

const ID_DIGITS: usize = 20;
/// The longest name of ours: a time index's, `{id:020}.timeindex`.
const MAX_NAME_LEN: usize = ID_DIGITS + ".timeindex".len();

/// A file name of a shard directory, built without allocating.
///
/// ```
/// use felix_format::{file_name, FileKind};
/// assert_eq!(file_name(3, FileKind::Segment).as_str(), "00000000000000000003.log");
/// assert_eq!(file_name(3, FileKind::Index).to_string(), "00000000000000000003.index");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileName {
    buf: [u8; MAX_NAME_LEN],
    len: usize,
}

impl FileName {
    const EMPTY: Self = Self {
        buf: [0; MAX_NAME_LEN],
        len: 0,
    };

    /// The name as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits, a dot and an ASCII extension are ever written.
        self.buf
            .get(..self.len)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or_default()
    }

    /// Appends `text` (ASCII, and short enough: every name of ours fits).
    fn push_str(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }
}

impl AsRef<str> for FileName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

#[cfg(feature = "std")]
impl AsRef<std::path::Path> for FileName {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(self.as_str())
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The file name of segment `id`'s data or index file: `{id:020}.log`.
pub fn file_name(id: u64, kind: FileKind) -> FileName {
    let mut name = FileName::EMPTY;
    let mut rest = id;
    for slot in name.buf.iter_mut().take(ID_DIGITS).rev() {
        // `rest % 10` is below 10, so the cast cannot truncate.
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    name.len = ID_DIGITS;
    name.push_str(".");
    name.push_str(kind.extension());
    name
}

/// Parses a segment, index or time index file name back into its id and
/// kind: the [`ShardFileName::Segment`], [`ShardFileName::Index`] and
/// [`ShardFileName::TimeIndex`] cases of [`ShardFileName::parse`].
///
/// Only the exact shape this crate writes is accepted (20 ASCII digits, a
/// dot, `log`, `index` or `timeindex`); anything else is a stray file for the caller to
/// report, never silently adopted.
///
/// ```
/// use felix_format::{parse_file_name, FileKind};
/// assert_eq!(parse_file_name("00000000000000000007.log"), Some((7, FileKind::Segment)));
/// assert_eq!(parse_file_name("7.log"), None);
/// assert_eq!(parse_file_name("00000000000000000007.log.tmp"), None);
/// ```
pub fn parse_file_name(name: &str) -> Option<(u64, FileKind)> {
    match ShardFileName::parse(name) {
        ShardFileName::Segment(id) => Some((id, FileKind::Segment)),
        ShardFileName::Index(id) => Some((id, FileKind::Index)),
        ShardFileName::TimeIndex(id) => Some((id, FileKind::TimeIndex)),
        _ => None,
    }
}

/// `{id:020}.log`, `{id:020}.index` or `{id:020}.timeindex` as its id and
/// kind.
fn parse_id_name(name: &str) -> Option<(u64, FileKind)> {
    let (digits, ext) = name.split_once('.')?;
    let kind = match ext {
        "log" => FileKind::Segment,
        "index" => FileKind::Index,
        "timeindex" => FileKind::TimeIndex,
        _ => return None,
    };
    if digits.len() != ID_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Twenty digits can exceed u64::MAX; such a name was not written by us.
    digits.parse::<u64>().ok().map(|id| (id, kind))
}

/// Characters kept of each text component in a shard directory name.
pub const SHARD_COMPONENT_MAX_CHARS: usize = 32;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The identity of a stream shard: tenant, namespace, stream and shard number.
///
/// Its directory name is a readable but lossy rendering plus a 64-bit FNV-1a
/// hash of the exact key, so two keys that render alike still get distinct
/// directories. Only `[A-Za-z0-9-]`, `_` and one `-` before the hash appear,
/// so a name can never contain a dot or a slash: `..` is unrepresentable, not
/// merely escaped.
///
/// ```
/// # use felix_format::ShardKey;
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// assert_eq!(key.dir_name(), "acme_default_orders_0-0d3aed4b998d2798");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardKey {
    /// The tenant owning the stream.
    pub tenant: String,
    /// The namespace within the tenant.
    pub namespace: String,
    /// The stream name.
    pub stream: String,
    /// The shard number within the stream.
    pub shard: u32,
}

impl ShardKey {
    /// A key from its four parts.
    pub fn new(
        tenant: impl Into<String>,
        namespace: impl Into<String>,
        stream: impl Into<String>,
        shard: u32,
    ) -> Self {
        Self {
            tenant: tenant.into(),
            namespace: namespace.into(),
            stream: stream.into(),
            shard,
        }
    }

    /// 64-bit FNV-1a over each text component's UTF-8 length (big-endian
    /// u64) and bytes, then the shard number (big-endian u32).
    ///
    /// The lengths make the encoding unambiguous: `("ab","c")` and
    /// `("a","bc")` hash differently.
    pub fn hash(&self) -> u64 {
        let mut hash = FNV_OFFSET_BASIS;
        let mut feed = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(FNV_PRIME);
            }
        };
        for text in [&self.tenant, &self.namespace, &self.stream] {
            feed(&(text.len() as u64).to_be_bytes());
            feed(text.as_bytes());
        }
        feed(&self.shard.to_be_bytes());
        hash
    }

    /// The shard's directory name: `<t>_<n>_<s>_<shard>-<hash:016x>`.
    pub fn dir_name(&self) -> String {
        use fmt::Write as _;
        let mut name = String::new();
        for text in [&self.tenant, &self.namespace, &self.stream] {
            push_readable(&mut name, text);
            name.push('_');
        }
        // Writing to a String cannot fail.
        let _ = write!(name, "{}-{:016x}", self.shard, self.hash());
        name
    }
}

/// `tenant/namespace/stream/shard`, each text part written bare when it is
/// non-empty and made only of letters, digits, `-`, `_` and `.`, and
/// otherwise quoted with Rust's string escapes. A `/` or a `"` therefore
/// never appears bare inside a part, so the text names exactly one key:
///
/// ```
/// # use felix_format::ShardKey;
/// assert_eq!(ShardKey::new("acme", "default", "orders", 0).to_string(), "acme/default/orders/0");
/// assert_eq!(ShardKey::new("", "", "", 0).to_string(), r#"""/""/""/0"#);
/// assert_eq!(ShardKey::new("a/b", "..", "c d", 1).to_string(), r#""a/b"/../"c d"/1"#);
/// assert_eq!(ShardKey::new("ünï", "say \"hi\"", "t\n", 2).to_string(), r#"ünï/"say \"hi\""/"t\n"/2"#);
/// ```
impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for text in [&self.tenant, &self.namespace, &self.stream] {
            let bare = !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if bare {
                f.write_str(text)?;
            } else {
                write!(f, "\"{}\"", text.escape_debug())?;
            }
            f.write_str("/")?;
        }
        write!(f, "{}", self.shard)
    }
}

/// Appends the readable rendering of one component: characters outside
/// `[A-Za-z0-9-]` become `_`, at most 32 characters are kept, and an empty
/// component becomes `_` so the separators stay unambiguous to a reader.
fn push_readable(out: &mut String, text: &str) {
    if text.is_empty() {
        out.push('_');
        return;
    }
    for c in text.chars().take(SHARD_COMPONENT_MAX_CHARS) {
        out.push(if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        });
    }
}

/// What a deleted shard's directory is renamed to before its files are
/// removed: `<shard dir name>.deleting`.
///
/// Renaming first makes a delete atomic: a crash leaves either the whole
/// shard under its own name or a tombstone, which is never opened as a
/// shard (a shard directory's name never holds a dot) and which the next
/// open of the store removes.
///
/// ```
/// use felix_format::{ShardKey, is_shard_dir_name, parse_tombstone_name, tombstone_name};
/// let dir = ShardKey::new("acme", "default", "orders", 0).dir_name();
/// let tombstone = tombstone_name(&dir);
/// assert_eq!(tombstone, "acme_default_orders_0-0d3aed4b998d2798.deleting");
/// assert!(!is_shard_dir_name(&tombstone));
/// assert_eq!(parse_tombstone_name(&tombstone), Some(dir.as_str()));
/// ```
pub fn tombstone_name(shard_dir_name: &str) -> String {
    let mut name = String::from(shard_dir_name);
    name.push_str(TOMBSTONE_SUFFIX);
    name
}

const TOMBSTONE_SUFFIX: &str = ".deleting";

/// The shard directory name inside a tombstone's name, or `None` when
/// `name` is not a tombstone of a shard directory.
pub fn parse_tombstone_name(name: &str) -> Option<&str> {
    name.strip_suffix(TOMBSTONE_SUFFIX)
        .filter(|dir| is_shard_dir_name(dir))
}

/// Whether `name` has the shape [`ShardKey::dir_name`] gives:
/// `<t>_<n>_<s>_<shard>-<16 lowercase hex digits>`, the text parts made of
/// `[A-Za-z0-9_-]`.
///
/// Only the shape is checked (a name cannot be turned back into its key);
/// it tells a store's shard directories from anything else in its root,
/// such as `lost+found` or a tombstone.
///
/// ```
/// use felix_format::is_shard_dir_name;
/// assert!(is_shard_dir_name("acme_default_orders_0-0d3aed4b998d2798"));
/// assert!(is_shard_dir_name("______0-17d9c15239d081d5"));
/// assert!(!is_shard_dir_name("lost+found"));
/// assert!(!is_shard_dir_name("acme_default_orders_0-0D3AED4B998D2798"));
/// assert!(!is_shard_dir_name("acme_default_orders_00-0d3aed4b998d2798"));
/// ```
pub fn is_shard_dir_name(name: &str) -> bool {
    let Some((front, hash)) = name.rsplit_once('-') else {
        return false;
    };
    let hex = hash.len() == 16 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let Some((parts, shard)) = front.rsplit_once('_') else {
        return false;
    };
    // `{}` of a u32: digits, no leading zero unless it is the only one.
    let number = !shard.is_empty()
        && shard.bytes().all(|b| b.is_ascii_digit())
        && (shard == "0" || !shard.starts_with('0'))
        && shard.parse::<u32>().is_ok();
    // Three parts of at least one character each, joined by `_`.
    let readable = parts.len() >= 5
        && parts.bytes().filter(|&b| b == b'_').count() >= 2
        && parts
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    hex && number && readable
}
