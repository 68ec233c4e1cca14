//! Puts of a sealed segment's files, a part at a time: each part is read,
//! its complete records checked and added to the object's CRC just before
//! it is sent, so an upload holds at most `upload_concurrency` parts in
//! memory, and one record running across two parts, whatever the
//! segment's size. A record is checked before the part holding its last
//! byte is sent, and every record before the upload completes.

use std::path::Path as FsPath;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload, WriteMultipart};

use felix_format::{FileKind, file_name};
use felix_io::{OpenMode, VfsFile};
use felix_storage::SegmentInfo;

use crate::error::TieredError;
use crate::remote::SegmentObject;
use crate::shard::TieredShard;
use crate::walk::SegmentWalk;

/// What one local file's upload stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uploaded {
    /// Bytes of the object.
    pub(crate) len: u64,
    /// CRC-32 of them.
    pub(crate) crc: u32,
}

/// One local file being uploaded: read in parts, the segment's records
/// walked as they come.
struct Source<'a> {
    file: Option<std::sync::Arc<dyn VfsFile>>,
    path: &'a FsPath,
    len: u64,
    walk: Option<SegmentWalk>,
    crc: crc32fast::Hasher,
}

impl Source<'_> {
    fn io(&self, source: std::io::Error) -> TieredError {
        TieredError::LocalFile {
            path: self.path.to_path_buf(),
            source,
        }
    }

    /// The `n` bytes at `at`, checked (for a segment) and counted in the
    /// CRC.
    fn part(&mut self, at: u64, n: u64) -> Result<Bytes, TieredError> {
        let mut bytes = vec![0; usize::try_from(n).unwrap_or(usize::MAX)];
        if let Some(file) = &self.file {
            file.read_exact_at(&mut bytes, at).map_err(|e| self.io(e))?;
        }
        if let Some(walk) = &mut self.walk {
            walk.feed(&bytes)
                .map_err(|(position, kind)| TieredError::LocalCorrupt {
                    path: self.path.to_path_buf(),
                    position,
                    kind,
                })?;
        }
        self.crc.update(&bytes);
        Ok(Bytes::from(bytes))
    }

    /// After the last part: a segment's records must end where the shard
    /// says its extent does.
    fn finish(&self, info: &SegmentInfo) -> Result<(), TieredError> {
        let Some(walk) = &self.walk else {
            return Ok(());
        };
        let found_next = walk
            .finish()
            .map_err(|(position, kind)| TieredError::LocalCorrupt {
                path: self.path.to_path_buf(),
                position,
                kind,
            })?;
        if found_next != info.extent.next_offset {
            return Err(TieredError::LocalExtent {
                path: self.path.to_path_buf(),
                expected_next: info.extent.next_offset,
                found_next,
            });
        }
        Ok(())
    }
}

impl TieredShard {
    /// Uploads segment `info`'s local file `kind` as that file of upload
    /// `upload`: the `.log` cut to its extent, every record checked at full
    /// depth before the part holding it is sent (rot is never offloaded),
    /// or one of its indexes (a missing one is an empty object). One put up
    /// to `part_bytes`, a multipart upload above; a failure aborts the
    /// upload. The store's length is checked after.
    ///
    /// These puts overwrite, so `object_store` retries one the store
    /// applied but answered with a 503, and the retry succeeds. One still
    /// reported failed once its retries are spent fails the upload even if
    /// the store applied it: the object is then one no manifest lists, the
    /// next pass uploads the segment afresh under a new upload id, and a
    /// sweep removes the orphan. (The manifest's put-if-absent cannot be
    /// retried that way; it is settled by reading it back.)
    pub(crate) async fn upload_file(
        &self,
        info: &SegmentInfo,
        upload: u64,
        kind: FileKind,
    ) -> Result<Uploaded, TieredError> {
        let id = info.extent.id;
        let local = self.shard.dir().join(file_name(id, kind).as_str());
        let object = &self.remote.path(SegmentObject { id, upload, kind });
        let segment = kind == FileKind::Segment;
        let mut source = Source {
            file: None,
            path: &local,
            len: 0,
            walk: None,
            crc: crc32fast::Hasher::new(),
        };
        match self.shard.file_system().open(&local, OpenMode::Read) {
            Ok(file) => {
                let len = file.file_len().map_err(|e| source.io(e))?;
                // Sealed segments are cut to their records; anything past
                // the extent is not the segment's.
                source.len = if segment {
                    len.min(info.extent.len)
                } else {
                    len
                };
                source.file = Some(file);
            }
            Err(e) if !segment && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(source.io(e)),
        }
        if segment {
            source.walk = Some(SegmentWalk::new(source.len));
        }
        let len = source.len;
        let part = self.config.part_bytes;
        let store = &self.remote.store;
        let put_error = |e| TieredError::store("put", object, e);
        if len <= part {
            let bytes = source.part(0, len)?;
            source.finish(info)?;
            store
                .put(object, PutPayload::from(bytes))
                .await
                .map_err(put_error)?;
        } else {
            let upload = store.put_multipart(object).await.map_err(put_error)?;
            let chunk = usize::try_from(part).unwrap_or(usize::MAX);
            let mut writer = WriteMultipart::new_with_chunk_size(upload, chunk);
            let mut at = 0;
            while at < len {
                let n = part.min(len - at);
                let sent = match writer
                    .wait_for_capacity(self.config.upload_concurrency)
                    .await
                {
                    Ok(()) => source.part(at, n),
                    Err(e) => Err(put_error(e)),
                };
                match sent {
                    Ok(bytes) => writer.put(bytes),
                    Err(e) => {
                        abort(writer, object).await;
                        return Err(e);
                    }
                }
                at += n;
            }
            if let Err(e) = source.finish(info) {
                abort(writer, object).await;
                return Err(e);
            }
            writer.finish().await.map_err(put_error)?;
        }
        let meta = store
            .head(object)
            .await
            .map_err(|e| TieredError::store("head", object, e))?;
        if meta.size != len {
            return Err(TieredError::RemoteLength {
                object: object.clone(),
                expected: len,
                found: meta.size,
            });
        }
        Ok(Uploaded {
            len,
            crc: source.crc.clone().finalize(),
        })
    }
}

/// Aborts a multipart upload that must not complete. A failed abort leaves
/// parts the store keeps but lists nowhere (no sweep can see them): it is
/// logged, and the store's own rule for abandoned uploads removes them.
async fn abort(writer: WriteMultipart, object: &object_store::path::Path) {
    if let Err(e) = writer.abort().await {
        tracing::warn!(object = %object, error = %e, "multipart upload not aborted; its parts stay until the store's rule for abandoned uploads");
    }
}
