//! A proven session, as the tiers below memory keep and share it: levee-proxy's
//! request/proven.rs decides which session values the backend gave out as people's and
//! keeps a 128-bit hash of each (never the value); a change is one line of text in the
//! disk tier's `sessions` file and between nodes through Redis, as a purge is a
//! [`Ban`](crate::ban::Ban) line.

/// A session value's hash proven at `at` (unix seconds), or forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofChange {
    Proven { hash: u128, at: u64 },
    Forgotten { hash: u128 },
}

impl ProofChange {
    pub fn hash(&self) -> u128 {
        match *self {
            ProofChange::Proven { hash, .. } | ProofChange::Forgotten { hash } => hash,
        }
    }

    /// `+<32 hex> <at>` or `-<32 hex>`.
    pub fn to_line(&self) -> String {
        match *self {
            ProofChange::Proven { hash, at } => format!("+{hash:032x} {at}"),
            ProofChange::Forgotten { hash } => format!("-{hash:032x}"),
        }
    }

    /// Reads [`ProofChange::to_line`] back; None for anything else (a line cut by a
    /// crash, a stranger's message).
    pub fn from_line(line: &str) -> Option<ProofChange> {
        let line = line.trim_end_matches(['\r', '\n']);
        let (sign, rest) = line.split_at_checked(1)?;
        let (hex, at) = match sign {
            "+" => {
                let (hex, at) = rest.split_once(' ')?;
                (hex, Some(at.parse::<u64>().ok()?))
            }
            "-" => (rest, None),
            _ => return None,
        };
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let hash = u128::from_str_radix(hex, 16).ok()?;
        Some(match at {
            Some(at) => ProofChange::Proven { hash, at },
            None => ProofChange::Forgotten { hash },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_strangers_do_not() {
        for c in [
            ProofChange::Proven {
                hash: u128::MAX - 7,
                at: 1_790_000_000,
            },
            ProofChange::Forgotten { hash: 42 },
        ] {
            assert_eq!(ProofChange::from_line(&c.to_line()), Some(c));
            assert_eq!(
                ProofChange::from_line(&format!("{}\n", c.to_line())),
                Some(c)
            );
        }
        for bad in [
            "",
            "+",
            "+0123",
            "*00000000000000000000000000000001",
            "+00000000000000000000000000000001",
            "+00000000000000000000000000000001 x",
            "-0000000000000000000000000000000g",
            "-000000000000000000000000000000001",
            "-é0000000000000000000000000000000",
        ] {
            assert_eq!(ProofChange::from_line(bad), None, "{bad:?}");
        }
    }
}
