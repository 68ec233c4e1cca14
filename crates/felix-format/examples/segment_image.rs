//! Builds a segment image in memory with `felix-format`'s encoders, reads it
//! back with its decoders, and shows a flipped byte being caught.
//!
//! A segment file is a 32-byte [`SegmentHeader`] followed by records back to
//! back, each a 28-byte header and its payload. A reader steps from one record
//! to the next with `position += encoded_len`, without touching the payload,
//! which is how the recovery scan and index rebuild stay cheap.
//!
//! Everything here is fixed (no clock, no randomness), so the output is the
//! same on every run:
//!
//! ```text
//! cargo run -p felix-format --example segment_image
//! ```

use std::error::Error;

use felix_format::{
    CorruptionKind, CorruptionSite, RECORD_HEADER_LEN, RecordView, SEGMENT_HEADER_LEN,
    SegmentHeader, decode_record, encode_record_header,
};

/// Offset of the segment's first record; deliberately not 0, since a segment
/// may begin anywhere and its header, not its file name, says where.
const BASE_OFFSET: u64 = 100;
/// A fixed creation time (2023-11-14T22:13:20Z), so the image is deterministic.
const CREATED_AT_MICROS: u64 = 1_700_000_000_000_000;

/// The records to write: publish time and payload.
const RECORDS: [(u64, &str); 3] = [
    (CREATED_AT_MICROS + 1_000, "hello"),
    (CREATED_AT_MICROS + 2_500, "felix"),
    (CREATED_AT_MICROS + 4_000, "storage format v2"),
];

/// The record whose payload gets a flipped bit.
const DAMAGED_RECORD: usize = 1;

fn main() -> Result<(), Box<dyn Error>> {
    let (image, positions) = encode_image()?;
    println!(
        "segment image: {} bytes (header {SEGMENT_HEADER_LEN} + {} records)",
        image.len(),
        RECORDS.len()
    );

    let header = SegmentHeader::decode(&image)?;
    println!(
        "header: base_offset {}, created_at_micros {}",
        header.base_offset, header.created_at_micros
    );
    println!();

    let clean = scan(&image, header.base_offset);
    print_table(&clean.records);
    if let Some((position, kind)) = clean.damage {
        return Err(format!("clean image failed to decode at byte {position}: {kind}").into());
    }
    println!();

    // Flip one bit of a record's payload: "felix" becomes "Felix", still
    // plausible text, but no longer the bytes the record checksum covers.
    let mut damaged = image;
    let flip_at = positions
        .get(DAMAGED_RECORD)
        .map(|position| position + RECORD_HEADER_LEN)
        .ok_or("no record to damage")?;
    let byte = damaged
        .get_mut(flip_at)
        .ok_or("flip position outside the image")?;
    *byte ^= 0x20;
    println!(
        "flipped bit 5 of byte {flip_at}, the first payload byte of offset {}",
        BASE_OFFSET + DAMAGED_RECORD as u64
    );

    let found = scan_after_header(&damaged)?;
    let Some((position, kind)) = found.damage else {
        return Err("the flipped byte went undetected".into());
    };
    // Upper layers pair the kind with where it was found; "demo" stands in
    // for the shard directory name and 0 for the segment id.
    let site = CorruptionSite::new("demo", 0, position);
    println!(
        "decoded {} record(s), then stopped at byte {position}",
        found.records.len()
    );
    println!("  kind:    {}", kind.name());
    println!("  display: {kind}");
    println!("  site:    {site}");
    Ok(())
}

/// Encodes the header and [`RECORDS`]; returns the image and the byte
/// position of each record.
fn encode_image() -> Result<(Vec<u8>, Vec<usize>), CorruptionKind> {
    let mut image = SegmentHeader::new(BASE_OFFSET, CREATED_AT_MICROS)
        .encode()
        .to_vec();
    let mut positions = Vec::with_capacity(RECORDS.len());
    for (offset, (timestamp_micros, payload)) in (BASE_OFFSET..).zip(RECORDS) {
        positions.push(image.len());
        // The header is encoded apart from the payload, so a writer can stage
        // a batch without copying payloads into per-record buffers.
        let record_header = encode_record_header(offset, timestamp_micros, payload.as_bytes())?;
        image.extend_from_slice(&record_header);
        image.extend_from_slice(payload.as_bytes());
    }
    Ok((image, positions))
}

/// One decoded record and where it starts.
struct Row<'a> {
    position: u64,
    record: RecordView<'a>,
}

/// What a scan found: the records that verified, then the first damage.
struct Scan<'a> {
    records: Vec<Row<'a>>,
    damage: Option<(u64, CorruptionKind)>,
}

/// Decodes the segment header, then scans the records after it.
fn scan_after_header(image: &[u8]) -> Result<Scan<'_>, CorruptionKind> {
    let header = SegmentHeader::decode(image)?;
    Ok(scan(image, header.base_offset))
}

/// Steps through the records after the header, checking each offset follows
/// its predecessor, and stops at the end of the image or the first damage.
fn scan(image: &[u8], base_offset: u64) -> Scan<'_> {
    let mut records = Vec::new();
    let mut position = SEGMENT_HEADER_LEN as u64;
    let mut expected_offset = base_offset;
    while let Some(rest) = usize::try_from(position)
        .ok()
        .and_then(|start| image.get(start..))
        .filter(|rest| !rest.is_empty())
    {
        match decode_record(rest, Some(expected_offset)) {
            Ok(record) => {
                records.push(Row { position, record });
                position += record.encoded_len();
                expected_offset += 1;
            }
            Err(kind) => {
                return Scan {
                    records,
                    damage: Some((position, kind)),
                };
            }
        }
    }
    Scan {
        records,
        damage: None,
    }
}

fn print_table(rows: &[Row<'_>]) {
    println!(
        "{:>8}  {:>6}  {:>16}  {:>6}  payload",
        "position", "offset", "timestamp_micros", "length"
    );
    for row in rows {
        let header = &row.record.header;
        println!(
            "{:>8}  {:>6}  {:>16}  {:>6}  {:?}",
            row.position,
            header.offset,
            header.timestamp_micros,
            header.payload_len,
            String::from_utf8_lossy(row.record.payload)
        );
    }
}
