//! [`Object`]: JSON object entries in JavaScript property order.
//!
//! Layout: one `Vec` of entries. The leading entries are the canonical
//! array-index keys in ascending numeric order; the rest ("named" keys) follow
//! in first-insertion order. Index keys are found by binary search; named keys
//! by a linear scan, or, once there are more than [`HASH_THRESHOLD`] of them,
//! through an open-addressing hash table of positions (no key copies).

use std::cmp::Ordering;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::mem;

use super::value::{json_eq, JsString, Value};
use super::write;

/// Named-key count above which lookups go through the hash table.
const HASH_THRESHOLD: usize = 16;
const EMPTY: usize = usize::MAX;

/// A JSON object with JavaScript own-property order and semantics.
#[derive(Clone, Default)]
pub struct Object {
    entries: Vec<(JsString, Value)>,
    names: Option<Box<NameIndex>>,
}

/// Hash table over the named entries: slot -> position relative to the first
/// named entry. Positions are unaffected by index-key insertions.
#[derive(Clone)]
struct NameIndex {
    state: RandomState,
    slots: Box<[usize]>,
}

impl NameIndex {
    fn build(named: &[(JsString, Value)]) -> NameIndex {
        let cap = (named.len() * 2).next_power_of_two().max(64);
        let mut t = NameIndex {
            state: RandomState::new(),
            slots: vec![EMPTY; cap].into(),
        };
        for (p, (k, _)) in named.iter().enumerate() {
            t.place(k.as_wtf8(), p);
        }
        t
    }

    #[inline]
    fn home(&self, key: &[u8]) -> usize {
        (self.state.hash_one(key) as usize) & (self.slots.len() - 1)
    }

    fn find(&self, named: &[(JsString, Value)], key: &[u8]) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut s = self.home(key);
        loop {
            let p = self.slots[s];
            if p == EMPTY {
                return None;
            }
            if named[p].0.as_wtf8() == key {
                return Some(p);
            }
            s = (s + 1) & mask;
        }
    }

    /// Records a key known to be absent at relative position `pos`.
    fn place(&mut self, key: &[u8], pos: usize) {
        let mask = self.slots.len() - 1;
        let mut s = self.home(key);
        while self.slots[s] != EMPTY {
            s = (s + 1) & mask;
        }
        self.slots[s] = pos;
    }
}

/// True when `key` is a canonical array index: the decimal form, without
/// sign or leading zeros, of an integer `0 <= n <= 4294967294`.
#[inline]
pub fn is_array_index(key: &[u8]) -> bool {
    match key {
        [] => false,
        [d] => d.is_ascii_digit(),
        [b'0', ..] => false,
        _ if key.len() > 10 => false,
        _ => key.iter().all(u8::is_ascii_digit) && (key.len() < 10 || key <= &b"4294967294"[..]),
    }
}

/// Numeric order of two canonical array-index keys.
#[inline]
fn cmp_index(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object::default()
    }

    /// An empty object with room for `n` entries.
    pub fn with_capacity(n: usize) -> Object {
        Object {
            entries: Vec::with_capacity(n),
            names: None,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the object has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of leading canonical-array-index entries.
    #[inline]
    fn index_count(&self) -> usize {
        match (self.entries.first(), self.entries.last()) {
            (Some((k, _)), _) if !is_array_index(k.as_wtf8()) => 0,
            (_, Some((k, _))) if is_array_index(k.as_wtf8()) => self.entries.len(),
            _ => self
                .entries
                .partition_point(|(k, _)| is_array_index(k.as_wtf8())),
        }
    }

    /// `Ok(position)` of `key`, or `Err(position it would be inserted at)`.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        let n = self.index_count();
        if is_array_index(key) {
            return self.entries[..n].binary_search_by(|(k, _)| cmp_index(k.as_wtf8(), key));
        }
        let named = &self.entries[n..];
        let found = match &self.names {
            Some(t) => t.find(named, key),
            None => named.iter().position(|(k, _)| k.as_wtf8() == key),
        };
        found.map(|p| n + p).ok_or(self.entries.len())
    }

    /// The value of `key` given as WTF-8 bytes.
    pub fn get_wtf8(&self, key: &[u8]) -> Option<&Value> {
        self.find(key).ok().map(|p| &self.entries[p].1)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.get_wtf8(key.as_bytes())
    }

    /// The value of `key` given as a [`JsString`].
    pub fn get_js(&self, key: &JsString) -> Option<&Value> {
        self.get_wtf8(key.as_wtf8())
    }

    /// The value of `key`, mutable.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        let p = self.find(key.as_bytes()).ok()?;
        Some(&mut self.entries[p].1)
    }

    /// The value of `key` given as a [`JsString`], mutable.
    pub fn get_js_mut(&mut self, key: &JsString) -> Option<&mut Value> {
        let p = self.find(key.as_wtf8()).ok()?;
        Some(&mut self.entries[p].1)
    }

    /// True when `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key.as_bytes()).is_ok()
    }

    /// True when `key`, given as a [`JsString`], is present.
    pub fn contains_key_js(&self, key: &JsString) -> bool {
        self.find(key.as_wtf8()).is_ok()
    }

    /// JavaScript property assignment: an existing key keeps its position and
    /// takes the new value; a new index key goes among the leading index keys
    /// in ascending order; any other new key is appended. Returns the old value.
    pub fn insert(&mut self, key: JsString, value: Value) -> Option<Value> {
        match self.find(key.as_wtf8()) {
            Ok(p) => Some(mem::replace(&mut self.entries[p].1, value)),
            Err(p) if is_array_index(key.as_wtf8()) => {
                self.entries.insert(p, (key, value));
                None
            }
            Err(_) => {
                self.push_named(key, value);
                None
            }
        }
    }

    /// [`insert`](Self::insert) with a `&str` key.
    pub fn insert_str(&mut self, key: &str, value: Value) -> Option<Value> {
        self.insert(JsString::from_str(key), value)
    }

    /// Appends a named (non-index) key known to be absent.
    fn push_named(&mut self, key: JsString, value: Value) {
        self.entries.push((key, value));
        let n = self.index_count();
        let named = &self.entries[n..];
        if let Some(t) = self.names.as_mut() {
            if named.len() * 2 <= t.slots.len() {
                t.place(named[named.len() - 1].0.as_wtf8(), named.len() - 1);
                return;
            }
        }
        if named.len() > HASH_THRESHOLD {
            self.names = Some(Box::new(NameIndex::build(named)));
        }
    }

    /// Removes `key`, keeping the order of the other keys.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.remove_wtf8(key.as_bytes())
    }

    /// [`remove`](Self::remove) with a [`JsString`] key.
    pub fn remove_js(&mut self, key: &JsString) -> Option<Value> {
        self.remove_wtf8(key.as_wtf8())
    }

    fn remove_wtf8(&mut self, key: &[u8]) -> Option<Value> {
        let p = self.find(key).ok()?;
        let named_key = !is_array_index(key);
        let (_, v) = self.entries.remove(p);
        if named_key && self.names.is_some() {
            let named = &self.entries[self.index_count()..];
            self.names = (named.len() > HASH_THRESHOLD).then(|| Box::new(NameIndex::build(named)));
        }
        Some(v)
    }

    /// Entries in property order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&JsString, &Value)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Entries in property order, values mutable.
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&JsString, &mut Value)> + ExactSizeIterator {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Keys in property order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &JsString> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// Values in property order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Values in property order, mutable.
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// The entries in property order.
    pub fn as_slice(&self) -> &[(JsString, Value)] {
        &self.entries
    }

    /// JSON text of this object (`JSON.stringify`).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        write::write_object(self, &mut out, usize::MAX);
        out
    }

    /// Builds an object from entries in source order, as `JSON.parse` does:
    /// index keys sorted first, a duplicate key keeps its first position and
    /// takes its last value.
    pub fn from_entries(mut entries: Vec<(JsString, Value)>) -> Object {
        let n = entries.len();
        if n <= HASH_THRESHOLD
            && !entries.iter().any(|(k, _)| is_array_index(k.as_wtf8()))
            && (1..n).all(|i| entries[..i].iter().all(|(k, _)| *k != entries[i].0))
        {
            return Object {
                entries,
                names: None,
            };
        }
        let mut index: Vec<(JsString, Value)> = Vec::new();
        let mut named: Vec<(JsString, Value)> = Vec::with_capacity(n);
        for e in entries.drain(..) {
            if is_array_index(e.0.as_wtf8()) {
                index.push(e);
            } else {
                named.push(e);
            }
        }
        // Stable: equal keys stay in source order, so the last one wins below.
        index.sort_by(|a, b| cmp_index(a.0.as_wtf8(), b.0.as_wtf8()));
        entries.reserve(n);
        for (k, v) in index {
            match entries.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => entries.push((k, v)),
            }
        }
        let mut obj = Object {
            entries,
            names: None,
        };
        let first_named = obj.entries.len();
        for (k, v) in named {
            let found = {
                let named = &obj.entries[first_named..];
                match &obj.names {
                    Some(t) => t.find(named, k.as_wtf8()),
                    None => named.iter().position(|(nk, _)| *nk == k),
                }
            };
            match found {
                Some(p) => obj.entries[first_named + p].1 = v,
                None => obj.push_named(k, v),
            }
        }
        obj
    }

    /// Removes every entry, yielding the values (used by the iterative drop).
    pub(super) fn take_values(&mut self) -> impl Iterator<Item = Value> {
        self.names = None;
        mem::take(&mut self.entries).into_iter().map(|(_, v)| v)
    }

    /// An object with `entries` (cloned from `self`, same order) and `self`'s index.
    pub(super) fn clone_with_entries(&self, entries: Vec<(JsString, Value)>) -> Object {
        Object {
            entries,
            names: self.names.clone(),
        }
    }

    /// Pushes the value pairs to compare when `self` and `other` have the same
    /// key set; false when they do not.
    pub(super) fn push_value_pairs<'a>(
        &'a self,
        other: &'a Object,
        work: &mut Vec<(&'a Value, &'a Value)>,
    ) -> bool {
        if self.len() != other.len() {
            return false;
        }
        for (k, v) in &self.entries {
            match other.get_js(k) {
                Some(w) => work.push((v, w)),
                None => return false,
            }
        }
        true
    }
}

impl PartialEq for Object {
    /// Same key set and equal values; key order is ignored.
    fn eq(&self, other: &Object) -> bool {
        let mut work = Vec::new();
        self.push_value_pairs(other, &mut work) && json_eq(work)
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let complete = write::write_object(self, &mut out, write::DEBUG_LIMIT);
        write::finish_debug(&mut out, complete);
        f.write_str(&out)
    }
}

impl FromIterator<(JsString, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (JsString, Value)>>(iter: I) -> Object {
        Object::from_entries(iter.into_iter().collect())
    }
}

impl<'a> FromIterator<(&'a str, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (&'a str, Value)>>(iter: I) -> Object {
        iter.into_iter()
            .map(|(k, v)| (JsString::from_str(k), v))
            .collect()
    }
}

impl IntoIterator for Object {
    type Item = (JsString, Value);
    type IntoIter = std::vec::IntoIter<(JsString, Value)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a JsString, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (JsString, Value)>,
        fn(&'a (JsString, Value)) -> (&'a JsString, &'a Value),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(o: &Object) -> Vec<String> {
        o.keys().map(|k| k.to_string()).collect()
    }

    #[test]
    fn array_index_keys() {
        for k in ["0", "1", "9", "10", "4294967294", "123"] {
            assert!(is_array_index(k.as_bytes()), "{k}");
        }
        for k in [
            "",
            "01",
            "00",
            "-1",
            "+1",
            "1.0",
            "1e3",
            " 1",
            "4294967295",
            "4294967296",
            "99999999999",
            "a",
            "١",
        ] {
            assert!(!is_array_index(k.as_bytes()), "{k}");
        }
    }

    #[test]
    fn insert_follows_javascript_order() {
        let mut o = Object::new();
        assert!(o.insert_str("b", 1.0.into()).is_none());
        o.insert_str("10", 2.0.into());
        o.insert_str("a", 3.0.into());
        o.insert_str("2", 4.0.into());
        o.insert_str("4294967295", 5.0.into());
        o.insert_str("01", 6.0.into());
        o.insert_str("0", 7.0.into());
        assert_eq!(keys(&o), ["0", "2", "10", "b", "a", "4294967295", "01"]);
        assert_eq!(o.insert_str("b", 8.0.into()), Some(Value::from(1.0)));
        assert_eq!(o.insert_str("10", 9.0.into()), Some(Value::from(2.0)));
        assert_eq!(keys(&o), ["0", "2", "10", "b", "a", "4294967295", "01"]);
        assert_eq!(o.get("b"), Some(&Value::from(8.0)));
        assert_eq!(o.get("10"), Some(&Value::from(9.0)));
        assert_eq!(o.get("x"), None);
        assert_eq!(o.get("1"), None);
        let mut o = Object::new();
        o.insert_str("10", Value::Null);
        o.insert_str("2", Value::Null);
        assert_eq!(keys(&o), ["2", "10"]);
        let o: Object = [("__proto__", Value::Null), ("1", Value::Null)]
            .into_iter()
            .collect();
        assert_eq!(keys(&o), ["1", "__proto__"]);
    }

    #[test]
    fn get_mut_remove_contains() {
        let mut o: Object = [
            ("a", 1.0.into()),
            ("1", 2.0.into()),
            ("b", 3.0.into()),
            ("0", 4.0.into()),
        ]
        .into_iter()
        .collect();
        *o.get_mut("b").unwrap() = Value::str("x");
        *o.get_js_mut(&JsString::from("1")).unwrap() = Value::Bool(true);
        assert!(o.contains_key("a") && o.contains_key("0") && !o.contains_key("c"));
        assert!(o.contains_key_js(&"b".into()));
        assert_eq!(o.to_json(), r#"{"0":4,"1":true,"a":1,"b":"x"}"#);
        assert_eq!(o.remove("a"), Some(Value::from(1.0)));
        assert_eq!(o.remove("a"), None);
        assert_eq!(o.remove("0"), Some(Value::from(4.0)));
        assert_eq!(o.to_json(), r#"{"1":true,"b":"x"}"#);
        assert_eq!(o.remove_js(&"b".into()), Some(Value::str("x")));
        assert_eq!(o.len(), 1);
        for (_, v) in o.iter_mut() {
            *v = Value::Null;
        }
        assert_eq!(o.values().collect::<Vec<_>>(), [&Value::Null]);
        let pairs: Vec<(JsString, Value)> = o.into_iter().collect();
        assert_eq!(pairs, [(JsString::from("1"), Value::Null)]);
    }

    #[test]
    fn hashed_objects_stay_consistent() {
        let mut o = Object::new();
        for i in 0..1000 {
            o.insert_str(&format!("k{i}"), Value::from(i as u64));
            if i % 7 == 0 {
                o.insert_str(&(1000 - i).to_string(), Value::Null);
            }
        }
        assert!(o.names.is_some());
        for i in (0..1000).step_by(3) {
            assert_eq!(o.remove(&format!("k{i}")), Some(Value::from(i as u64)));
        }
        for i in 0..1000 {
            let got = o.get(&format!("k{i}"));
            assert_eq!(
                got,
                (i % 3 != 0).then(|| Value::from(i as u64)).as_ref(),
                "k{i}"
            );
        }
        let idx: Vec<u64> = o
            .keys()
            .take_while(|k| is_array_index(k.as_wtf8()))
            .map(|k| k.to_string().parse().unwrap())
            .collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]) && idx.len() == 143);
        let c = o.clone();
        assert_eq!(c.get("k998"), Some(&Value::from(998u64)));
        assert_eq!(c, o);
        // Down to the threshold, and back.
        for i in 0..1000 {
            o.remove(&format!("k{i}"));
        }
        assert!(o.names.is_none());
        o.insert_str("k5", Value::Null);
        assert!(o.contains_key("k5"));
    }

    #[test]
    fn equality_ignores_order() {
        let a: Object = [
            ("a", 1.0.into()),
            ("b", Value::obj([("x", 1.0.into()), ("y", 2.0.into())])),
        ]
        .into_iter()
        .collect();
        let b: Object = [
            ("b", Value::obj([("y", 2.0.into()), ("x", 1.0.into())])),
            ("a", 1.0.into()),
        ]
        .into_iter()
        .collect();
        assert_eq!(a, b);
        let c: Object = [("a", 1.0.into()), ("c", Value::Null)]
            .into_iter()
            .collect();
        assert_ne!(a, c);
        let d: Object = [("a", 1.0.into())].into_iter().collect();
        assert_ne!(a, d);
        assert_ne!(d, a);
        assert_eq!(format!("{d:?}"), r#"{"a":1}"#);
    }

    #[test]
    fn from_entries_semantics() {
        let e = |k: &str, v: f64| (JsString::from(k), Value::from(v));
        let o = Object::from_entries(vec![
            e("b", 1.0),
            e("10", 2.0),
            e("a", 3.0),
            e("2", 4.0),
            e("10", 5.0),
            e("b", 6.0),
        ]);
        assert_eq!(o.to_json(), r#"{"2":4,"10":5,"b":6,"a":3}"#);
        let many: Vec<_> = (0..40)
            .map(|i| e(&format!("k{}", i % 20), f64::from(i)))
            .collect();
        let o = Object::from_entries(many);
        assert_eq!(o.len(), 20);
        assert_eq!(o.keys().next().unwrap(), "k0");
        assert_eq!(o.get("k0"), Some(&Value::from(20.0)));
    }
}
