//! The S3 adapter. A body that fits one part is one `PutObject`; a larger one is a multipart
//! upload of [`PART_BYTES`] parts, read one part at a time (memory stays bounded by one part),
//! aborted if any part fails. The sha256 is computed as the parts are read. Reads stream;
//! presigned URLs are GETs; deletes are `DeleteObjects` of up to 1000 keys.
//!
//! `AWS_ENDPOINT_URL` (LocalStack) needs path-style addressing: the client is given it when an
//! endpoint is configured (see [`client_config`]).

use std::time::Duration;

use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, Delete, ObjectIdentifier};
use tokio::io::AsyncReadExt;

use crate::digest::Running;
use crate::location::{Key, Location};
use crate::port::{ArtifactStore, Error, Reader, Stored};

/// The size of a multipart upload's parts (S3's minimum is 5 MiB; 10,000 parts of 8 MiB make
/// 78 GiB, S3's limit for one object being 5 TiB).
pub const PART_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    location: Location,
    bucket: String,
}

/// An S3 client configuration of `sdk`: path-style addressing when an endpoint is set
/// (LocalStack), S3's own virtual-host style otherwise.
pub fn client_config(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::config::Builder {
    let builder = aws_sdk_s3::config::Builder::from(sdk);
    if sdk.endpoint_url().is_some() { builder.force_path_style(true) } else { builder }
}

fn s3<'a, E: std::error::Error + Send + Sync + 'static>(
    op: &'static str,
    key: &'a str,
) -> impl FnOnce(E) -> Error + 'a {
    move |e| Error::S3 { op, key: key.to_owned(), source: Box::new(e) }
}

impl S3Store {
    /// A store at `location` (a [`Location::S3`]) through `client`.
    pub fn new(client: aws_sdk_s3::Client, location: Location) -> Self {
        let bucket = match &location {
            Location::S3 { bucket, .. } => bucket.clone(),
            Location::Dir { .. } => String::new(),
        };
        S3Store { client, location, bucket }
    }

    async fn multipart(
        &self,
        object: &str,
        first: Vec<u8>,
        body: &mut Reader,
        running: &mut Running,
        media_type: Option<&str>,
    ) -> Result<(), Error> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(object)
            .set_content_type(media_type.map(str::to_owned))
            .send()
            .await
            .map_err(s3("CreateMultipartUpload", object))?;
        let upload_id = created.upload_id().unwrap_or_default().to_owned();
        let uploaded = async {
            let mut parts = Vec::new();
            let mut part = first;
            while !part.is_empty() {
                let number = i32::try_from(parts.len() + 1).unwrap_or(i32::MAX);
                let done = self
                    .client
                    .upload_part()
                    .bucket(&self.bucket)
                    .key(object)
                    .upload_id(&upload_id)
                    .part_number(number)
                    .body(ByteStream::from(part))
                    .send()
                    .await
                    .map_err(s3("UploadPart", object))?;
                parts.push(
                    CompletedPart::builder().set_e_tag(done.e_tag().map(str::to_owned)).part_number(number).build(),
                );
                part = read_part(body, running, object).await?;
            }
            let upload = CompletedMultipartUpload::builder().set_parts(Some(parts)).build();
            self.client
                .complete_multipart_upload()
                .bucket(&self.bucket)
                .key(object)
                .upload_id(&upload_id)
                .multipart_upload(upload)
                .send()
                .await
                .map_err(s3("CompleteMultipartUpload", object))
        }
        .await;
        if let Err(error) = uploaded {
            let aborted = self
                .client
                .abort_multipart_upload()
                .bucket(&self.bucket)
                .key(object)
                .upload_id(&upload_id)
                .send()
                .await;
            if let Err(e) = aborted {
                tracing::warn!(error = %aws_sdk_s3::error::DisplayErrorContext(&e), "could not abort a failed multipart upload; the bucket's lifecycle rule removes it");
            }
            return Err(error);
        }
        Ok(())
    }
}

/// Up to [`PART_BYTES`] of `body` (fewer only at its end), added to `running`.
async fn read_part(body: &mut Reader, running: &mut Running, object: &str) -> Result<Vec<u8>, Error> {
    let mut part = Vec::with_capacity(PART_BYTES);
    let limit = u64::try_from(PART_BYTES).unwrap_or(u64::MAX);
    let mut taken = body.take(limit);
    loop {
        let before = part.len();
        let n = taken.read_buf(&mut part).await.map_err(|source| Error::Io {
            op: "read the body for",
            key: object.to_owned(),
            source,
        })?;
        if n == 0 {
            break;
        }
        running.update(&part[before..]);
    }
    Ok(part)
}

#[async_trait::async_trait]
impl ArtifactStore for S3Store {
    fn location(&self) -> &Location {
        &self.location
    }

    async fn put(&self, key: &Key, mut body: Reader, media_type: Option<&str>) -> Result<Stored, Error> {
        let object = self.location.object(key);
        let mut running = Running::default();
        let first = read_part(&mut body, &mut running, &object).await?;
        if first.len() < PART_BYTES {
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(&object)
                .set_content_type(media_type.map(str::to_owned))
                .body(ByteStream::from(first))
                .send()
                .await
                .map_err(s3("PutObject", &object))?;
        } else {
            self.multipart(&object, first, &mut body, &mut running, media_type).await?;
        }
        let (size_bytes, digest) = running.finish();
        Ok(Stored { uri: self.uri(key), size_bytes, digest, media_type: media_type.map(str::to_owned) })
    }

    async fn get(&self, key: &Key) -> Result<Reader, Error> {
        let object = self.location.object(key);
        let got = self.client.get_object().bucket(&self.bucket).key(&object).send().await;
        match got {
            Ok(output) => Ok(Box::pin(output.body.into_async_read())),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Err(Error::NotFound { key: object }),
            Err(e) => Err(s3("GetObject", &object)(e)),
        }
    }

    async fn presign(&self, key: &Key, ttl: Duration) -> Result<Option<String>, Error> {
        let object = self.location.object(key);
        let config = PresigningConfig::expires_in(ttl).map_err(s3("presign", &object))?;
        let request = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(&object)
            .presigned(config)
            .await
            .map_err(s3("presign GetObject", &object))?;
        Ok(Some(request.uri().to_owned()))
    }

    async fn list(&self, prefix: &Key, limit: usize) -> Result<Vec<Key>, Error> {
        let object = self.location.object(prefix);
        let listed = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&object)
            .max_keys(i32::try_from(limit).unwrap_or(1000))
            .send()
            .await
            .map_err(s3("ListObjectsV2", &object))?;
        let strip = self.location.object(&Key::from_listed(""));
        Ok(listed
            .contents()
            .iter()
            .filter_map(|o| o.key())
            .filter_map(|k| k.strip_prefix(strip.as_str()))
            .take(limit)
            .map(Key::from_listed)
            .collect())
    }

    async fn delete(&self, keys: &[Key]) -> Result<(), Error> {
        let Some(first) = keys.first() else { return Ok(()) };
        let first = self.location.object(first);
        let ids = keys
            .iter()
            .map(|k| ObjectIdentifier::builder().key(self.location.object(k)).build())
            .collect::<Result<Vec<_>, _>>()
            .map_err(s3("DeleteObjects", &first))?;
        let delete =
            Delete::builder().set_objects(Some(ids)).quiet(true).build().map_err(s3("DeleteObjects", &first))?;
        let output = self
            .client
            .delete_objects()
            .bucket(&self.bucket)
            .delete(delete)
            .send()
            .await
            .map_err(s3("DeleteObjects", &first))?;
        match output.errors().first() {
            None => Ok(()),
            Some(e) => Err(Error::S3 {
                op: "DeleteObjects",
                key: e.key().unwrap_or_default().to_owned(),
                source: format!("{}: {}", e.code().unwrap_or("error"), e.message().unwrap_or_default()).into(),
            }),
        }
    }
}
