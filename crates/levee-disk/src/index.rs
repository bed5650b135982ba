//! What the disk holds, kept in memory: each record's bytes (for the byte bound) and
//! keep-until (for expiry), and the order eviction takes them in.
//!
//! Eviction is CLOCK (second chance): records queue in the order they were written; a
//! read sets a record's `used` bit; the hand takes records from the front, gives one
//! whose bit is set another round (bit cleared, back of the queue) and evicts the first
//! whose bit is clear, or any it finds expired. That approximates least recently used
//! without moving anything on a read (a hit only sets a bit under the lock), and the
//! hand walks in write order, so the files that go are the old, unread ones. Memory per
//! record: a 40-byte map slot and a 24-byte queue entry, no URL; with the tables' spare
//! room, 70 to 140 bytes (nginx's keys_zone: about 128 per key).
//!
//! Pure bookkeeping, no files: the caller unlinks what `make_room` and `take_expired`
//! return.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::dir::Id;

/// Ids are hashes already: the map uses them as they are (folded by `Id`'s `Hash`).
#[derive(Default)]
struct Fold(u64);

impl Hasher for Fold {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// An id as two words: 8-byte alignment, where a u128 would pad every entry to 16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key([u64; 2]);

impl From<Id> for Key {
    fn from(id: Id) -> Key {
        Key([(id.0 >> 64) as u64, id.0 as u64])
    }
}

impl From<Key> for Id {
    fn from(k: Key) -> Id {
        Id((u128::from(k.0[0]) << 64) | u128::from(k.0[1]))
    }
}

#[derive(Debug)]
struct Slot {
    size: u64,
    keep_until_ms: u64,
    /// Which of the queue's entries for this key is the live one.
    gen: u32,
    used: bool,
}

#[derive(Debug, Default)]
pub struct Index {
    slots: HashMap<Key, Slot, BuildHasherDefault<Fold>>,
    /// Eviction order; entries whose slot is gone or has another `gen` are skipped.
    hand: VecDeque<(Key, u32)>,
    bytes: u64,
    next_gen: u32,
}

impl Index {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of all records, as `dir::charged` counts them.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A record now in place (written, or found by the opening scan). A rewritten one
    /// keeps its place in the queue with its bit set: it was just written. Returns the
    /// bytes of the record it replaced.
    pub fn insert(&mut self, id: Id, size: u64, keep_until_ms: u64) -> Option<u64> {
        let key = Key::from(id);
        self.bytes += size;
        if let Some(slot) = self.slots.get_mut(&key) {
            let old = std::mem::replace(&mut slot.size, size);
            slot.keep_until_ms = keep_until_ms;
            slot.used = true;
            self.bytes -= old;
            return Some(old);
        }
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        self.slots.insert(
            key,
            Slot {
                size,
                keep_until_ms,
                gen,
                used: false,
            },
        );
        self.hand.push_back((key, gen));
        None
    }

    /// Forgets a record (its file is being removed). Its queue entry goes stale.
    pub fn remove(&mut self, id: Id) -> bool {
        match self.slots.remove(&Key::from(id)) {
            Some(slot) => {
                self.bytes -= slot.size;
                self.compact_hand();
                true
            }
            None => false,
        }
    }

    /// A read: the record gets a second chance.
    pub fn touch(&mut self, id: Id) {
        if let Some(slot) = self.slots.get_mut(&Key::from(id)) {
            slot.used = true;
        }
    }

    /// The opening scan has read the record's keep-until.
    pub fn set_keep(&mut self, id: Id, keep_until_ms: u64) {
        if let Some(slot) = self.slots.get_mut(&Key::from(id)) {
            slot.keep_until_ms = keep_until_ms;
        }
    }

    /// Takes records out until `need` more bytes fit under `capacity`, and returns them
    /// (their files are to be removed).
    pub fn make_room(&mut self, need: u64, capacity: u64, now_ms: u64) -> Vec<Id> {
        let mut out = Vec::new();
        while self.bytes.saturating_add(need) > capacity {
            let Some((key, gen)) = self.hand.pop_front() else {
                break;
            };
            let Some(slot) = self.slots.get_mut(&key).filter(|s| s.gen == gen) else {
                continue;
            };
            if slot.used && slot.keep_until_ms > now_ms {
                slot.used = false;
                self.hand.push_back((key, gen));
                continue;
            }
            self.bytes -= slot.size;
            self.slots.remove(&key);
            out.push(Id::from(key));
        }
        self.compact_hand();
        out
    }

    /// Takes out every record past its keep-until, and returns them.
    pub fn take_expired(&mut self, now_ms: u64) -> Vec<Id> {
        let mut out = Vec::new();
        let mut freed = 0;
        self.slots.retain(|key, slot| {
            let keep = slot.keep_until_ms > now_ms;
            if !keep {
                freed += slot.size;
                out.push(Id::from(*key));
            }
            keep
        });
        self.bytes -= freed;
        self.compact_hand();
        out
    }

    /// Every record, in eviction order (oldest first).
    pub fn ids(&self) -> Vec<Id> {
        self.hand
            .iter()
            .filter(|(k, g)| self.slots.get(k).is_some_and(|s| s.gen == *g))
            .map(|(k, _)| Id::from(*k))
            .collect()
    }

    /// Drops stale queue entries once they outnumber the live ones.
    fn compact_hand(&mut self) {
        if self.hand.len() > 2 * self.slots.len() + 1024 {
            let slots = &self.slots;
            self.hand
                .retain(|(k, g)| slots.get(k).is_some_and(|s| s.gen == *g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOREVER: u64 = u64::MAX;

    #[test]
    fn bytes_follow_inserts_replacements_and_removals() {
        let mut ix = Index::default();
        assert_eq!(ix.insert(Id(1), 100, FOREVER), None);
        assert_eq!(ix.insert(Id(2), 50, FOREVER), None);
        assert_eq!(ix.insert(Id(1), 30, FOREVER), Some(100));
        assert_eq!((ix.len(), ix.bytes()), (2, 80));
        assert!(ix.remove(Id(2)));
        assert!(!ix.remove(Id(2)));
        assert_eq!((ix.len(), ix.bytes()), (1, 30));
        assert_eq!(Id::from(Key::from(Id(u128::MAX - 5))), Id(u128::MAX - 5));
    }

    #[test]
    fn eviction_takes_the_oldest_unread_first() {
        let mut ix = Index::default();
        for i in 0..4 {
            ix.insert(Id(i), 10, FOREVER);
        }
        ix.touch(Id(0));
        // Room for 15 more under 40: two records go; 0 was read, so 1 and 2.
        assert_eq!(ix.make_room(15, 40, 0), vec![Id(1), Id(2)]);
        assert_eq!(ix.bytes(), 20);
        // 0 went behind 3 with its second chance: 3 goes first.
        assert_eq!(ix.make_room(30, 40, 0), vec![Id(3)]);
        assert_eq!(ix.ids(), vec![Id(0)]);
    }

    #[test]
    fn an_expired_record_gets_no_second_chance() {
        let mut ix = Index::default();
        ix.insert(Id(1), 10, 500);
        ix.insert(Id(2), 10, FOREVER);
        ix.touch(Id(1));
        assert_eq!(ix.make_room(10, 20, 1000), vec![Id(1)]);
        ix.insert(Id(3), 10, 900);
        assert_eq!(ix.take_expired(1000), vec![Id(3)]);
        assert_eq!((ix.len(), ix.bytes()), (1, 10));
    }

    #[test]
    fn stale_queue_entries_are_skipped_and_dropped() {
        let mut ix = Index::default();
        for round in 0..10u64 {
            for i in 0..1000 {
                ix.insert(Id(i), 1, FOREVER);
            }
            for i in 0..1000 {
                ix.remove(Id(i));
            }
            assert!(ix.hand.len() <= 1024 + 2 * ix.len() + 1000, "round {round}");
        }
        ix.insert(Id(7), 1, FOREVER);
        ix.insert(Id(8), 1, FOREVER);
        assert_eq!(ix.ids(), vec![Id(7), Id(8)]);
        assert_eq!(ix.make_room(1, 2, 0), vec![Id(7)]);
    }
}
