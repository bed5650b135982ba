//! FastCGI 1.0 records: the 8-byte header, the request-side encoders and an incremental
//! decoder for what php-fpm sends back.
//!
//! Every record is `version, type, requestId (u16), contentLength (u16), paddingLength (u8),
//! reserved`, followed by the content and the padding. One request runs on a connection at
//! a time (php-fpm does not multiplex), so the request id is always 1.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::params::Params;

pub(crate) const VERSION_1: u8 = 1;
pub(crate) const HEADER_LEN: usize = 8;
pub(crate) const REQUEST_ID: u16 = 1;
/// Chunk size for the STDIN and PARAMS streams: the largest multiple of 8 that fits in a
/// u16 content length, so full records need no padding.
pub(crate) const CHUNK: usize = 0xfff8;

pub(crate) const BEGIN_REQUEST: u8 = 1;
pub(crate) const END_REQUEST: u8 = 3;
pub(crate) const PARAMS: u8 = 4;
pub(crate) const STDIN: u8 = 5;
pub(crate) const STDOUT: u8 = 6;
pub(crate) const STDERR: u8 = 7;

const ROLE_RESPONDER: u16 = 1;
const FLAG_KEEP_CONN: u8 = 1;

/// `protocolStatus` of an END_REQUEST record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProtocolStatus {
    RequestComplete,
    /// The application refused a second concurrent request on one connection.
    CantMpxConn,
    /// The application is out of some resource (e.g. workers).
    Overloaded,
    UnknownRole,
    Other(u8),
}

impl ProtocolStatus {
    fn from_u8(v: u8) -> ProtocolStatus {
        match v {
            0 => ProtocolStatus::RequestComplete,
            1 => ProtocolStatus::CantMpxConn,
            2 => ProtocolStatus::Overloaded,
            3 => ProtocolStatus::UnknownRole,
            v => ProtocolStatus::Other(v),
        }
    }

    pub(crate) fn name(self) -> String {
        match self {
            ProtocolStatus::RequestComplete => "FCGI_REQUEST_COMPLETE".into(),
            ProtocolStatus::CantMpxConn => "FCGI_CANT_MPX_CONN".into(),
            ProtocolStatus::Overloaded => "FCGI_OVERLOADED".into(),
            ProtocolStatus::UnknownRole => "FCGI_UNKNOWN_ROLE".into(),
            ProtocolStatus::Other(v) => format!("unknown protocol status {v}"),
        }
    }
}

/// Padding that aligns `len` to 8 bytes, as the spec recommends.
fn padding_for(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// Appends one record. `content` longer than a record can carry is cut into several records
/// of the same type, so no length is ever truncated; only streams (PARAMS, STDIN) are long.
pub(crate) fn put_record(out: &mut BytesMut, rtype: u8, content: &[u8]) {
    let mut chunks = content.chunks(CHUNK).peekable();
    if chunks.peek().is_none() {
        put_one(out, rtype, &[]);
    }
    for chunk in chunks {
        put_one(out, rtype, chunk);
    }
}

fn put_one(out: &mut BytesMut, rtype: u8, content: &[u8]) {
    // `content` is at most CHUNK bytes here, so the length fits in a u16.
    let len = u16::try_from(content.len()).unwrap_or(u16::MAX);
    let padding = padding_for(content.len());
    out.reserve(HEADER_LEN + content.len() + padding);
    out.put_u8(VERSION_1);
    out.put_u8(rtype);
    out.put_u16(REQUEST_ID);
    out.put_u16(len);
    out.put_u8(padding as u8);
    out.put_u8(0);
    out.put_slice(content);
    out.put_bytes(0, padding);
}

/// Appends `data` as stream records of at most [`CHUNK`] bytes; nothing for empty data (an
/// empty record would end the stream).
pub(crate) fn put_stream(out: &mut BytesMut, rtype: u8, data: &[u8]) {
    if !data.is_empty() {
        put_record(out, rtype, data);
    }
}

/// Length prefix of a name or value: one byte below 128, else four bytes with the top bit
/// set. `None` if the length does not fit in 31 bits.
fn put_nv_len(out: &mut BytesMut, len: usize) -> Option<()> {
    if len < 0x80 {
        out.put_u8(len as u8);
    } else {
        let len = u32::try_from(len).ok().filter(|l| *l <= 0x7fff_ffff)?;
        out.put_u32(len | 0x8000_0000);
    }
    Some(())
}

/// Encodes the name-value pairs of the PARAMS stream (before it is cut into records).
/// `Err` names the parameter that is too long for the protocol.
pub(crate) fn encode_params(params: &Params) -> Result<BytesMut, String> {
    let size: usize = params.iter().map(|(n, v)| n.len() + v.len() + 8).sum();
    let mut out = BytesMut::with_capacity(size);
    for (name, value) in params.iter() {
        put_nv_len(&mut out, name.len())
            .and_then(|()| put_nv_len(&mut out, value.len()))
            .ok_or_else(|| {
                format!(
                    "parameter {} is longer than FastCGI allows (2 GiB)",
                    String::from_utf8_lossy(&name[..name.len().min(64)])
                )
            })?;
        out.put_slice(name);
        out.put_slice(value);
    }
    Ok(out)
}

/// Everything that precedes the request body: BEGIN_REQUEST, the PARAMS stream and its empty
/// terminator, and, when the body is known to be empty, the empty STDIN that ends it.
pub(crate) fn encode_request_head(
    params: &Params,
    keep_conn: bool,
    close_stdin: bool,
) -> Result<Bytes, String> {
    let pairs = encode_params(params)?;
    let records = pairs.len().div_ceil(CHUNK);
    let mut out = BytesMut::with_capacity(pairs.len() + (records + 4) * (HEADER_LEN + 8));
    let mut begin = [0u8; 8];
    begin[..2].copy_from_slice(&ROLE_RESPONDER.to_be_bytes());
    begin[2] = if keep_conn { FLAG_KEEP_CONN } else { 0 };
    put_record(&mut out, BEGIN_REQUEST, &begin);
    put_stream(&mut out, PARAMS, &pairs);
    put_record(&mut out, PARAMS, &[]);
    if close_stdin {
        put_record(&mut out, STDIN, &[]);
    }
    Ok(out.freeze())
}

/// One record received from php-fpm, padding already stripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub rtype: u8,
    pub request_id: u16,
    pub content: Bytes,
}

/// The body of an END_REQUEST record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndRequest {
    pub app_status: u32,
    pub protocol_status: ProtocolStatus,
}

impl EndRequest {
    pub(crate) fn parse(content: &[u8]) -> Result<EndRequest, String> {
        if content.len() < 8 {
            return Err(format!(
                "END_REQUEST record has {} content bytes, expected 8",
                content.len()
            ));
        }
        let mut c = content;
        let app_status = c.get_u32();
        let protocol_status = ProtocolStatus::from_u8(c.get_u8());
        Ok(EndRequest {
            app_status,
            protocol_status,
        })
    }
}

/// Takes one complete record off the front of `buf`, or returns `Ok(None)` when more bytes
/// are needed (and then reserves room for the rest of the record). Never panics on any input.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<Record>, String> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let version = buf[0];
    if version != VERSION_1 {
        return Err(format!(
            "received a record with FastCGI version {version} (expected 1): is this address \
             really a FastCGI server such as php-fpm, and not an HTTP server?"
        ));
    }
    let rtype = buf[1];
    let request_id = u16::from_be_bytes([buf[2], buf[3]]);
    let content_len = usize::from(u16::from_be_bytes([buf[4], buf[5]]));
    let padding = usize::from(buf[6]);
    let total = HEADER_LEN + content_len + padding;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let content = buf.split_to(content_len).freeze();
    buf.advance(padding);
    Ok(Some(Record {
        rtype,
        request_id,
        content,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn decode_all(mut buf: BytesMut) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(r) = decode(&mut buf).unwrap() {
            out.push(r);
        }
        assert!(buf.is_empty(), "{} bytes left over", buf.len());
        out
    }

    #[test]
    fn name_value_lengths_use_one_or_four_bytes() {
        let p = Params::new()
            .add("A", "b")
            .add("LONG", vec![b'x'; 200])
            .add(vec![b'N'; 127], "");
        let enc = encode_params(&p).unwrap();
        assert_eq!(&enc[..4], &[1, 1, b'A', b'b']);
        assert_eq!(&enc[4..9], &[4, 0x80, 0, 0, 200]);
        assert_eq!(&enc[9..13], b"LONG");
        assert_eq!(&enc[213..215], &[127, 0]);
        assert_eq!(enc.len(), 4 + 1 + 4 + 4 + 200 + 2 + 127);
    }

    #[test]
    fn request_head_layout() {
        let p = Params::new().add("REQUEST_METHOD", "GET");
        let head = encode_request_head(&p, true, true).unwrap();
        // BEGIN_REQUEST: responder role, keep-conn flag.
        assert_eq!(&head[..8], &[1, BEGIN_REQUEST, 0, 1, 0, 8, 0, 0]);
        assert_eq!(&head[8..16], &[0, 1, FLAG_KEEP_CONN, 0, 0, 0, 0, 0]);
        let recs = decode_all(BytesMut::from(&head[..]));
        let types: Vec<u8> = recs.iter().map(|r| r.rtype).collect();
        assert_eq!(types, vec![BEGIN_REQUEST, PARAMS, PARAMS, STDIN]);
        assert!(recs[2].content.is_empty() && recs[3].content.is_empty());
        assert!(recs.iter().all(|r| r.request_id == 1));
        // Padding keeps every record 8-aligned.
        assert_eq!(head.len() % 8, 0);

        let head = encode_request_head(&p, false, false).unwrap();
        assert_eq!(head[10], 0, "no keep-conn flag");
        let types: Vec<u8> = decode_all(BytesMut::from(&head[..]))
            .iter()
            .map(|r| r.rtype)
            .collect();
        assert_eq!(
            types,
            vec![BEGIN_REQUEST, PARAMS, PARAMS],
            "STDIN left open"
        );
    }

    #[test]
    fn big_params_span_records() {
        let p = Params::new().add("HTTP_X_BIG", vec![b'v'; 200_000]);
        let head = encode_request_head(&p, false, false).unwrap();
        let recs = decode_all(BytesMut::from(&head[..]));
        let params: Vec<&Record> = recs.iter().filter(|r| r.rtype == PARAMS).collect();
        assert_eq!(params.len(), 200_015usize.div_ceil(CHUNK) + 1);
        let joined: Vec<u8> = params.iter().flat_map(|r| r.content.to_vec()).collect();
        assert_eq!(joined, encode_params(&p).unwrap().to_vec());
        assert!(params.last().unwrap().content.is_empty());
    }

    #[test]
    fn long_stream_content_is_cut_not_truncated() {
        let data = vec![7u8; 3 * CHUNK + 5];
        let mut wire = BytesMut::new();
        put_stream(&mut wire, STDIN, &data);
        let recs = decode_all(wire);
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[3].content.len(), 5);
        let total: usize = recs.iter().map(|r| r.content.len()).sum();
        assert_eq!(total, data.len());

        let mut wire = BytesMut::new();
        put_stream(&mut wire, STDIN, &[]);
        assert!(wire.is_empty(), "empty data must not end the stream");
    }

    #[test]
    fn decode_waits_for_whole_record_and_skips_padding() {
        let mut wire = BytesMut::new();
        put_record(&mut wire, STDOUT, b"hello");
        put_record(&mut wire, STDERR, b"oops");
        let full = wire.clone();
        for cut in 0..full.len() {
            let mut part = BytesMut::from(&full[..cut]);
            let mut n = 0;
            while let Ok(Some(_)) = decode(&mut part) {
                n += 1;
            }
            let expected = if cut >= 32 {
                2
            } else if cut >= 16 {
                1
            } else {
                0
            };
            assert_eq!(n, expected, "cut at {cut}");
        }
        let recs = decode_all(full);
        assert_eq!(&recs[0].content[..], b"hello");
        assert_eq!(recs[0].rtype, STDOUT);
        assert_eq!(&recs[1].content[..], b"oops");
        assert_eq!(recs[1].rtype, STDERR);
    }

    #[test]
    fn end_request_parsing() {
        let e = EndRequest::parse(&[0, 0, 0, 7, 2, 0, 0, 0]).unwrap();
        assert_eq!(e.app_status, 7);
        assert_eq!(e.protocol_status, ProtocolStatus::Overloaded);
        let e = EndRequest::parse(&[0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(e.protocol_status, ProtocolStatus::RequestComplete);
        assert_eq!(
            EndRequest::parse(&[0, 0, 0, 0, 9, 0, 0, 0])
                .unwrap()
                .protocol_status,
            ProtocolStatus::Other(9)
        );
        assert!(EndRequest::parse(&[0, 0, 0]).is_err());
    }

    #[test]
    fn an_http_answer_is_a_protocol_error() {
        let mut b = BytesMut::from(&b"HTTP/1.1 400 Bad Request\r\n"[..]);
        let err = decode(&mut b).unwrap_err();
        assert!(err.contains("not an HTTP server"), "{err}");
    }

    /// Pseudo-random and truncated inputs: the decoder returns records or errors, never
    /// panics, and always consumes what it returns.
    #[test]
    fn decoder_survives_garbage() {
        let mut state: u64 = 0x5eed;
        let mut next = move || {
            // xorshift64: deterministic, good enough to shake a parser.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 200) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 2 == 0 && !data.is_empty() {
                data[0] = VERSION_1; // get past the version check more often
            }
            let mut buf = BytesMut::from(&data[..]);
            for _ in 0..=len {
                let before = buf.len();
                match decode(&mut buf) {
                    Ok(Some(_)) => assert!(buf.len() < before),
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
}
