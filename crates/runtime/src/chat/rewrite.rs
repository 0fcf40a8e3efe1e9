//! Threads the byte meter's gates ([`super::meter`]) through a compiled chat template.
//!
//! The rewrite works on minijinja's compiled instructions (its `unstable_machinery` API,
//! pinned to one minor version in `Cargo.toml`): each instruction is copied, with gate calls
//! around those that make or write values, and every jump target moved to where its
//! instruction now starts. The instructions that do the work are minijinja's own, so a
//! template renders exactly as it would unmetered, or stops with the meter's error.
//!
//! Refused, because a chat template has no use for them and they would run code the rewrite
//! never saw or write more than it counts: `{% include %}`, `{% extends %}`, `{% block %}`,
//! `{% import %}`, `{% autoescape %}`, and calls with `*args`.

use minijinja::machinery::{Instruction, Instructions};
use minijinja::value::Value;

use super::meter::{bound_name, Checked, CHECK, GATE_PREFIX, NEW, OUT, RAW};

/// The instruction the template's compiled code may not hold, or the text it may not use.
#[derive(Debug)]
pub(super) struct Unsupported(pub(super) &'static str);

/// Refuses a template source that names the gates (it could shadow them).
pub(super) fn check_source(source: &str) -> Result<(), Unsupported> {
    if source.contains(GATE_PREFIX) {
        return Err(Unsupported("names starting with `__docmem_`, which are reserved"));
    }
    Ok(())
}

/// What goes around one original instruction.
enum Around {
    /// Copied as it is.
    Plain,
    /// Copied, then its result charged (`__docmem_new`).
    Made,
    /// Its `n` operands measured first (`__docmem_check`), then copied and its result charged.
    Checked { operands: u16, kind: Checked, name: &'static str },
    /// The value it writes charged first (`__docmem_out`).
    Written,
    /// The template text it writes charged first (`__docmem_raw`).
    WrittenRaw(usize),
}

fn around(instruction: &Instruction<'_>) -> Result<Around, Unsupported> {
    use Instruction as I;
    let operator = |name| Around::Checked { operands: 2, kind: Checked::Operator, name };
    let called = |count: &Option<u16>, kind, name| match count {
        Some(n) if *n < u16::MAX - 2 => Ok(Around::Checked { operands: *n, kind, name }),
        _ => Err(Unsupported("filters, methods or tests called with `*args`")),
    };
    Ok(match instruction {
        I::StringConcat => operator("~"),
        I::Add => operator("+"),
        I::Mul => operator("*"),
        I::Sub => operator("-"),
        I::Div => operator("/"),
        I::IntDiv => operator("//"),
        I::Rem => operator("%"),
        I::Pow => operator("**"),
        I::Eq | I::Ne | I::Lt | I::Lte | I::Gt | I::Gte | I::CompareAndPreserve(_) => operator("compare"),
        I::In => operator("in"),
        // The filter, method and test names are looked up by the instruction itself; the
        // gate only needs to know which bound applies, so they are matched here.
        I::ApplyFilter(name, count, _) => called(count, Checked::Filter, bound_name(name))?,
        I::CallMethod(name, count) => called(count, Checked::Method, bound_name(name))?,
        I::PerformTest(_, count, _) => called(count, Checked::Test, "test")?,
        I::Slice | I::CallFunction(..) | I::CallObject(_) | I::EndCapture | I::BuildList(_) | I::BuildMap(_) => Around::Made,
        I::Emit => Around::Written,
        I::EmitRaw(text) => Around::WrittenRaw(text.len()),
        I::Include(_) => return Err(Unsupported("`{% include %}` or `{% import %}`")),
        I::LoadBlocks | I::CallBlock(_) | I::FastSuper => return Err(Unsupported("`{% extends %}` and `{% block %}`")),
        I::ExportLocals => return Err(Unsupported("`{% import %}`")),
        I::UnpackLists(_) => return Err(Unsupported("`*args` calls")),
        // Output escaped for HTML grows up to six times past what the output gate counts.
        I::PushAutoEscape => return Err(Unsupported("`{% autoescape %}`")),
        _ => Around::Plain,
    })
}

/// `instructions` with the gates threaded through (see the module docs).
pub(super) fn metered<'s>(instructions: &Instructions<'s>) -> Result<Instructions<'s>, Unsupported> {
    let count = instructions.len();
    let plan = (0..count).map(|i| instructions.get(i as u32).map_or(Ok(Around::Plain), around)).collect::<Result<Vec<_>, _>>()?;
    // Where each original instruction's group starts, so jumps land on its gates.
    let mut start = Vec::with_capacity(count + 1);
    let mut at = 0u32;
    for step in &plan {
        start.push(at);
        at += match step {
            Around::Plain => 1,
            Around::Made | Around::Written => 2,
            Around::Checked { .. } => 6,
            Around::WrittenRaw(_) => 4,
        };
    }
    start.push(at);
    let moved = |target: &u32| start.get(*target as usize).copied().unwrap_or(at);

    let mut out = Instructions::new(instructions.name(), instructions.source());
    for (i, step) in plan.iter().enumerate() {
        let Some(original) = instructions.get(i as u32) else { continue };
        let line = instructions.get_line(i as u32).map_or(0, |l| u16::try_from(l).unwrap_or(u16::MAX));
        let mut add = |instruction| {
            out.add_with_line(instruction, line);
        };
        let copy = match original {
            Instruction::Jump(t) => Instruction::Jump(moved(t)),
            Instruction::JumpIfFalse(t) => Instruction::JumpIfFalse(moved(t)),
            Instruction::JumpIfFalseOrPop(t) => Instruction::JumpIfFalseOrPop(moved(t)),
            Instruction::JumpIfTrueOrPop(t) => Instruction::JumpIfTrueOrPop(moved(t)),
            Instruction::Iterate(t) => Instruction::Iterate(moved(t)),
            Instruction::BuildMacro(name, offset, flags) => Instruction::BuildMacro(name, moved(offset), *flags),
            other => other.clone(),
        };
        match step {
            Around::Plain => add(copy),
            Around::Made => {
                add(copy);
                add(Instruction::CallFunction(NEW, Some(1)));
            }
            Around::Checked { operands, kind, name } => {
                add(Instruction::LoadConst(Value::from(*name)));
                add(Instruction::LoadConst(Value::from(kind.tag())));
                add(Instruction::CallFunction(CHECK, Some(operands.saturating_add(2))));
                add(Instruction::UnpackList(usize::from(*operands)));
                add(copy);
                add(Instruction::CallFunction(NEW, Some(1)));
            }
            Around::Written => {
                add(Instruction::CallFunction(OUT, Some(1)));
                add(copy);
            }
            Around::WrittenRaw(bytes) => {
                add(Instruction::LoadConst(Value::from(*bytes)));
                add(Instruction::CallFunction(RAW, Some(1)));
                add(Instruction::DiscardTop);
                add(copy);
            }
        }
    }
    Ok(out)
}
