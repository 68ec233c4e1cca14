//! The bounded cache of fetched remote bytes.
//!
//! Entries are whole chunks (`TierConfig::chunk_bytes`, aligned in the
//! object) keyed by object (its name's parts, not its path) and chunk
//! number; the least recently used go first once the total passes the
//! bound. A chunk is cached only after the
//! fetch returned it whole; records in it are verified on every read, so a
//! cached chunk is never trusted more than a fetched one.
//!
//! A remote segment's index object is kept parsed, not as bytes, under its
//! object (whose name includes the segment's upload, so a new upload of the
//! segment is a new key and a stale index is never found): a warm read then
//! neither fetches nor parses it again. Its entries count against the same
//! byte bound as the chunks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use felix_format::IndexEntry;

use crate::remote::SegmentObject;

/// The chunk number the cache keeps a parsed index object under.
const WHOLE_OBJECT: u64 = u64::MAX;

/// What one entry holds.
#[derive(Debug, Clone)]
enum Held {
    /// A chunk of an object's bytes.
    Chunk(Bytes),
    /// A whole index object, checked against the manifest's CRC and parsed.
    Index(Arc<[IndexEntry]>),
}

impl Held {
    /// The bytes it counts against the bound.
    fn len(&self) -> u64 {
        match self {
            Held::Chunk(b) => b.len() as u64,
            Held::Index(e) => (e.len() * std::mem::size_of::<IndexEntry>()) as u64,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<(SegmentObject, u64), (Held, u64)>,
    bytes: u64,
    tick: u64,
}

/// A bounded LRU of remote chunks.
#[derive(Debug)]
pub(crate) struct ChunkCache {
    limit: u64,
    inner: Mutex<Inner>,
    /// Index objects fetched and found unusable (see
    /// [`ChunkCache::insert_unusable_index`]).
    unusable_indexes: AtomicU64,
}

impl ChunkCache {
    pub(crate) fn new(limit: u64) -> Self {
        ChunkCache {
            limit,
            inner: Mutex::new(Inner::default()),
            unusable_indexes: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get_held(&self, object: SegmentObject, chunk: u64) -> Option<Held> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.get_mut(&(object, chunk))?;
        entry.1 = tick;
        Some(entry.0.clone())
    }

    pub(crate) fn get(&self, object: SegmentObject, chunk: u64) -> Option<Bytes> {
        match self.get_held(object, chunk)? {
            Held::Chunk(b) => Some(b),
            Held::Index(_) => None,
        }
    }

    /// The parsed index object `object`, if held.
    pub(crate) fn get_index(&self, object: SegmentObject) -> Option<Arc<[IndexEntry]>> {
        match self.get_held(object, WHOLE_OBJECT)? {
            Held::Index(e) => Some(e),
            Held::Chunk(_) => None,
        }
    }

    pub(crate) fn insert(&self, object: SegmentObject, chunk: u64, bytes: Bytes) {
        self.insert_held(object, chunk, Held::Chunk(bytes));
    }

    /// Keeps index object `object`, already checked and parsed.
    pub(crate) fn insert_index(&self, object: SegmentObject, entries: Arc<[IndexEntry]>) {
        self.insert_held(object, WHOLE_OBJECT, Held::Index(entries));
    }

    /// Keeps index object `object`, fetched and found unusable, as an
    /// index without entries (every read of its segment then walks from the
    /// first record, without fetching the object again while it is held),
    /// and counts it.
    pub(crate) fn insert_unusable_index(&self, object: SegmentObject) {
        self.unusable_indexes.fetch_add(1, Ordering::Relaxed);
        self.insert_held(object, WHOLE_OBJECT, Held::Index(Arc::from(Vec::new())));
    }

    /// Index objects fetched and found unusable so far.
    pub(crate) fn unusable_indexes(&self) -> u64 {
        self.unusable_indexes.load(Ordering::Relaxed)
    }

    fn insert_held(&self, object: SegmentObject, chunk: u64, held: Held) {
        let len = held.len();
        if len > self.limit {
            return;
        }
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((old, _)) = inner.entries.insert((object, chunk), (held, tick)) {
            inner.bytes -= old.len();
        }
        inner.bytes += len;
        while inner.bytes > self.limit {
            let Some(oldest) = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((gone, _)) = inner.entries.remove(&oldest) {
                inner.bytes -= gone.len();
            }
        }
    }

    /// Forgets every chunk of `object` (its segment left the store).
    pub(crate) fn forget(&self, object: SegmentObject) {
        let mut inner = self.lock();
        let doomed: Vec<_> = inner
            .entries
            .keys()
            .filter(|(o, _)| *o == object)
            .copied()
            .collect();
        for k in doomed {
            if let Some((gone, _)) = inner.entries.remove(&k) {
                inner.bytes -= gone.len();
            }
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use felix_format::FileKind;

    fn object(id: u64, kind: FileKind) -> SegmentObject {
        SegmentObject {
            id,
            upload: 7,
            kind,
        }
    }

    #[test]
    fn stays_within_its_bound_evicting_the_least_recently_used() {
        let cache = ChunkCache::new(10);
        let a = object(1, FileKind::Segment);
        cache.insert(a, 0, Bytes::from(vec![0; 4]));
        cache.insert(a, 1, Bytes::from(vec![1; 4]));
        assert!(cache.get(a, 0).is_some());
        cache.insert(a, 2, Bytes::from(vec![2; 4]));
        assert_eq!(cache.bytes(), 8);
        assert!(cache.get(a, 1).is_none());
        assert!(cache.get(a, 0).is_some() && cache.get(a, 2).is_some());
        cache.insert(a, 3, Bytes::from(vec![3; 11]));
        assert!(cache.get(a, 3).is_none());
        cache.forget(a);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn another_upload_or_file_of_a_segment_is_another_entry() {
        let cache = ChunkCache::new(64);
        let first = object(3, FileKind::Segment);
        cache.insert(first, 0, Bytes::from_static(b"first"));
        let again = SegmentObject { upload: 8, ..first };
        assert!(cache.get(again, 0).is_none());
        assert!(cache.get(object(3, FileKind::Index), 0).is_none());
        assert!(cache.get(object(4, FileKind::Segment), 0).is_none());
        assert_eq!(cache.get(first, 0).as_deref(), Some(&b"first"[..]));
        // Forgetting the first upload leaves another's chunks.
        cache.insert(again, 0, Bytes::from_static(b"again"));
        cache.forget(first);
        assert!(cache.get(first, 0).is_none());
        assert_eq!(cache.get(again, 0).as_deref(), Some(&b"again"[..]));
        assert_eq!(cache.bytes(), 5);
    }

    #[test]
    fn a_parsed_index_counts_against_the_bound_and_is_not_a_chunk() {
        let cache = ChunkCache::new(64);
        let i = object(2, FileKind::Index);
        let entries: Arc<[IndexEntry]> = (0..2)
            .map(|n| IndexEntry {
                offset: n,
                position: 64 + n,
            })
            .collect();
        cache.insert_index(i, Arc::clone(&entries));
        assert_eq!(cache.bytes(), 32);
        assert!(cache.get(i, WHOLE_OBJECT).is_none());
        let held = cache.get_index(i).unwrap();
        assert!(Arc::ptr_eq(&held, &entries));
        // A chunk pushing the total past the bound evicts the index.
        cache.insert(i, 0, Bytes::from(vec![0; 40]));
        assert!(cache.get_index(i).is_none());
        assert_eq!(cache.bytes(), 40);
    }
}
