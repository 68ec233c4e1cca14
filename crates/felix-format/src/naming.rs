//! File names inside a shard directory and the shard directory's own name.
//!
//! Segment and index files are named by a 20-digit zero-padded segment id, so
//! lexicographic and numeric order agree; readers still parse the number and
//! sort on it, because directory iteration order is filesystem-defined. A
//! file name is a segment id, not an offset: offsets come from headers.

use alloc::string::String;
use core::fmt;

/// Which file of a segment a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// The segment data file, `*.log`.
    Segment,
    /// The sparse index file, `*.index`.
    Index,
}

impl FileKind {
    /// The extension, without the dot.
    pub const fn extension(self) -> &'static str {
        match self {
            Self::Segment => "log",
            Self::Index => "index",
        }
    }
}

const ID_DIGITS: usize = 20;
const MAX_NAME_LEN: usize = ID_DIGITS + 1 + 5;

/// A segment or index file name, built without allocating.
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
    /// The name as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits, a dot and an ASCII extension are ever written.
        self.buf
            .get(..self.len)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or_default()
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
    let mut buf = [0u8; MAX_NAME_LEN];
    let mut rest = id;
    for slot in buf.iter_mut().take(ID_DIGITS).rev() {
        // `rest % 10` is below 10, so the cast cannot truncate.
        *slot = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let ext = kind.extension().as_bytes();
    let mut len = ID_DIGITS;
    for &b in core::iter::once(&b'.').chain(ext) {
        if let Some(slot) = buf.get_mut(len) {
            *slot = b;
            len += 1;
        }
    }
    FileName { buf, len }
}

/// Parses a segment or index file name back into its id and kind.
///
/// Only the exact shape this crate writes is accepted (20 ASCII digits, a
/// dot, `log` or `index`); anything else is a stray file for the caller to
/// report, never silently adopted.
///
/// ```
/// use felix_format::{parse_file_name, FileKind};
/// assert_eq!(parse_file_name("00000000000000000007.log"), Some((7, FileKind::Segment)));
/// assert_eq!(parse_file_name("7.log"), None);
/// assert_eq!(parse_file_name("00000000000000000007.log.tmp"), None);
/// ```
pub fn parse_file_name(name: &str) -> Option<(u64, FileKind)> {
    let (digits, ext) = name.split_once('.')?;
    let kind = match ext {
        "log" => FileKind::Segment,
        "index" => FileKind::Index,
        _ => return None,
    };
    if digits.len() != ID_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Twenty digits can exceed u64::MAX; such a name was not written by us.
    digits.parse::<u64>().ok().map(|id| (id, kind))
}

/// The segment id in the name of a segment's temporary, `{id:020}.log.tmp`
/// (a new segment's header is written and synced under it, then renamed
/// into place), or `None` for any other name.
///
/// Only that exact shape is one of ours: `operator-backup.log.tmp` is a
/// stray, left alone.
///
/// ```
/// use felix_format::parse_segment_temp_name;
/// assert_eq!(parse_segment_temp_name("00000000000000000007.log.tmp"), Some(7));
/// assert_eq!(parse_segment_temp_name("operator-backup.log.tmp"), None);
/// assert_eq!(parse_segment_temp_name("00000000000000000007.index.tmp"), None);
/// assert_eq!(parse_segment_temp_name("00000000000000000007.log"), None);
/// ```
pub fn parse_segment_temp_name(name: &str) -> Option<u64> {
    match parse_file_name(name.strip_suffix(".tmp")?)? {
        (id, FileKind::Segment) => Some(id),
        (_, FileKind::Index) => None,
    }
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
/// use felix_format::ShardKey;
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
/// use felix_format::ShardKey;
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

/// Name of the file holding a shard directory's exact key (see
/// [`key_file`](crate::key_file)).
pub const KEY_FILE_NAME: &str = "key";
/// Name of the key file's temporary while it is written.
pub const KEY_TEMP_FILE_NAME: &str = "key.tmp";

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
