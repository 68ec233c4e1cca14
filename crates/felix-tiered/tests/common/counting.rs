//! A store that records the path of every get (gets, ranged gets and
//! heads), counts what happens to its multipart uploads (parts sent,
//! completed, aborted), and passes every call through.

use std::fmt;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// What the multipart uploads saw, all uploads together.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PartCounts {
    /// Uploads started.
    pub started: usize,
    /// Parts sent.
    pub parts: usize,
    /// Uploads completed.
    pub completed: usize,
    /// Uploads aborted.
    pub aborted: usize,
}

/// Records the object of each get and counts multipart calls.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    gets: Mutex<Vec<Path>>,
    parts: Arc<Mutex<PartCounts>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        CountingStore {
            inner,
            gets: Mutex::new(Vec::new()),
            parts: Arc::default(),
        }
    }

    /// The multipart counts so far.
    pub fn parts(&self) -> PartCounts {
        *self.parts.lock().unwrap()
    }

    /// The objects got since the last call, in order, and forgets them.
    pub fn take_gets(&self) -> Vec<Path> {
        std::mem::take(&mut *self.gets.lock().unwrap())
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[derive(Debug)]
struct CountedUpload {
    inner: Box<dyn MultipartUpload>,
    counts: Arc<Mutex<PartCounts>>,
}

#[async_trait::async_trait]
impl MultipartUpload for CountedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.counts.lock().unwrap().parts += 1;
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.counts.lock().unwrap().completed += 1;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.counts.lock().unwrap().aborted += 1;
        self.inner.abort().await
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        self.parts.lock().unwrap().started += 1;
        Ok(Box::new(CountedUpload {
            inner,
            counts: Arc::clone(&self.parts),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.gets.lock().unwrap().push(location.clone());
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
