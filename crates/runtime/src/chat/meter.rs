//! The byte meter a chat template renders under, and the gate functions that charge it.
//!
//! A chat template comes from a model file, so it is untrusted code. minijinja's fuel bounds
//! how many instructions it runs, but one instruction can double a string (`s ~ s`), so a
//! few dozen steps can ask for gigabytes, and one step can scan a huge value. minijinja has
//! no allocation hook, so [`super::rewrite`] threads calls to the gates below through the
//! compiled instructions:
//!
//! - **before** an operator, filter, method or test, [`Gate::Check`] measures the operands
//!   (their display length, counted without building it), refuses when the result could
//!   exceed what is left of the budget, and hands the operands back unchanged, so the
//!   original instruction then runs with minijinja's own semantics;
//! - **after** any instruction that makes a value, [`Gate::New`] charges the value's size;
//! - **before** text is written, [`Gate::Out`] and [`Gate::Raw`] charge its bytes.
//!
//! Charges only grow during one render (nothing is refunded when a value is dropped), so
//! the budget bounds the bytes a render ever creates, and the scan counter bounds the bytes
//! it ever reads through the gates. Memory in use stays below about twice the memory limit
//! (what was charged, plus one operation's result measured before it was made) plus the
//! input; work stays below the scan limit plus minijinja's step limit.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use minijinja::value::{Object, ObjectRepr, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// Bytes charged for each element of a list or map (a `Value` and its share of the
/// container), so lists of references to one big string still count.
const ELEMENT_BYTES: u64 = 32;

/// What stopped a render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tripped {
    /// The render would have created more bytes than its memory limit.
    Memory,
    /// The render would have read more bytes than its scan limit.
    Work,
}

/// The counters of one render; shared by the gates (which the environment holds) and the
/// template, which resets them before each render.
#[derive(Debug, Default)]
pub(super) struct Meter {
    memory_used: AtomicU64,
    memory_limit: AtomicU64,
    work_used: AtomicU64,
    work_limit: AtomicU64,
    /// 0: running; 1: memory; 2: work.
    tripped: AtomicU8,
}

impl Meter {
    /// Starts a render with these limits.
    pub(super) fn start(&self, memory_limit: u64, work_limit: u64) {
        self.memory_used.store(0, Ordering::Relaxed);
        self.work_used.store(0, Ordering::Relaxed);
        self.memory_limit.store(memory_limit, Ordering::Relaxed);
        self.work_limit.store(work_limit, Ordering::Relaxed);
        self.tripped.store(0, Ordering::Relaxed);
    }

    /// What stopped the last render, if a limit did.
    pub(super) fn tripped(&self) -> Option<Tripped> {
        match self.tripped.load(Ordering::Relaxed) {
            1 => Some(Tripped::Memory),
            2 => Some(Tripped::Work),
            _ => None,
        }
    }

    fn memory_left(&self) -> u64 {
        self.memory_limit.load(Ordering::Relaxed).saturating_sub(self.memory_used.load(Ordering::Relaxed))
    }

    fn work_left(&self) -> u64 {
        self.work_limit.load(Ordering::Relaxed).saturating_sub(self.work_used.load(Ordering::Relaxed))
    }

    fn trip(&self, what: Tripped) -> Error {
        self.tripped.store(if what == Tripped::Memory { 1 } else { 2 }, Ordering::Relaxed);
        Error::new(ErrorKind::InvalidOperation, "docmem: the template's render limit was reached")
    }

    /// Refuses when `bytes` more would pass the memory limit (nothing is charged).
    fn check_memory(&self, bytes: u64) -> Result<(), Error> {
        if bytes > self.memory_left() {
            return Err(self.trip(Tripped::Memory));
        }
        Ok(())
    }

    fn charge_memory(&self, bytes: u64) -> Result<(), Error> {
        self.check_memory(bytes)?;
        self.memory_used.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn charge_work(&self, bytes: u64) -> Result<(), Error> {
        if bytes > self.work_left() {
            return Err(self.trip(Tripped::Work));
        }
        self.work_used.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// `value`, or, for a one-shot iterator, a list of its items (charged, and refused past
    /// what is left of the memory budget), which the engine reads as it would the iterator.
    fn materialize(&self, value: &Value) -> Result<Value, Error> {
        if !is_iterator(value) {
            return Ok(value.clone());
        }
        let Ok(items) = value.try_iter() else { return Ok(value.clone()) };
        let mut list = Vec::new();
        for item in items {
            self.charge_memory(ELEMENT_BYTES)?;
            list.push(item);
        }
        Ok(Value::from(list))
    }

    /// Refuses a container nested deeper than [`MAX_NESTING`] (printing, comparing or
    /// dropping it would recurse that deep); the walk is charged as work.
    fn check_nesting(&self, value: &Value) -> Result<(), Error> {
        fn depth(value: &Value, at: u32, visited: &mut u64) -> u32 {
            if at > MAX_NESTING || !matches!(value.kind(), ValueKind::Seq | ValueKind::Map) || is_iterator(value) {
                return at;
            }
            let Ok(items) = value.try_iter() else { return at };
            let mut deepest = at;
            for item in items {
                *visited += 1;
                let inner = if value.kind() == ValueKind::Map { value.get_item(&item).unwrap_or_default() } else { item };
                deepest = deepest.max(depth(&inner, at + 1, visited));
                if deepest > MAX_NESTING {
                    break;
                }
            }
            deepest
        }
        if !matches!(value.kind(), ValueKind::Seq | ValueKind::Map) {
            return Ok(());
        }
        let mut visited = 0;
        let deepest = depth(value, 0, &mut visited);
        self.charge_work(visited.saturating_mul(ELEMENT_BYTES))?;
        if deepest > MAX_NESTING {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("values nested more than {MAX_NESTING} deep")));
        }
        Ok(())
    }

    /// The length of `value`'s text, counted without building it and charged as work
    /// ([`PRINT_COST`] per byte: printing is far slower than reading); past what is left of
    /// either budget it stops and refuses.
    fn display_len(&self, value: &Value) -> Result<u64, Error> {
        if let Some(s) = value.as_str() {
            return Ok(s.len() as u64);
        }
        // A one-shot iterator would be used up by printing it; its items are values that
        // were charged when they were made.
        if is_iterator(value) {
            return Ok(0);
        }
        // Text longer than what is left of either budget is refused whichever way it is
        // used, so counting stops there.
        let (work, memory) = (self.work_left() / PRINT_COST, self.memory_left());
        let mut counter = Counter { bytes: 0, cap: work.min(memory) };
        if write!(counter, "{value}").is_err() {
            return Err(self.trip(if work <= memory { Tripped::Work } else { Tripped::Memory }));
        }
        self.charge_work(counter.bytes.saturating_mul(PRINT_COST))?;
        Ok(counter.bytes)
    }
}

/// Work charged per byte printed to measure a value, against one per byte read: formatting
/// a value is about this much slower than walking it.
const PRINT_COST: u64 = 4;

/// Filters that give back a number, a flag or one of their operands: nothing is made and
/// (for the engine's containers) nothing long is read.
const SMALL_RESULTS: &[&str] =
    &["length", "count", "first", "last", "int", "float", "bool", "abs", "round", "attr", "min", "max", "default", "d", "sum"];

/// Filters that compare their items with each other (a sort's comparisons, a log factor).
const COMPARERS: &[&str] = &["sort", "unique", "min", "max", "groupby", "dictsort"];

/// How much of its operands an operation reads.
enum Reads {
    /// All of them, nested values included (comparisons, `in`, tests such as `in` or
    /// `lower`), this many times over.
    Deep(u64),
    /// Their own elements or bytes.
    Shallow,
    /// A string's bytes (`length` counts its characters); a container's size is known.
    Strings,
}

fn reads(kind: Checked, name: &str, operands: &[Value]) -> Reads {
    match kind {
        Checked::Operator if matches!(name, "compare" | "in") => Reads::Deep(1),
        Checked::Test => Reads::Deep(1),
        Checked::Filter | Checked::Method if COMPARERS.contains(&name) => {
            let items = operands.first().and_then(Value::len).unwrap_or(1) as u64;
            Reads::Deep(u64::from(64 - items.max(1).leading_zeros()))
        }
        Checked::Filter | Checked::Method if SMALL_RESULTS.contains(&name) => Reads::Strings,
        _ => Reads::Shallow,
    }
}

/// Whether `name` makes text from its operands' text (so their display length bounds it),
/// rather than comparing them or making a container of their items.
fn makes_text(kind: Checked, name: &str) -> bool {
    match kind {
        Checked::Operator => name == "~",
        Checked::Test => false,
        Checked::Filter | Checked::Method => !ELEMENT_MAKERS.contains(&name) && !SMALL_RESULTS.contains(&name),
    }
}

/// Bytes an operation reading `value` whole may touch: a string's bytes, and for containers
/// their elements, nested ones included (walked, not printed; the walk stops at `limit`).
fn deep_bytes(value: &Value, limit: u64) -> u64 {
    fn walk(value: &Value, depth: u32, total: &mut u64, limit: u64) {
        *total = total.saturating_add(own_bytes(value));
        if *total > limit
            || depth > 64
            || is_iterator(value)
            || !matches!(value.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::Iterable)
        {
            return;
        }
        let Ok(items) = value.try_iter() else { return };
        for item in items {
            if value.kind() == ValueKind::Map {
                let element = value.get_item(&item).unwrap_or_default();
                walk(&element, depth + 1, total, limit);
            }
            walk(&item, depth + 1, total, limit);
            if *total > limit {
                return;
            }
        }
    }
    let mut total = 0;
    walk(value, 0, &mut total, limit);
    total
}

/// A one-shot iterator (no length): printing or walking it would use it up.
fn is_iterator(value: &Value) -> bool {
    value.kind() == ValueKind::Iterable && value.len().is_none()
}

/// Counts the bytes a `Display` writes, failing once past `cap`.
struct Counter {
    bytes: u64,
    cap: u64,
}

impl fmt::Write for Counter {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.bytes = self.bytes.saturating_add(s.len() as u64);
        if self.bytes > self.cap {
            return Err(fmt::Error);
        }
        Ok(())
    }
}

/// The bytes a value holds of its own: a string's bytes, a container's elements (its items
/// are other values, charged when they were made).
fn own_bytes(value: &Value) -> u64 {
    match value.kind() {
        ValueKind::String => value.as_str().map_or(0, str::len) as u64,
        ValueKind::Bytes => value.len().map_or(0, |n| n as u64),
        // Lists, maps, and lazily joined lists (`a + b` is joined only when read).
        _ => value.len().map_or(0, |n| n as u64).saturating_mul(ELEMENT_BYTES),
    }
}

/// An integer operand's size, or the sum of those a map holds (keyword arguments arrive as
/// one: `indent(width=…)`).
fn int_arg(value: &Value) -> u64 {
    if value.is_integer() {
        return value.as_i64().map_or(u64::MAX, i64::unsigned_abs);
    }
    if value.kind() == ValueKind::Map {
        if let Ok(keys) = value.try_iter() {
            return keys
                .take(64)
                .map(|k| value.get_item(&k).map_or(0, |v| if v.is_integer() { int_arg(&v) } else { 0 }))
                .fold(0, u64::saturating_add);
        }
    }
    0
}

/// How deep lists and maps may nest.
const MAX_NESTING: u32 = 100;

/// What kind of instruction a [`Gate::Check`] stands before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Checked {
    /// A binary operator (`~`, `+`, `*`, comparisons, `in`, …).
    Operator,
    /// A filter (`x|name(…)`).
    Filter,
    /// A method (`x.name(…)`, Python's string methods).
    Method,
    /// A test (`x is name`).
    Test,
}

impl Checked {
    /// The name passed to the gate as its last argument.
    pub(super) fn tag(self) -> &'static str {
        match self {
            Checked::Operator => "operator",
            Checked::Filter => "filter",
            Checked::Method => "method",
            Checked::Test => "test",
        }
    }

    fn from_tag(tag: &str) -> Option<Self> {
        [Checked::Operator, Checked::Filter, Checked::Method, Checked::Test].into_iter().find(|c| c.tag() == tag)
    }
}

/// Filters and methods whose result has an element per byte or item of their input.
/// (Not `map`: with a filter's name it makes a new value of each item, so it takes the
/// general bound, from its operands' text.)
const ELEMENT_MAKERS: &[&str] = &[
    "list",
    "batch",
    "slice",
    "items",
    "dictsort",
    "split",
    "splitlines",
    "lines",
    "groupby",
    "unique",
    "sort",
    "reverse",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "chain",
    "zip",
    "keys",
    "values",
];

/// Filters and methods with a bound of their own in [`result_bound`].
const TEXT_MAKERS: &[&str] = &["replace", "indent", "format", "join"];

/// `name` as the `'static` name [`result_bound`] matches on (the rewrite passes it to the
/// gate as a constant), or `"other"` for the names that take the general bound.
pub(super) fn bound_name(name: &str) -> &'static str {
    TEXT_MAKERS.iter().chain(ELEMENT_MAKERS).chain(SMALL_RESULTS).find(|s| **s == name).copied().unwrap_or("other")
}

/// The most bytes `name` applied to `args` can create, from the operands' display lengths
/// `shown` (already measured). Generous on purpose: a real template's operations stay far
/// below the budget, and a wrong guess here can only refuse, never let through more.
fn result_bound(kind: Checked, name: &str, args: &[Value], shown: &[u64]) -> u64 {
    let total: u64 = shown.iter().fold(0u64, |a, &b| a.saturating_add(b));
    let ints: u64 = args.iter().map(int_arg).fold(0u64, u64::saturating_add);
    let shown_at = |i: usize| shown.get(i).copied().unwrap_or(0);
    let items_at = |i: usize| args.get(i).map_or(0, |v| v.len().map_or(0, |n| n as u64));
    match (kind, name) {
        (Checked::Test, _) => 0,
        (Checked::Filter | Checked::Method, name) if SMALL_RESULTS.contains(&name) => 0,
        (Checked::Operator, "*") => {
            // string or list times a count, either way round
            let (a, b) = (args.first(), args.get(1));
            let side = |v: Option<&Value>, s: u64| v.map_or(0, |v| s.saturating_add(own_bytes(v)));
            side(a, shown_at(0))
                .saturating_mul(b.map_or(0, int_arg))
                .saturating_add(side(b, shown_at(1)).saturating_mul(a.map_or(0, int_arg)))
        }
        (Checked::Operator, "~" | "+") => total.saturating_add(args.iter().map(own_bytes).fold(0u64, u64::saturating_add)),
        (Checked::Operator, _) => 0,
        (Checked::Filter | Checked::Method, "replace") => {
            // every match (or, for an empty pattern, every character boundary) may become
            // the replacement
            let (text, with) = (shown_at(0), shown_at(2));
            text.saturating_add(1).saturating_mul(with).saturating_add(total)
        }
        (Checked::Filter, "indent") => {
            let lines = args.first().and_then(Value::as_str).map_or(1, |s| s.bytes().filter(|&b| b == b'\n').count() as u64 + 1);
            let width = shown_at(1).max(args.get(1).map_or(0, int_arg));
            lines.saturating_mul(width).saturating_add(total)
        }
        (Checked::Filter | Checked::Method, "format") => {
            // printf- and str.format-style widths are numbers inside the format string
            let widths = args.first().and_then(Value::as_str).map_or(0, digit_runs_sum);
            total.saturating_add(widths).saturating_add(ints)
        }
        (Checked::Filter, "join") => {
            let separator = shown_at(1);
            total.saturating_add(items_at(0).saturating_mul(separator))
        }
        (Checked::Method, "join") => {
            // `sep.join(items)`: the receiver is the separator
            total.saturating_add(items_at(1).saturating_mul(shown_at(0)))
        }
        (Checked::Filter | Checked::Method, "split" | "splitlines" | "lines") => {
            // at most one piece per separator (one byte when none is given), and the text
            let text = shown_at(0);
            let separator = args.get(1).and_then(Value::as_str).map_or(1, |s| s.len().max(1)) as u64;
            text.saturating_add((text / separator).saturating_add(1).saturating_mul(ELEMENT_BYTES))
        }
        (_, name) if ELEMENT_MAKERS.contains(&name) => {
            // an element per character of a string, or per item of a container (whose
            // measure is already in elements)
            let elements = args.iter().zip(shown).fold(0u64, |sum, (v, &n)| {
                sum.saturating_add(if v.kind() == ValueKind::String { n.saturating_mul(ELEMENT_BYTES) } else { n })
            });
            elements.saturating_add(ints.saturating_mul(ELEMENT_BYTES))
        }
        // Case mapping and escaping grow text by a small factor at most.
        _ => total.saturating_mul(6).saturating_add(ints.saturating_mul(ELEMENT_BYTES)),
    }
}

fn digit_runs_sum(text: &str) -> u64 {
    let mut sum = 0u64;
    let mut run = 0u64;
    for b in text.bytes() {
        if b.is_ascii_digit() {
            run = run.saturating_mul(10).saturating_add(u64::from(b - b'0'));
        } else {
            sum = sum.saturating_add(run);
            run = 0;
        }
    }
    sum.saturating_add(run)
}

/// A function the rewritten instructions call (see the module docs).
#[derive(Debug)]
pub(super) enum Gate {
    /// `__docmem_check(operands…, name, kind)`: measures and hands the operands back,
    /// reversed, for `UnpackList` to push in their original order.
    Check(Arc<Meter>),
    /// `__docmem_new(value)`: charges a value just made; returns it.
    New(Arc<Meter>),
    /// `__docmem_out(value)`: charges the text about to be written; returns the value.
    Out(Arc<Meter>),
    /// `__docmem_raw(bytes)`: charges template text about to be written.
    Raw(Arc<Meter>),
}

/// The names the rewrite calls; a template that mentions the prefix is refused, so it cannot
/// shadow them.
pub(super) const GATE_PREFIX: &str = "__docmem_";
pub(super) const CHECK: &str = "__docmem_check";
pub(super) const NEW: &str = "__docmem_new";
pub(super) const OUT: &str = "__docmem_out";
pub(super) const RAW: &str = "__docmem_raw";

impl Gate {
    /// The four gates over one meter, with the names they are registered under.
    pub(super) fn all(meter: &Arc<Meter>) -> [(&'static str, Gate); 4] {
        [
            (CHECK, Gate::Check(meter.clone())),
            (NEW, Gate::New(meter.clone())),
            (OUT, Gate::Out(meter.clone())),
            (RAW, Gate::Raw(meter.clone())),
        ]
    }
}

fn gate_misused() -> Error {
    Error::new(ErrorKind::InvalidOperation, "docmem: a render gate was called with the wrong arguments")
}

impl Object for Gate {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn call(self: &Arc<Self>, _state: &State<'_, '_>, args: &[Value]) -> Result<Value, Error> {
        match &**self {
            Gate::Check(meter) => {
                let [operands @ .., name, kind] = args else { return Err(gate_misused()) };
                let (Some(name), Some(kind)) = (name.as_str(), kind.as_str().and_then(Checked::from_tag)) else {
                    return Err(gate_misused());
                };
                // A one-shot iterator cannot be measured without being used up: it is made a
                // list (charged) and handed on in its place.
                let operands = operands.iter().map(|v| meter.materialize(v)).collect::<Result<Vec<_>, _>>()?;
                // How large the result can be (printing the operands only for operations
                // that print them), then what the operation will read.
                let shown = operands
                    .iter()
                    .map(|v| if makes_text(kind, name) { meter.display_len(v) } else { Ok(own_bytes(v)) })
                    .collect::<Result<Vec<_>, _>>()?;
                meter.check_memory(result_bound(kind, name, &operands, &shown))?;
                for value in &operands {
                    let read = match reads(kind, name, &operands) {
                        Reads::Deep(times) => deep_bytes(value, meter.work_left()).saturating_mul(times),
                        Reads::Shallow => own_bytes(value),
                        Reads::Strings => value.as_str().map_or(0, |t| t.len() as u64),
                    };
                    meter.charge_work(read)?;
                }
                Ok(Value::from(operands.iter().rev().cloned().collect::<Vec<_>>()))
            }
            Gate::New(meter) => {
                let [value] = args else { return Err(gate_misused()) };
                meter.charge_memory(own_bytes(value))?;
                meter.check_nesting(value)?;
                Ok(value.clone())
            }
            Gate::Out(meter) => {
                let [value] = args else { return Err(gate_misused()) };
                let value = meter.materialize(value)?;
                let bytes = meter.display_len(&value)?;
                meter.charge_memory(bytes)?;
                Ok(value)
            }
            Gate::Raw(meter) => {
                let [bytes] = args else { return Err(gate_misused()) };
                meter.charge_memory(int_arg(bytes))?;
                Ok(Value::from(()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_cover_what_the_operations_make() {
        let s = Value::from("ab");
        let shown = [2, 1];
        assert_eq!(result_bound(Checked::Operator, "*", &[s.clone(), Value::from(1000)], &shown), 4000);
        assert_eq!(result_bound(Checked::Operator, "*", &[Value::from(1000), s.clone()], &[4, 2]), 4000);
        assert_eq!(result_bound(Checked::Operator, "==", &[s.clone(), s.clone()], &[2, 2]), 0);
        // "ab"|replace("", "xyz") = "xyzaxyzbxyz": at most (2 + 1) * 3 plus the operands
        let r = result_bound(Checked::Filter, "replace", &[s.clone(), Value::from(""), Value::from("xyz")], &[2, 0, 3]);
        assert!(r >= 11, "{r}");
        assert_eq!(digit_runs_sum("%10s and {:>200}"), 210);
        assert_eq!(result_bound(Checked::Test, "defined", &[s], &[2]), 0);
    }
}
