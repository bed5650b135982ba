//! `Accept-Encoding` (RFC 9110 §12.5.3), parsed once per request without allocating.

use http::header::{HeaderMap, ACCEPT_ENCODING};

use crate::coding::{trim_ows, Coding};

/// What one request's `Accept-Encoding` says about the codings levee knows.
///
/// Choices where the RFC leaves room, all on the side of never sending something the
/// client cannot read:
/// - **No header**: RFC 9110 says any coding is then acceptable, but clients that send no
///   `Accept-Encoding` (scripts, old bots, health checks) are exactly the ones likely not
///   to decode anything, so only identity is acceptable.
/// - **Empty header** (`Accept-Encoding:`): identity only, as the RFC says.
/// - **Identity not named and no `*`**: acceptable (the RFC's default) but with the lowest
///   possible weight, q=0.001, so any coding the client did name wins over it.
/// - **A coding named twice** (`gzip, gzip;q=0`): the lowest weight counts, so a refusal
///   anywhere in the header stands.
/// - **Malformed elements** (a bad `q`, such as `q=2`, `q=0.5x` or `q=.5`): the element
///   is ignored, as if absent. Other parameters are ignored; `q` is case-insensitive and
///   spaces around `=` are tolerated.
/// - Codings levee does not produce (`deflate`, `compress`, ...) play no part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Whether the request had at least one `Accept-Encoding` field line.
    present: bool,
    /// Explicit weights in thousandths, indexed by [`slot`].
    q: [Option<u16>; 4],
    /// The weight of `*`: every coding not named explicitly.
    star: Option<u16>,
}

/// The weight of identity when the client named neither it nor `*`.
const IDENTITY_UNNAMED: u16 = 1;

fn slot(c: Coding) -> usize {
    match c {
        Coding::Identity => 0,
        Coding::Gzip => 1,
        Coding::Br => 2,
        Coding::Zstd => 3,
    }
}

impl Accepted {
    /// Parses every `Accept-Encoding` field line of a request, as one list (RFC 9110
    /// §5.3). Never fails: what cannot be understood is ignored.
    pub fn parse(headers: &HeaderMap) -> Accepted {
        let mut a = Accepted::default();
        for v in headers.get_all(ACCEPT_ENCODING) {
            a.present = true;
            for element in v.as_bytes().split(|&b| b == b',') {
                a.add(element);
            }
        }
        a
    }

    /// Parses one field value, as if it were the request's only `Accept-Encoding`.
    pub fn from_value(v: &str) -> Accepted {
        let mut a = Accepted {
            present: true,
            ..Accepted::default()
        };
        for element in v.as_bytes().split(|&b| b == b',') {
            a.add(element);
        }
        a
    }

    /// `codings = ( content-coding / "identity" / "*" ) *( OWS ";" OWS "q=" qvalue )`
    fn add(&mut self, element: &[u8]) {
        let mut parts = element.split(|&b| b == b';');
        let Some(token) = parts.next().map(trim_ows) else {
            return;
        };
        if token.is_empty() {
            return;
        }
        let mut q = 1000;
        for param in parts {
            let param = trim_ows(param);
            if param.is_empty() {
                continue;
            }
            let (name, value) = match param.iter().position(|&b| b == b'=') {
                Some(i) => (trim_ows(&param[..i]), Some(trim_ows(&param[i + 1..]))),
                None => (param, None),
            };
            if !name.eq_ignore_ascii_case(b"q") {
                continue;
            }
            match value.and_then(parse_q) {
                Some(v) => q = q.min(v),
                None => return,
            }
        }
        let entry = if token == b"*" {
            &mut self.star
        } else {
            match Coding::from_token_bytes(token) {
                Some(c) => &mut self.q[slot(c)],
                None => return,
            }
        };
        *entry = Some(entry.map_or(q, |old| old.min(q)));
    }

    /// Whether the request had an `Accept-Encoding` field at all.
    pub fn is_present(&self) -> bool {
        self.present
    }

    /// The weight of a coding in thousandths (`q=0.5` is 500); 0 means not acceptable.
    pub fn q(&self, c: Coding) -> u16 {
        if !self.present {
            return if c == Coding::Identity { 1000 } else { 0 };
        }
        if let Some(q) = self.q[slot(c)] {
            return q;
        }
        // `*` stands for every coding not named, identity included (§12.5.3).
        if let Some(q) = self.star {
            return q;
        }
        if c == Coding::Identity {
            IDENTITY_UNNAMED
        } else {
            0
        }
    }

    /// Whether the client may be sent this coding.
    pub fn accepts(&self, c: Coding) -> bool {
        self.q(c) > 0
    }

    /// The coding to send among `candidates`: the acceptable one with the highest weight,
    /// ties going to the one listed first, so list the cheapest first (one already stored
    /// compressed before one to compress now) or the smallest (`Br, Zstd, Gzip`).
    ///
    /// List [`Coding::Identity`] if sending the content as it is is possible (it nearly
    /// always is): it is not implied. `None` means nothing listed is acceptable, which
    /// with identity listed only happens after `identity;q=0` or `*;q=0`. RFC 9110
    /// §12.5.3 then allows either a 406 or ignoring the header; levee should send
    /// identity anyway, as browsers and caches expect, and keep 406 for nothing.
    pub fn choose(&self, candidates: &[Coding]) -> Option<Coding> {
        let mut best: Option<(Coding, u16)> = None;
        for &c in candidates {
            let q = self.q(c);
            if q > 0 && !matches!(best, Some((_, bq)) if bq >= q) {
                best = Some((c, q));
            }
        }
        best.map(|(c, _)| c)
    }
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in thousandths.
fn parse_q(v: &[u8]) -> Option<u16> {
    let (&first, rest) = v.split_first()?;
    let int = match first {
        b'0' => 0,
        b'1' => 1000,
        _ => return None,
    };
    let frac = match rest {
        [] => &[][..],
        [b'.', frac @ ..] if frac.len() <= 3 => frac,
        _ => return None,
    };
    let mut value = 0u16;
    let mut unit = 100u16;
    for &d in frac {
        if !d.is_ascii_digit() {
            return None;
        }
        value += u16::from(d - b'0') * unit;
        unit /= 10;
    }
    if int == 1000 && value != 0 {
        return None;
    }
    Some(int + value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::*;

    #[test]
    fn qvalues() {
        assert_eq!(parse_q(b"1"), Some(1000));
        assert_eq!(parse_q(b"1."), Some(1000));
        assert_eq!(parse_q(b"1.000"), Some(1000));
        assert_eq!(parse_q(b"0"), Some(0));
        assert_eq!(parse_q(b"0.5"), Some(500));
        assert_eq!(parse_q(b"0.05"), Some(50));
        assert_eq!(parse_q(b"0.001"), Some(1));
        assert_eq!(parse_q(b"0.999"), Some(999));
        for bad in [
            &b""[..],
            b"1.001",
            b"2",
            b"0.1234",
            b".5",
            b"0,5",
            b"0.5x",
            b"-0",
            b"0..",
            b"abc",
            b"0.\xff",
        ] {
            assert_eq!(parse_q(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn trim() {
        assert_eq!(trim_ows(b"  a b\t "), b"a b");
        assert_eq!(trim_ows(b" \t "), b"");
        assert_eq!(trim_ows(b""), b"");
        assert_eq!(trim_ows(b"x"), b"x");
    }

    #[test]
    fn weights_are_the_lowest_of_duplicates() {
        let a = Accepted::from_value("gzip;q=0.5, gzip;q=0.8, br;q=0.9;q=0.2");
        assert_eq!(a.q(Gzip), 500);
        assert_eq!(a.q(Br), 200);
    }
}
